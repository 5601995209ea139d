import { outcomesGrammar } from "./grammar";
import { type LlamaNative, type NativeResult, RESPONSE_FIELDS } from "./llama-native";
import { alternative, TOP_LOGPROBS, truncated } from "./reported";
import type { ChatMessage, ProbeOptions, ProbeRequest, ProbeResult } from "./types";

/**
 * Where a llama.cpp server's rendered prompt can be cut into token ids and text without changing a token:
 * right after a special token. llama.cpp splits a prompt's text at its special tokens first and tokenizes
 * each stretch of text between them on its own (`tokenizer_st_partition` in `src/llama-vocab.cpp`), so the
 * text after a special token is tokenized the same alone as within the whole prompt, and the tokens before
 * it are those of the text before it. `special` is that token's text, `tail` the template's text after it up
 * to the assistant's content: for Qwen2.5's ChatML `<|im_start|>` and `assistant\n`.
 */
export interface PromptSeam {
  special: string;
  tail: string;
}

/**
 * Assistant contents the seam is checked with: the start-up check's one-character prefill and the three
 * shapes of the decider's prefills (decide/probe.ts: before a boolean, a digit, a letter in quotes). The
 * template must render each as itself, at the very end of the prompt.
 */
const SAMPLE_PREFILLS = ["{", '{"q1":', '{"q1": ', '{"q1": "'];
/** How far back from the assistant's content the seam is looked for, in tokens. */
const MAX_TAIL_TOKENS = 16;

/**
 * The seam of this server's template, found with its own `/apply-template` and `/tokenize` on `messages`
 * (the start-up check's prompt), and verified: for every sample prefill, the tokens of the whole rendered
 * prompt equal the tokens of the text before the seam followed by those of the text after it. Otherwise
 * the reason why the prompts cannot be packed (the decider then asks each question as a chat call).
 */
export async function findSeam(
  native: LlamaNative,
  messages: readonly ChatMessage[],
  templateKwargs: boolean,
  signal: AbortSignal,
): Promise<{ seam: PromptSeam } | { reason: string }> {
  const rendered: string[] = [];
  for (const content of SAMPLE_PREFILLS) {
    rendered.push(await native.applyTemplate([...messages, { role: "assistant", content }], templateKwargs, signal));
  }
  // The prompt before the assistant's content: the first rendering less its one-character prefill.
  const before = (rendered[0] as string).slice(0, -(SAMPLE_PREFILLS[0] as string).length);
  if (!SAMPLE_PREFILLS.every((p, i) => rendered[i] === before + p)) {
    return { reason: "the chat template does not end the prompt with the assistant's prefill as it is" };
  }
  const tokens = await native.pieces(before, signal);
  let tail = "";
  for (let j = tokens.length - 1; j >= 0 && j >= tokens.length - MAX_TAIL_TOKENS; j--) {
    const { id, piece } = tokens[j] as (typeof tokens)[number];
    if (typeof piece !== "string") break;
    if (await isSpecial(native, id, piece, signal)) {
      if (!before.endsWith(piece + tail)) {
        return { reason: "the server's tokens of the prompt do not spell its text back" };
      }
      const head = await native.tokenize(before.slice(0, before.length - tail.length), { addSpecial: true }, signal);
      for (const [i, content] of SAMPLE_PREFILLS.entries()) {
        const whole = await native.tokenize(rendered[i] as string, { addSpecial: true }, signal);
        const rest = await native.tokenize(tail + content, { addSpecial: false }, signal);
        if (!sameIds(whole, [...head, ...rest])) {
          return { reason: `cut after ${JSON.stringify(piece)}, the prompt tokenizes differently` };
        }
      }
      return { seam: { special: piece, tail } };
    }
    tail = piece + tail;
  }
  return {
    reason: `no special token among the template's last ${MAX_TAIL_TOKENS} tokens before the assistant's content`,
  };
}

/**
 * A special (control) token: its text is that one token when special tokens are parsed, and not when they
 * are not (an ordinary token's text tokenizes the same either way).
 */
async function isSpecial(native: LlamaNative, id: number, piece: string, signal: AbortSignal): Promise<boolean> {
  const parsed = await native.tokenize(piece, { addSpecial: false, parseSpecial: true }, signal);
  if (!sameIds(parsed, [id])) return false;
  const plain = await native.tokenize(piece, { addSpecial: false, parseSpecial: false }, signal);
  return !sameIds(plain, [id]);
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((t, i) => t === b[i]);
}

/**
 * A prompt's probes in one call to llama.cpp's `/completion`: the prompt is rendered once by the server's
 * template (`/apply-template`), its shared part tokenized once (`/tokenize`), and every probe sent as that
 * part's token ids followed by its own text (the template's tail and the probe's prefill), all in the
 * request's slot (`id_slot`), where the server runs them one after another on the prefix it has cached.
 * Each prompt's tokens are those the chat endpoint evaluates for the same messages (the seam, above), and
 * the alternatives read are the same raw ones (`n_probs`, `post_sampling_probs: false`: the softmax of the
 * logits before any sampler, as the chat endpoint's `top_logprobs`), so the answers are the same.
 */
export class PackedProbes {
  constructor(
    private readonly native: LlamaNative,
    private readonly seam: PromptSeam,
    private readonly templateKwargs: boolean,
  ) {}

  /**
   * The probes' results in order; undefined when this prompt cannot be cut at the seam (the template
   * rendered it otherwise), so the caller asks them another way. The probes share all but their last message.
   */
  async probeMany(requests: readonly ProbeRequest[], options: ProbeOptions): Promise<ProbeResult[] | undefined> {
    const first = requests[0];
    if (first === undefined) return [];
    const { signal, slot } = options;
    const rendered = await this.native.applyTemplate(first.messages, this.templateKwargs, signal);
    const end = this.seam.tail + prefillOf(first);
    if (!rendered.endsWith(this.seam.special + end)) return undefined;
    const head = await this.native.tokenize(
      rendered.slice(0, rendered.length - end.length),
      { addSpecial: true },
      signal,
    );
    if (head.length === 0) return undefined;
    const ids = head.join(",");
    const suffixes = requests.map((r) => this.seam.tail + prefillOf(r));
    const results = await this.native.completion(completionBody(ids, suffixes, slot), requests.length, signal);
    const out: ProbeResult[] = [];
    for (const [i, result] of results.entries()) {
      let answer = result;
      if (pieceWithoutLogprobs(answer)) {
        // As on the chat path: the sampled token was part of a UTF-8 character, so the server reported
        // nothing; asked again with the sampled token held to the outcomes' texts. The alternatives are
        // the raw distribution either way.
        const grammar = outcomesGrammar((requests[i] as ProbeRequest).reading);
        const again = completionBody(ids, [suffixes[i] as string], slot, grammar);
        answer = (await this.native.completion(again, 1, signal))[0] as NativeResult;
      }
      out.push(resultOf(answer));
    }
    return out;
  }
}

function prefillOf(request: ProbeRequest): string {
  return request.messages.at(-1)?.content ?? "";
}

const FIELDS = JSON.stringify(RESPONSE_FIELDS);

/**
 * The `/completion` body, as the bytes sent: each prompt is `[<the head's ids>, "<its suffix>"]` (a mixed
 * prompt: the ids as they are, the text tokenized after them). The ids are written once and copied into
 * each prompt: with 16 prompts of ~2,400 tokens the body is ~250 KB, mostly ids.
 */
export function completionBody(
  ids: string,
  suffixes: readonly string[],
  slot: number | undefined,
  grammar?: string,
): Buffer {
  const head = Buffer.from(ids);
  const parts: Buffer[] = [Buffer.from('{"prompt":[')];
  for (const [i, suffix] of suffixes.entries()) {
    parts.push(Buffer.from(i === 0 ? "[" : ",["), head, Buffer.from(`,${JSON.stringify(suffix)}]`));
  }
  const pinned = slot !== undefined && slot >= 0 ? `"id_slot":${slot},` : "";
  const held = grammar === undefined ? "" : `"grammar":${JSON.stringify(grammar)},`;
  parts.push(
    Buffer.from(
      `],"n_predict":1,"temperature":0,"n_probs":${TOP_LOGPROBS},"post_sampling_probs":false,` +
        `"cache_prompt":true,${pinned}${held}"response_fields":${FIELDS}}`,
    ),
  );
  return Buffer.concat(parts);
}

/** llama.cpp's answer when the one token it sampled is a piece of a UTF-8 character: no probabilities. */
function pieceWithoutLogprobs(result: NativeResult): boolean {
  return (
    (result.completion_probabilities ?? []).length === 0 &&
    result.tokens_predicted === 1 &&
    result.stop_type === "limit"
  );
}

function resultOf(result: NativeResult): ProbeResult {
  const first = result.completion_probabilities?.[0];
  const usage = {
    input: result["timings/prompt_n"] ?? 0,
    output: result.tokens_predicted ?? 0,
    cached: result["timings/cache_n"] ?? 0,
  };
  if (first === undefined) {
    const content = result.content;
    return {
      alternatives: null,
      // Without logprobs the decoded text is all there is (its probability unknown, so 0 in log space).
      emitted: content === undefined ? null : { token: content, logprob: 0 },
      usage,
      raw: truncated(JSON.stringify(result)),
    };
  }
  return { alternatives: (first.top_logprobs ?? []).map(alternative), emitted: alternative(first), usage };
}
