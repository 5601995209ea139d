import { evaluateAfter, type GenerateNext, logSoftmax, type Next } from "../../src/engine/evaluate";
import { importNodeLlamaCpp, type NodeLlamaCpp } from "../../src/engine/node-llama-cpp";
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

export async function openEngine(modelPath: string, options: EngineOptions = {}): Promise<TinyEngine> {
  const contextSize = options.contextSize ?? 4096;
  const { getLlama, LlamaLogLevel } = await importNodeLlamaCpp();
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
      const next = await this.evaluate(tokens, { logits: true });
      if (next.logits === undefined) throw new Error("no logits returned");
      return logSoftmax(next.logits, this.vocabSize);
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
    if (tokens.length > this.contextSize) {
      throw new Error(`${tokens.length} tokens do not fit the context of ${this.contextSize}`);
    }
    return (await evaluateAfter(this.sequence, tokens, generateNext, this.reusePrefix)).next;
  }

  async close(): Promise<void> {
    await this.queue;
    await this.llama.dispose(); // disposes the model, its context and the sequence too
  }
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
