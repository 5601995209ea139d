/** Pure answer math. Probabilities are never rounded. */

/** Index of the largest value; the first one on ties. */
export function argmax(values: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) {
    if ((values[i] as number) > (values[best] as number)) best = i;
  }
  return best;
}

const clamp01 = (x: number) => Math.min(1, Math.max(0, x));

/** Choice confidence `(n*pmax - 1)/(n - 1)`: 0 for a uniform distribution, 1 for a certain one; 1 when n = 1. */
export function choiceConfidence(probabilities: readonly number[]): number {
  const n = probabilities.length;
  if (n <= 1) return 1;
  const pmax = Math.max(...probabilities);
  // Clamped only against floating-point error: pmax >= 1/n holds exactly for a distribution.
  return clamp01((n * pmax - 1) / (n - 1));
}

/** Mean absolute distance from level m over levels 0..n-1 under weights p. */
export function spread(probabilities: readonly number[], m: number): number {
  return probabilities.reduce((sum, p, i) => sum + p * Math.abs(i - m), 0);
}

/**
 * U(n): the spread of a uniform distribution over n levels measured from the middle level m = (n-1)/2.
 * For even n, m lies between the two middle levels; the mean absolute deviation is the same from any
 * point between them (it is minimal on that interval), so this equals the spread from either middle level.
 */
export function uniformSpread(n: number): number {
  return spread(new Array<number>(n).fill(1 / n), (n - 1) / 2);
}

export interface ScoreStats {
  score: number;
  mode: number;
  confidence: number;
}

/** score = sum(i * p_i); confidence = max(0, 1 - sum(p_i * |i - mode|) / U(n)). */
export function scoreStats(probabilities: readonly number[]): ScoreStats {
  const score = probabilities.reduce((sum, p, i) => sum + i * p, 0);
  const mode = argmax(probabilities);
  const confidence = Math.max(0, 1 - spread(probabilities, mode) / uniformSpread(probabilities.length));
  return { score, mode, confidence };
}
