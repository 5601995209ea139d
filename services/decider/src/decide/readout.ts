import type { Alternative, Reading } from "../upstream/types";

/**
 * The share of the bound that an outcome absent from the reported alternatives gets. Such an outcome's
 * tokens all rank below the last reported one, so its probability lies between 0 and that token's: we give
 * it half of it, the middle of what is possible, rather than a silent 0.
 */
export const ABSENT_SHARE = 0.5;

/** Whitespace that JSON allows between a key's colon and its value. */
const JSON_WHITESPACE = /^[ \t\n\r]*/;
/** What may follow a complete value in our one-key object: whitespace, then `,` or `}` and anything after. */
const AFTER_VALUE = /^[ \t\n\r]*(?:[,}][\s\S]*)?$/;

/**
 * The index of the one outcome whose JSON text can begin with this token at the probed position, or
 * undefined when none can (junk, an unquoted letter inside a string, a partial UTF-8 piece) or several can
 * (whitespace alone, a bare quote): such a token says nothing about which outcome follows, so it never
 * counts. A token either is a prefix of an outcome's text (`t`, ` fa`) or holds the whole text followed by
 * what valid JSON allows there (` true,`, `B"}`).
 */
export function outcomeOfToken(token: string, reading: Reading): number | undefined {
  const rest = reading.whitespaceFirst ? token.replace(JSON_WHITESPACE, "") : token;
  // Nothing (an end-of-generation token) or whitespace alone could go on to any outcome.
  if (rest === "") return undefined;
  let found: number | undefined;
  for (const [i, literal] of reading.literals.entries()) {
    const begins =
      literal.startsWith(rest) || (rest.startsWith(literal) && AFTER_VALUE.test(rest.slice(literal.length)));
    if (!begins) continue;
    if (found !== undefined) return undefined;
    found = i;
  }
  return found;
}

export interface ReadOut {
  /** One probability per outcome, in the reading's order, summing to 1. */
  distribution: number[];
  /** Outcomes that no reported alternative could begin, estimated from the bound (see ABSENT_SHARE). */
  absent: number[];
}

/**
 * The distribution over the outcomes at the probed position: the reported alternatives' probabilities
 * summed per outcome they can begin, an absent outcome estimated from the bound, renormalised over the
 * outcomes. Computed in log space so that very unlikely outcomes keep a non-zero share. Undefined when
 * the server reported no alternatives.
 */
export function readOut(alternatives: readonly Alternative[], reading: Reading): ReadOut | undefined {
  if (alternatives.length === 0) return undefined;
  const perOutcome: number[][] = reading.literals.map(() => []);
  let lowest = Number.POSITIVE_INFINITY;
  for (const alt of alternatives) {
    lowest = Math.min(lowest, alt.logprob);
    // A piece that is not valid UTF-8 on its own (bytes but no text) begins no ASCII outcome.
    if (alt.token === "" && alt.bytes !== undefined && alt.bytes.length > 0) continue;
    const i = outcomeOfToken(alt.token, reading);
    if (i !== undefined) perOutcome[i]?.push(alt.logprob);
  }
  const absent: number[] = [];
  const logWeights = perOutcome.map((logprobs, i) => {
    if (logprobs.length > 0) return logSumExp(logprobs);
    absent.push(i);
    return lowest + Math.log(ABSENT_SHARE);
  });
  const total = logSumExp(logWeights);
  if (!Number.isFinite(total)) {
    // Every reported probability was 0: nothing distinguishes the outcomes.
    return { distribution: logWeights.map(() => 1 / logWeights.length), absent: logWeights.map((_, i) => i) };
  }
  return { distribution: logWeights.map((w) => inside01(Math.exp(w - total))), absent };
}

/**
 * The distribution over the outcomes from each outcome's exact log-probability (an engine that scores
 * every outcome): renormalised over the outcomes in log space, nothing estimated, nothing silent.
 */
export function readScores(scores: readonly number[]): number[] {
  const total = logSumExp(scores);
  if (!Number.isFinite(total)) return scores.map(() => 1 / scores.length);
  return scores.map((s) => inside01(Math.exp(s - total)));
}

/** The largest double below 1. */
const BELOW_ONE = 1 - 2 ** -53;

/**
 * Read from logprobs, no outcome is certain or impossible; only floating point could round one to exactly
 * 1 or 0 (a gap of more than ~37 nats), so such a value is held just inside.
 */
function inside01(p: number): number {
  return Math.min(BELOW_ONE, Math.max(Number.MIN_VALUE, p));
}

function logSumExp(values: readonly number[]): number {
  const max = Math.max(...values);
  if (max === Number.NEGATIVE_INFINITY) return max;
  let sum = 0;
  for (const v of values) sum += Math.exp(v - max);
  return max + Math.log(sum);
}
