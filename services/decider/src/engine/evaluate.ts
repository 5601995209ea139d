import type { NodeLlamaCpp } from "./node-llama-cpp";

type ControlledInput = Parameters<NodeLlamaCpp.LlamaContextSequence["controlledEvaluate"]>[0][number];
/** What to compute at the last position of an evaluation (logits, filtered or whole, and their normaliser). */
export type GenerateNext = NonNullable<Extract<ControlledInput, readonly unknown[]>[1]>["generateNext"];

/** What the engine reports after an evaluation's last token. */
export interface Next {
  logits?: Map<NodeLlamaCpp.Token, number>;
  /** Sum of exp(logit - max logit) over the whole vocabulary. */
  totalLogitWeight?: number;
}

/**
 * Evaluates `tokens` on a sequence and reports `generateNext` for the position after the last one. The
 * sequence keeps the longest prefix it already evaluated, but evaluates at least the last two tokens again:
 * logits are kept only for the latest batch, and a batch of one token takes other paths through ggml's CPU
 * matmuls, which changes results by 1e-6..1e-4. No batch is a single token unless the whole input is (and
 * then nothing of it is ever kept), so the result depends on `tokens` only, bit for bit, not on what the
 * sequence evaluated before. Returns the report and how many tokens were evaluated (not taken from cache).
 */
export async function evaluateAfter(
  sequence: NodeLlamaCpp.LlamaContextSequence,
  tokens: readonly number[],
  generateNext: GenerateNext,
  reusePrefix = true,
): Promise<{ next: Next; evaluated: number }> {
  if (tokens.length === 0) throw new Error("an evaluation needs at least one token");
  if (tokens.length > sequence.contextSize) {
    throw new ContextOverflowError(tokens.length, sequence.contextSize);
  }
  const cached = reusePrefix ? sequence.contextTokens : [];
  let keep = 0;
  while (keep < tokens.length - 2 && keep < cached.length && cached[keep] === tokens[keep]) keep++;
  if (keep === 1) keep = 0; // that one token may have been evaluated alone
  if (keep < sequence.nextTokenIndex) {
    await sequence.eraseContextTokenRanges([{ start: keep, end: sequence.nextTokenIndex }]);
  }
  const chunks = batches(tokens.slice(keep) as NodeLlamaCpp.Token[], sequence.context.batchSize);
  const lastChunk = chunks.pop() ?? [];
  for (const chunk of chunks) await sequence.controlledEvaluate(chunk);
  const last = lastChunk.length - 1;
  // With no sampling options the sampler chain is greedy only, which reports logits without changing or
  // dropping any candidate.
  const results = await sequence.controlledEvaluate(
    lastChunk.map((token, i) => (i === last ? [token, { generateNext }] : token)),
  );
  return { next: results[last]?.next ?? {}, evaluated: tokens.length - keep };
}

/** A prompt longer than a sequence's context. */
export class ContextOverflowError extends Error {
  constructor(
    readonly tokens: number,
    readonly contextSize: number,
    /** Counted in pieces and stopped early: the prompt holds about this many tokens or more. */
    readonly atLeast = false,
  ) {
    super(
      `${atLeast ? "about " : ""}${tokens}${atLeast ? " or more" : ""} tokens do not fit the context of ${contextSize}`,
    );
    this.name = "ContextOverflowError";
  }
}

/**
 * Splits tokens into batches of at most `size` (one llama_decode each), none of a single token unless
 * there is only one token: a lone last token joins the batch before it.
 */
export function batches<T>(tokens: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < tokens.length; i += size) out.push(tokens.slice(i, i + size));
  const tail = out[out.length - 1];
  const before = out[out.length - 2];
  if (tail?.length === 1 && before !== undefined) tail.unshift(before.pop() as T);
  return out;
}

/** log p = logit - log(sum(exp(logit))) over the whole vocabulary, from every token's logit, in float64. */
export function logSoftmax(logits: Map<NodeLlamaCpp.Token, number>, vocabSize: number): Float64Array {
  if (logits.size !== vocabSize) throw new Error(`expected ${vocabSize} logits, got ${logits.size}`);
  const logSum = logNormaliser(logits);
  const out = new Float64Array(vocabSize);
  for (const [token, logit] of logits) out[token] = logit - logSum;
  return out;
}

/** log(sum(exp(logit))) over a whole vocabulary's logits, in float64. */
export function logNormaliser(logits: Map<NodeLlamaCpp.Token, number>): number {
  let max = Number.NEGATIVE_INFINITY;
  for (const logit of logits.values()) if (logit > max) max = logit;
  const exp = Math.exp;
  let sum = 0;
  for (const logit of logits.values()) sum += exp(logit - max);
  return max + Math.log(sum);
}
