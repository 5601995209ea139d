import {
  applyTemperature,
  CALIBRATION_FORMAT,
  CALIBRATION_VERSION,
  type CalibrationFile,
  MAX_TEMPERATURE,
  MIN_TEMPERATURE,
  type ModelsCalibration,
  QUESTION_TYPES,
  type QuestionType,
  temperatureFor,
} from "@localdecider/contracts/decider";
import { logLoss, type Prediction } from "./metrics";
import type { LabelledAnswer } from "./predictions";
import { mixedHash } from "./random";

/**
 * The temperature fit. Records (not single answers: a record's answers share a state) are split into a
 * training and a held-out part by a seeded hash of their key, so the split repeats exactly and a record
 * keeps its side when the data set grows. Temperatures minimise log loss on the training part; the report
 * compares the held-out part before and after.
 */

/** Whether a record belongs to the held-out part: hash(seed, key) / 2^32 below the held-out share. */
export function isHeldOut(key: string, holdout: number, seed: number): boolean {
  return mixedHash(`${seed}\u0000${key}`) / 4294967296 < holdout;
}

/** The predictions under temperature T. */
export function scaled<P extends Prediction>(predictions: readonly P[], temperature: number): P[] {
  return predictions.map((p) => ({ ...p, probabilities: applyTemperature(p.probabilities, temperature) }));
}

/**
 * The temperature in [MIN_TEMPERATURE, MAX_TEMPERATURE] of least log loss. Log loss is convex in 1/T (the
 * log of a softmax is concave in its inverse temperature), so it has one minimum and a golden-section search
 * over log T finds it; 100 steps narrow the range to well below 1e-6 relative.
 */
export function fitTemperature(predictions: readonly Prediction[]): number {
  const loss = (logT: number) => logLoss(scaled(predictions, Math.exp(logT)));
  const ratio = (Math.sqrt(5) - 1) / 2;
  let a = Math.log(MIN_TEMPERATURE);
  let b = Math.log(MAX_TEMPERATURE);
  let c = b - ratio * (b - a);
  let d = a + ratio * (b - a);
  let fc = loss(c);
  let fd = loss(d);
  for (let i = 0; i < 100; i++) {
    if (fc <= fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - ratio * (b - a);
      fc = loss(c);
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + ratio * (b - a);
      fd = loss(d);
    }
  }
  return Math.exp((a + b) / 2);
}

export interface FitOptions {
  /** Training answers a question name needs for a temperature of its own. */
  minPerName: number;
  /** Training records (for the file's data size). */
  records: number;
  source?: string;
  now?: Date;
  /** The decider's prompt version the answers came from (GET /v1/models), recorded in the file. */
  promptVersion?: string | undefined;
}

/** A temperature per question type, and per question name with at least `minPerName` training answers. */
export function fitCalibration(train: readonly LabelledAnswer[], options: FitOptions): CalibrationFile {
  const types: CalibrationFile["types"] = {};
  for (const type of QUESTION_TYPES) {
    const list = train.filter((a) => a.type === type);
    if (list.length > 0) types[type] = { temperature: round(fitTemperature(list)), count: list.length };
  }
  const byName = new Map<string, LabelledAnswer[]>();
  for (const a of train) byName.set(a.name, [...(byName.get(a.name) ?? []), a]);
  const names: CalibrationFile["names"] = {};
  for (const [name, list] of [...byName.entries()].sort(([x], [y]) => x.localeCompare(y))) {
    // A name asked as two types has no one temperature: it keeps its types'. A name that is all of its
    // type's data would only repeat the type's temperature.
    const type = list[0]?.type as QuestionType;
    if (list.length < options.minPerName || list.some((a) => a.type !== type)) continue;
    if (list.length === types[type]?.count) continue;
    names[name] = { type, temperature: round(fitTemperature(list)), count: list.length };
  }
  return {
    format: CALIBRATION_FORMAT,
    version: CALIBRATION_VERSION,
    method: "temperature",
    fitted_at: (options.now ?? new Date()).toISOString(),
    ...(options.promptVersion === undefined ? {} : { prompt_version: options.promptVersion }),
    data: {
      records: options.records,
      answers: train.length,
      ...(options.source === undefined ? {} : { source: options.source }),
    },
    types,
    names,
  };
}

/** Six significant digits: enough for any probability shown, and a file people can read. */
const round = (t: number) => Number(t.toPrecision(6));

/** The answers as a decider with this calibration would give them. */
export function calibrated(answers: readonly LabelledAnswer[], file: CalibrationFile): LabelledAnswer[] {
  return answers.map((a) => ({
    ...a,
    probabilities: applyTemperature(a.probabilities, temperatureFor(file, a.name, a.type)),
  }));
}

/**
 * When the decider measured already applies a calibration, the new fit corrects what it answered; the file
 * to load in its place applies both: (p^(1/T1))^(1/T2) = p^(1/(T1*T2)), so each temperature is the product
 * of the one in force and the new one, for every type and every name either file names.
 */
export function composeWithActive(
  active: Extract<ModelsCalibration, { active: true }>,
  fitted: CalibrationFile,
): CalibrationFile {
  const inForce: CalibrationFile = {
    ...fitted,
    types: Object.fromEntries(
      Object.entries(active.temperatures.types).map(([t, temperature]) => [t, { temperature, count: 0 }]),
    ),
    names: Object.fromEntries(Object.entries(active.temperatures.names).map(([n, v]) => [n, { ...v, count: 0 }])),
  };
  const product = (name: string | undefined, type: QuestionType) =>
    round(
      Math.min(
        MAX_TEMPERATURE,
        Math.max(MIN_TEMPERATURE, temperatureFor(inForce, name ?? "", type) * temperatureFor(fitted, name ?? "", type)),
      ),
    );
  const types: CalibrationFile["types"] = {};
  for (const type of QUESTION_TYPES) {
    if (inForce.types[type] === undefined && fitted.types[type] === undefined) continue;
    types[type] = { temperature: product(undefined, type), count: fitted.types[type]?.count ?? 0 };
  }
  const names: CalibrationFile["names"] = {};
  for (const name of new Set([...Object.keys(inForce.names), ...Object.keys(fitted.names)])) {
    const type = (fitted.names[name] ?? inForce.names[name])?.type as QuestionType;
    names[name] = { type, temperature: product(name, type), count: fitted.names[name]?.count ?? 0 };
  }
  return { ...fitted, types, names };
}
