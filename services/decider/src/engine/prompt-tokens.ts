import { ContextOverflowError } from "./evaluate";
import type { NodeLlamaCpp } from "./node-llama-cpp";

type Value = NodeLlamaCpp.LlamaTextValue;
type Tokenizer = NodeLlamaCpp.Tokenizer;

/**
 * Text past which a prompt's shared part is first counted in pieces, each its own turn of the event loop,
 * before it is tokenized whole: node-llama-cpp's tokenizer is synchronous native code (about 0.2 µs per
 * character here: 40 ms for 200 KB), so a state far larger than the context would otherwise hold the event
 * loop for its whole length only to be refused.
 */
export const PIECE_CHARS = 8192;
/**
 * Tokens the count in pieces may add per cut (a word cut in two, a run of spaces split): it refuses a
 * prompt only when its count passes the context by more than this per cut, so one that fits is never
 * refused; a prompt near the limit is tokenized whole and checked exactly.
 */
const SLACK_PER_CUT = 16;

/** The tokens of a probe's prompt: the part every probe and outcome shares, then each one's own. */
export interface PromptTokens {
  /** Tokens shared by every probe of the call (BOS first when the model asks for one). */
  prefix: number[];
  /** For each probe, for each of its continuations, the tokens after `prefix`. */
  tails: number[][][];
}

export interface TokenizeOptions {
  tokenizer: Tokenizer;
  /** BOS, when the model asks for it first and the template may not write it (as llama-server adds it). */
  bos: number | undefined;
  /** Tokens a sequence holds: a prompt longer than this is refused before any evaluation. */
  contextSize: number;
  signal: AbortSignal;
}

/**
 * Tokenizes rendered prompts (one per probe, each followed by each of its continuations) the way
 * node-llama-cpp's LlamaText.tokenize does, but the part all of them share once. A rendered chat prompt is
 * text runs between template pieces (special tokens text), each run tokenized on its own, so the runs before
 * the first one that differs (the system prompt, the state and the questions, up to the last template piece
 * before the prefilled answer) are tokenized once, and each probe's own runs with each continuation. A
 * continuation is tokenized with the text before it in its run, never apart (its first token may merge with
 * that text). The shared part is tokenized first and refused at once when it alone does not fit.
 */
export class PromptTokenizer {
  /** Shared parts tokenized lately (a request's probes of one prompt come one after another). */
  private readonly recent: { values: readonly Value[]; tokens: number[] }[] = [];

  async tokenize(
    rendered: readonly (readonly Value[])[],
    continuations: readonly (readonly string[])[],
    options: TokenizeOptions,
  ): Promise<PromptTokens> {
    const cut = sharedCut(rendered);
    const first = rendered[0] ?? [];
    const raw = await this.shared(first, cut, options);
    // BOS goes before the whole prompt's first token: the shared part's, or (when nothing is shared) each tail's.
    const prefix = raw.length > 0 ? withBos(raw, options.bos) : [];
    // Every probe adds at least one token of its own: a shared part that fills the context is already too long.
    if (prefix.length >= options.contextSize) throw new ContextOverflowError(prefix.length + 1, options.contextSize);
    const contentBefore = raw.length > 0;
    const tails: number[][][] = [];
    let tokenized = 0;
    for (const [i, values] of rendered.entries()) {
      const own = values.slice(cut);
      const ownChars = charsOf(own);
      const probe: number[][] = [];
      for (const continuation of continuations[i] ?? []) {
        const tail = tokenizeValues([...own, continuation], options.tokenizer, contentBefore);
        probe.push(raw.length > 0 ? tail : withBos(tail, options.bos));
        // A probe's own part is a few tokens; should a template leave it long, never hold the loop for long.
        tokenized += ownChars + continuation.length;
        if (tokenized > PIECE_CHARS) {
          tokenized = 0;
          await nextTurn(options.signal);
        }
      }
      tails.push(probe);
    }
    let longest = 0;
    for (const probe of tails) for (const tail of probe) longest = Math.max(longest, tail.length);
    if (prefix.length + longest > options.contextSize) {
      throw new ContextOverflowError(prefix.length + longest, options.contextSize);
    }
    return { prefix, tails };
  }

  /**
   * The tokens of the first `cut` values (the part every probe shares), from the recent ones when the same.
   * Before tokenizing a long prompt, it is counted in pieces (each its own turn of the event loop) and
   * refused when it is far past the context.
   */
  private async shared(first: readonly Value[], cut: number, options: TokenizeOptions): Promise<number[]> {
    const values = first.slice(0, cut);
    const known = this.recent.findIndex((r) => sameValues(r.values, values));
    const own = charsOf(first.slice(cut));
    if (known >= 0 && own <= 2 * PIECE_CHARS) {
      const [hit] = this.recent.splice(known, 1);
      this.recent.unshift(hit as (typeof this.recent)[number]);
      return (hit as (typeof this.recent)[number]).tokens;
    }
    if (charsOf(values) + own > 2 * PIECE_CHARS) {
      const { tokens, cuts } = await countInPieces(first, options);
      if (tokens > options.contextSize + cuts * SLACK_PER_CUT)
        throw new ContextOverflowError(tokens, options.contextSize, true);
    }
    options.signal.throwIfAborted();
    const tokens = tokenizeValues(values, options.tokenizer, false);
    this.recent.unshift({ values, tokens });
    this.recent.length = Math.min(this.recent.length, 4);
    return tokens;
  }
}

/**
 * How many leading values every rendered prompt shares, cut just after the last template piece among them
 * (a run of text is tokenized whole, so the shared part must end where a run does).
 */
export function sharedCut(rendered: readonly (readonly Value[])[]): number {
  const first = rendered[0] ?? [];
  let cut = 0;
  for (let i = 0; i < first.length; i++) {
    const value = first[i] as Value;
    if (!rendered.every((other) => i < other.length && sameValue(other[i] as Value, value))) break;
    if (typeof value !== "string") cut = i + 1;
  }
  return cut;
}

/**
 * The tokens of `values` as LlamaText.tokenize gives them (node-llama-cpp 3.22: each text run on its own,
 * with "trimLeadingSpace" once anything precedes it; template pieces with special tokens parsed); with
 * `contentBefore`, as the same values give them after other values that gave tokens.
 */
export function tokenizeValues(values: readonly Value[], tokenizer: Tokenizer, contentBefore: boolean): number[] {
  const out: number[] = [];
  let text = "";
  const hasContent = () => contentBefore || out.length > 0 || text.length > 0;
  const run = () => tokenizer(text, false, hasContent() ? "trimLeadingSpace" : undefined);
  for (const value of values) {
    if (typeof value === "string") {
      text += value;
      continue;
    }
    pushAll(out, run());
    // As LlamaText.tokenize: asked after the run's tokens are out, before the run is cleared.
    // A template piece (SpecialTokensText) is told whether content precedes it; a builtin token (SpecialToken,
    // e.g. BOS) takes no such argument and ignores it.
    pushAll(out, (value as NodeLlamaCpp.SpecialTokensText).tokenize(tokenizer, hasContent()));
    text = "";
  }
  pushAll(out, run());
  return out;
}

/**
 * About how many tokens `values` hold, tokenizing at most PIECE_CHARS characters per turn of the event
 * loop, and stopping as soon as the count passes the context by more than the slack: the pieces of a run are
 * cut after a space or a line end where one is near, and counted on their own.
 */
async function countInPieces(
  values: readonly Value[],
  options: TokenizeOptions,
): Promise<{ tokens: number; cuts: number }> {
  const { tokenizer, contextSize, signal } = options;
  let tokens = 0;
  let cuts = 0;
  for (const value of values) {
    if (typeof value !== "string") {
      tokens += tokenizeValues([value], tokenizer, true).length;
      continue;
    }
    for (let start = 0; start < value.length; ) {
      let end = Math.min(value.length, start + PIECE_CHARS);
      if (end < value.length) {
        const space = Math.max(value.lastIndexOf(" ", end), value.lastIndexOf("\n", end));
        if (space > end - 256) end = space + 1;
        cuts += 1;
      }
      tokens += tokenizer(value.slice(start, end), false, "trimLeadingSpace").length;
      start = end;
      if (tokens > contextSize + cuts * SLACK_PER_CUT) return { tokens, cuts };
      await nextTurn(signal);
    }
  }
  return { tokens, cuts };
}

function charsOf(values: readonly Value[]): number {
  let chars = 0;
  for (const v of values) chars += typeof v === "string" ? v.length : v.value.length;
  return chars;
}

/** Lets the event loop turn (other requests, /health) before going on. */
async function nextTurn(signal: AbortSignal): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  signal.throwIfAborted();
}

function withBos(tokens: number[], bos: number | undefined): number[] {
  return bos === undefined || tokens[0] === bos ? tokens : [bos, ...tokens];
}

function sameValue(a: Value, b: Value): boolean {
  if (typeof a === "string" || typeof b === "string") return a === b;
  return a.constructor === b.constructor && a.value === b.value;
}

function sameValues(a: readonly Value[], b: readonly Value[]): boolean {
  return a.length === b.length && a.every((v, i) => sameValue(v, b[i] as Value));
}

/** Appends without spreading (a state of 100k tokens is past the engine's argument limit). */
function pushAll(out: number[], tokens: readonly number[]): void {
  for (const t of tokens) out.push(t);
}
