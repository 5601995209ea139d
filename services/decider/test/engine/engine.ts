import type * as NodeLlamaCpp from "node-llama-cpp";
import { fromByteLevel } from "./byte-level";

/**
 * A real llama.cpp engine (node-llama-cpp's prebuilt CPU binary) over a GGUF file, reduced to what tests
 * of the decider need: tokenization, token pieces, and the full next-token distribution.
 */
export interface TinyEngine {
  readonly vocabSize: number;
  /** Tokens of a text, with special tokens such as <|im_start|> recognised (as llama-server tokenizes a rendered chat prompt). */
  tokenize(text: string): number[];
  /**
   * The piece of one token as llama-server reports it in logprobs: `bytes` are the token's bytes (none for
   * control and unused tokens), `text` is what the server puts in `token`: the bytes without a trailing
   * incomplete UTF-8 sequence, decoded with U+FFFD for any other invalid byte (so "" for a token that is
   * only part of a character).
   */
  piece(id: number): { text: string; bytes: number[] };
  /** Natural-log probabilities of every vocabulary token at the position after `tokens` (log-softmax of the raw logits, no sampling, temperature 1). */
  nextLogprobs(tokens: number[]): Promise<Float64Array>;
  /**
   * The `n` most likely next tokens with their natural-log probabilities, most likely first: what a server
   * reports as `top_logprobs`. Much cheaper than nextLogprobs (the engine selects them and sums the
   * normaliser natively), and the same numbers up to the normaliser's rounding, which renormalising over
   * the outcomes cancels.
   */
  nextTop(tokens: number[], n: number): Promise<{ id: number; logprob: number }[]>;
  close(): Promise<void>;
}

export interface EngineOptions {
  /** Context (KV cache) size in tokens; default 4096. A call with more tokens than this throws. */
  contextSize?: number;
  /**
   * Keep the evaluated prefix between calls, as llama-server's prompt cache does (default true); false
   * evaluates every call from scratch. Only the speed differs: the results are the same bit for bit.
   */
  reusePrefix?: boolean;
}

/**
 * node-llama-cpp is ESM only. Under Jest, swc turns `import()` into `require()`, which cannot load ESM, and
 * tsc keeps it; a Function body is compiled by neither, so this is a real dynamic import in both cases
 * (Jest also needs NODE_OPTIONS=--experimental-vm-modules for it; see the decider's `test` script).
 */
const importEsm = new Function("specifier", "return import(specifier)") as (specifier: string) => Promise<unknown>;

export async function openEngine(modelPath: string, options: EngineOptions = {}): Promise<TinyEngine> {
  const contextSize = options.contextSize ?? 4096;
  const { getLlama, LlamaLogLevel } = (await importEsm("node-llama-cpp")) as typeof NodeLlamaCpp;
  // gpu: false and build: "never": the prebuilt CPU binary or nothing; never a build or a download.
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, progressLogs: false });
  try {
    const model = await llama.loadModel({ modelPath });
    // One thread: for a model this small, more threads only wait on each other (4 threads on the 2 cores
    // here made each evaluation ~50x slower). No flash attention: its CPU kernel takes other paths for other
    // batch shapes, so the same tokens evaluated in other batches differed by up to 0.02 in a logprob.
    const context = await model.createContext({ contextSize, sequences: 1, threads: 1, flashAttention: false });
    return new LlamaEngine(llama, model, context.getSequence(), contextSize, options.reusePrefix ?? true);
  } catch (error) {
    await llama.dispose();
    throw error;
  }
}

type ControlledInput = Parameters<NodeLlamaCpp.LlamaContextSequence["controlledEvaluate"]>[0][number];
type GenerateNext = NonNullable<Extract<ControlledInput, readonly unknown[]>[1]>["generateNext"];
interface Next {
  logits?: Map<NodeLlamaCpp.Token, number>;
  totalLogitWeight?: number;
}

class LlamaEngine implements TinyEngine {
  readonly vocabSize: number;
  private readonly vocab: readonly string[];
  private readonly pieces = new Map<number, { text: string; bytes: number[] }>();
  /** Every evaluation waits for the previous one: the sequence holds one evaluated prefix at a time. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly llama: NodeLlamaCpp.Llama,
    private readonly model: NodeLlamaCpp.LlamaModel,
    private readonly sequence: NodeLlamaCpp.LlamaContextSequence,
    private readonly contextSize: number,
    private readonly reusePrefix: boolean,
  ) {
    this.vocab = model.fileInfo.metadata.tokenizer.ggml.tokens;
    this.vocabSize = this.vocab.length;
  }

  tokenize(text: string): number[] {
    return [...this.model.tokenize(text, true)];
  }

  piece(id: number): { text: string; bytes: number[] } {
    let piece = this.pieces.get(id);
    if (piece === undefined) {
      const bytes = this.pieceBytes(id);
      piece = { text: serverTokenText(bytes), bytes };
      this.pieces.set(id, piece);
    }
    return { text: piece.text, bytes: [...piece.bytes] };
  }

  /** llama.cpp's token_to_piece with special = false (llama-server's default) for a byte-level BPE vocabulary. */
  private pieceBytes(id: number): number[] {
    const text = this.vocab[id];
    if (text === undefined || !Number.isInteger(id)) throw new RangeError(`no token ${id}`);
    const attributes = this.model.getTokenAttributes(id as NodeLlamaCpp.Token);
    if (attributes.userDefined) return [...Buffer.from(text, "utf8")];
    if (attributes.normal) return fromByteLevel(text);
    return []; // control, unknown and unused tokens print nothing
  }

  nextLogprobs(tokens: number[]): Promise<Float64Array> {
    return this.serial(async () => {
      const logits = await this.evaluate(tokens, { logits: true });
      if (logits.logits === undefined || logits.logits.size !== this.vocabSize) {
        throw new Error(`expected ${this.vocabSize} logits, got ${logits.logits?.size}`);
      }
      return logSoftmax(logits.logits, this.vocabSize);
    });
  }

  nextTop(tokens: number[], n: number): Promise<{ id: number; logprob: number }[]> {
    return this.serial(async () => {
      const next = await this.evaluate(tokens, {
        logits: { filter: { tokens: [], includeMax: true, includeTop: n } },
        totalLogitWeight: true,
      });
      if (next.logits === undefined || next.totalLogitWeight === undefined) throw new Error("no logits returned");
      const max = Math.max(...next.logits.values());
      // totalLogitWeight is the sum of exp(logit - max logit) over the whole vocabulary.
      const logTotal = max + Math.log(next.totalLogitWeight);
      return [...next.logits]
        .map(([id, logit]) => ({ id, logprob: logit - logTotal }))
        .sort((a, b) => b.logprob - a.logprob)
        .slice(0, n);
    });
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** What the engine reports after `tokens`: the given `generateNext` outputs of the last position. */
  private async evaluate(tokens: number[], generateNext: GenerateNext): Promise<Next> {
    if (tokens.length === 0) throw new Error("an evaluation needs at least one token");
    if (tokens.length > this.contextSize) {
      throw new Error(`${tokens.length} tokens do not fit the context of ${this.contextSize}`);
    }
    // Keep the longest evaluated prefix, but evaluate at least the last two tokens again: logits are kept
    // only for the latest batch, and a batch of one token takes other paths through ggml's CPU matmuls,
    // which changes results by 1e-6..1e-4. No batch is a single token unless the whole input is (and then
    // nothing of it is ever kept), so the result depends on `tokens` only, bit for bit, not on what was
    // evaluated before.
    const evaluated = this.reusePrefix ? this.sequence.contextTokens : [];
    let keep = 0;
    while (keep < tokens.length - 2 && keep < evaluated.length && evaluated[keep] === tokens[keep]) keep++;
    if (keep === 1) keep = 0; // that one token may have been evaluated alone
    if (keep < this.sequence.nextTokenIndex) {
      await this.sequence.eraseContextTokenRanges([{ start: keep, end: this.sequence.nextTokenIndex }]);
    }
    const chunks = batches(tokens.slice(keep) as NodeLlamaCpp.Token[], this.sequence.context.batchSize);
    const lastChunk = chunks.pop() ?? [];
    for (const chunk of chunks) await this.sequence.controlledEvaluate(chunk);
    const last = lastChunk.length - 1;
    // Raw logits over the whole vocabulary: with no sampling options the sampler chain is greedy only,
    // which picks a token without changing or dropping any candidate.
    const results = await this.sequence.controlledEvaluate(
      lastChunk.map((token, i) => (i === last ? [token, { generateNext }] : token)),
    );
    return results[last]?.next ?? {};
  }

  async close(): Promise<void> {
    await this.queue;
    await this.llama.dispose(); // disposes the model, its context and the sequence too
  }
}

/**
 * Splits tokens into batches of at most `size` (one llama_decode each), none of a single token unless
 * there is only one token: a lone last token joins the batch before it.
 */
function batches<T>(tokens: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < tokens.length; i += size) out.push(tokens.slice(i, i + size));
  const tail = out[out.length - 1];
  const before = out[out.length - 2];
  if (tail?.length === 1 && before !== undefined) tail.unshift(before.pop() as T);
  return out;
}

/** log p = logit - log(sum(exp(logit))), in float64 with the maximum subtracted first. */
function logSoftmax(logits: Map<NodeLlamaCpp.Token, number>, vocabSize: number): Float64Array {
  const out = new Float64Array(vocabSize);
  let max = Number.NEGATIVE_INFINITY;
  for (const [token, logit] of logits) {
    out[token] = logit;
    if (logit > max) max = logit;
  }
  const exp = Math.exp; // a local: global lookups are slow in Jest's vm context
  let sum = 0;
  for (let i = 0; i < vocabSize; i++) sum += exp((out[i] ?? 0) - max);
  const logSum = max + Math.log(sum);
  for (let i = 0; i < vocabSize; i++) out[i] = (out[i] ?? 0) - logSum;
  return out;
}

/**
 * What llama-server writes as a logprob's `token` for these bytes: it drops a trailing incomplete UTF-8
 * sequence (its validate_utf8: a lead byte among the last 4 bytes with too few bytes after it), and its JSON
 * output replaces any other invalid byte with U+FFFD, as TextDecoder does.
 */
export function serverTokenText(bytes: readonly number[]): string {
  let end = bytes.length;
  for (let i = 1; i <= 4 && i <= bytes.length; i++) {
    const c = bytes[bytes.length - i] ?? 0;
    const needs = (c & 0xe0) === 0xc0 ? 2 : (c & 0xf0) === 0xe0 ? 3 : (c & 0xf8) === 0xf0 ? 4 : 0;
    if (needs > i) {
      end = bytes.length - i;
      break;
    }
  }
  return new TextDecoder("utf-8").decode(Uint8Array.from(bytes.slice(0, end)));
}
