import { seededRandom } from "./random";

/**
 * Pure evaluation metrics over labelled predictions. Every metric is "top-label": a prediction's
 * confidence is the probability of its most likely outcome (its argmax, the first on ties), and it is
 * correct when that outcome is the label. The definitions are in the README ("Metrics").
 */

/** One answered, labelled question: the distribution over its outcomes and the index of the true one. */
export interface Prediction {
  probabilities: readonly number[];
  label: number;
}

export const BIN_COUNT = 10;
/** Log loss clamps the label's probability here: one answer of probability 0 would make the mean infinite. */
export const MIN_PROBABILITY = 1e-15;

export function argmax(values: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if ((values[i] as number) > (values[best] as number)) best = i;
  return best;
}

export const confidence = (p: Prediction): number => p.probabilities[argmax(p.probabilities)] as number;
export const isCorrect = (p: Prediction): boolean => argmax(p.probabilities) === p.label;

const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / values.length;

/** Share of predictions whose argmax is the label. */
export function accuracy(predictions: readonly Prediction[]): number {
  return mean(predictions.map((p) => (isCorrect(p) ? 1 : 0)));
}

/** Mean of -ln p(label), with p clamped to MIN_PROBABILITY (natural log: nats). */
export function logLoss(predictions: readonly Prediction[]): number {
  return mean(predictions.map((p) => -Math.log(Math.max(MIN_PROBABILITY, p.probabilities[p.label] ?? 0))));
}

/** Brier's original multi-class score: mean over predictions of sum_k (p_k - y_k)^2, from 0 (best) to 2. */
export function brier(predictions: readonly Prediction[]): number {
  return mean(predictions.map((p) => p.probabilities.reduce((s, q, k) => s + (q - (k === p.label ? 1 : 0)) ** 2, 0)));
}

export interface Bin {
  /** The bin holds confidences in [lower, upper); the last one also holds 1. */
  lower: number;
  upper: number;
  count: number;
  /** Mean confidence and share correct of the bin's predictions; null for an empty bin. */
  confidence: number | null;
  accuracy: number | null;
}

/** Which of BIN_COUNT equal-width bins a confidence falls in: [m/10, (m+1)/10), with 1 in the last. */
export function binIndex(value: number, bins = BIN_COUNT): number {
  return Math.min(bins - 1, Math.max(0, Math.floor(value * bins)));
}

/** The reliability diagram's data: each bin's count, mean confidence and accuracy. */
export function reliabilityBins(predictions: readonly Prediction[], bins = BIN_COUNT): Bin[] {
  const sums = Array.from({ length: bins }, () => ({ count: 0, confidence: 0, correct: 0 }));
  for (const p of predictions) {
    const s = sums[binIndex(confidence(p), bins)] as (typeof sums)[number];
    s.count += 1;
    s.confidence += confidence(p);
    s.correct += isCorrect(p) ? 1 : 0;
  }
  return sums.map((s, m) => ({
    lower: m / bins,
    upper: (m + 1) / bins,
    count: s.count,
    confidence: s.count === 0 ? null : s.confidence / s.count,
    accuracy: s.count === 0 ? null : s.correct / s.count,
  }));
}

/** Expected calibration error: sum over bins of (bin count / n) * |accuracy - mean confidence|. */
export function expectedCalibrationError(predictions: readonly Prediction[], bins = BIN_COUNT): number {
  const n = predictions.length;
  return reliabilityBins(predictions, bins).reduce(
    (sum, b) =>
      b.count === 0 ? sum : sum + (b.count / n) * Math.abs((b.accuracy as number) - (b.confidence as number)),
    0,
  );
}

/** Maximum calibration error: the largest |accuracy - mean confidence| of a non-empty bin. */
export function maximumCalibrationError(predictions: readonly Prediction[], bins = BIN_COUNT): number {
  return reliabilityBins(predictions, bins).reduce(
    (worst, b) =>
      b.count === 0 ? worst : Math.max(worst, Math.abs((b.accuracy as number) - (b.confidence as number))),
    0,
  );
}

export const METRICS = {
  accuracy,
  log_loss: logLoss,
  brier,
  ece: expectedCalibrationError,
  mce: maximumCalibrationError,
} as const;
export type MetricName = keyof typeof METRICS;

/** A metric's value on the data and its bootstrap 95 % interval. */
export interface Estimate {
  value: number;
  ci95: [number, number];
}

export type Summary = { count: number } & { [K in MetricName]: Estimate | null };

/** Quantile q of sorted values, interpolating linearly between order statistics (R's type 7). */
export function quantile(sorted: readonly number[], q: number): number {
  const position = (sorted.length - 1) * q;
  const low = Math.floor(position);
  const high = Math.ceil(position);
  const a = sorted[low] as number;
  return a + ((sorted[high] as number) - a) * (position - low);
}

export interface BootstrapOptions {
  /** Resamples; 0 gives intervals of zero width at the value. */
  samples: number;
  seed: number;
}

/**
 * Every metric with a percentile bootstrap 95 % interval: `samples` resamples of the predictions with
 * replacement (the same resamples for every metric), the 2.5th and 97.5th percentiles of each metric.
 * Seeded, so the same data and seed give the same intervals. All null for no predictions.
 */
export function summarize(predictions: readonly Prediction[], options: BootstrapOptions): Summary {
  const n = predictions.length;
  const names = Object.keys(METRICS) as MetricName[];
  if (n === 0) return { count: 0, ...(Object.fromEntries(names.map((m) => [m, null])) as Record<MetricName, null>) };
  const random = seededRandom(options.seed);
  const draws: Record<MetricName, number[]> = Object.fromEntries(names.map((m) => [m, []])) as never;
  const terms = predictions.map(termsOf);
  for (let s = 0; s < options.samples; s++) {
    const all = fromTerms(Array.from({ length: n }, () => terms[Math.floor(random() * n)] as Terms));
    for (const m of names) draws[m].push(all[m]);
  }
  const estimate = (m: MetricName): Estimate => {
    const value = METRICS[m](predictions);
    if (options.samples === 0) return { value, ci95: [value, value] };
    const sorted = draws[m].sort((a, b) => a - b);
    return { value, ci95: [quantile(sorted, 0.025), quantile(sorted, 0.975)] };
  };
  return { count: n, ...(Object.fromEntries(names.map((m) => [m, estimate(m)])) as Record<MetricName, Estimate>) };
}

/** What every metric needs of one prediction, computed once so that resamples only add them up. */
interface Terms {
  correct: number;
  confidence: number;
  bin: number;
  logLoss: number;
  brier: number;
}

function termsOf(p: Prediction): Terms {
  return {
    correct: isCorrect(p) ? 1 : 0,
    confidence: confidence(p),
    bin: binIndex(confidence(p)),
    logLoss: logLoss([p]),
    brier: brier([p]),
  };
}

/** All five metrics of a resample in one pass; the same definitions as the functions above (tested equal). */
export function fromTerms(sample: readonly Terms[]): Record<MetricName, number> {
  const n = sample.length;
  const bins = Array.from({ length: BIN_COUNT }, () => ({ count: 0, confidence: 0, correct: 0 }));
  let correct = 0;
  let loss = 0;
  let squares = 0;
  for (const t of sample) {
    correct += t.correct;
    loss += t.logLoss;
    squares += t.brier;
    const b = bins[t.bin] as (typeof bins)[number];
    b.count += 1;
    b.confidence += t.confidence;
    b.correct += t.correct;
  }
  let ece = 0;
  let mce = 0;
  for (const b of bins) {
    if (b.count === 0) continue;
    const gap = Math.abs(b.correct / b.count - b.confidence / b.count);
    ece += (b.count / n) * gap;
    mce = Math.max(mce, gap);
  }
  return { accuracy: correct / n, log_loss: loss / n, brier: squares / n, ece, mce };
}

/** The five metrics through the one-pass path (what the bootstrap uses). */
export const metricsInOnePass = (predictions: readonly Prediction[]) => fromTerms(predictions.map(termsOf));
