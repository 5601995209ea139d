import { z } from "zod";

/**
 * The calibration file: temperatures fitted by `pnpm decider eval --fit` and applied by the decider
 * (LOCALDECIDER_CALIBRATION). Its schema and the meaning of a temperature live here, beside each other,
 * because the tool that writes the file and the service that applies it must agree on both.
 */

export const CALIBRATION_FORMAT = "localdecider-calibration" as const;
export const CALIBRATION_VERSION = 1 as const;

/** Temperatures outside this range mean the fit ran on degenerate data; refusing them protects answers. */
export const MIN_TEMPERATURE = 0.01;
export const MAX_TEMPERATURE = 100;

const Temperature = z.number().min(MIN_TEMPERATURE).max(MAX_TEMPERATURE);

/** One fitted temperature and the labelled answers it was fitted on. */
export const FittedTemperature = z.strictObject({
  temperature: Temperature,
  /** Labelled answers in the training split (0: carried over from the calibration in force at the fit). */
  count: z.number().int().min(0),
});
export type FittedTemperature = z.infer<typeof FittedTemperature>;

export const QUESTION_TYPES = ["noul", "choice", "score"] as const;
export type QuestionType = (typeof QUESTION_TYPES)[number];

export const CalibrationFile = z.strictObject({
  format: z.literal(CALIBRATION_FORMAT),
  version: z.literal(CALIBRATION_VERSION),
  method: z.literal("temperature"),
  /** ISO 8601 date-time of the fit. */
  fitted_at: z.iso.datetime({ offset: true }),
  /**
   * The decider's prompt version the answers were fitted on (GET /v1/models' `calibration.prompt_version`
   * at the fit). Answers depend on the prompt, so a decider on another version warns that the temperatures
   * may no longer fit. Absent in files written before it was recorded (unknown: the decider warns too).
   */
  prompt_version: z.string().min(1).max(32).optional(),
  /** The labelled data the fit used (records and answers in the training split). */
  data: z.strictObject({
    records: z.number().int().min(0),
    answers: z.number().int().min(0),
    /** Free text: the data set's file name, say. */
    source: z.string().max(1000).optional(),
  }),
  /** A temperature per question type; a type absent here is left as the model answers it. */
  types: z.strictObject({
    noul: FittedTemperature.optional(),
    choice: FittedTemperature.optional(),
    score: FittedTemperature.optional(),
  }),
  /** Per question name: overrides the type's temperature for questions of that name (and that type). */
  names: z.record(z.string().min(1), FittedTemperature.extend({ type: z.enum(QUESTION_TYPES) })).default({}),
});
export type CalibrationFile = z.infer<typeof CalibrationFile>;

/** The temperature for a question: its name's own when fitted for that type, else its type's, else 1. */
export function temperatureFor(file: CalibrationFile, name: string, type: QuestionType): number {
  const byName = Object.hasOwn(file.names, name) ? file.names[name] : undefined;
  if (byName !== undefined && byName.type === type) return byName.temperature;
  return file.types[type]?.temperature ?? 1;
}

/**
 * Temperature scaling: p_i ∝ exp(log p_i / T), renormalised. T > 1 softens a distribution, T < 1 sharpens
 * it; outcomes with probability 0 keep it. Computed in log space, shifted by the largest term, so that a
 * small T on small probabilities cannot underflow every outcome to 0.
 */
export function applyTemperature(distribution: readonly number[], temperature: number): number[] {
  if (temperature === 1) return [...distribution];
  const scaled = distribution.map((p) => (p > 0 ? Math.log(p) / temperature : Number.NEGATIVE_INFINITY));
  const top = Math.max(...scaled);
  if (top === Number.NEGATIVE_INFINITY) return [...distribution];
  const weights = scaled.map((s) => Math.exp(s - top));
  const total = weights.reduce((a, b) => a + b, 0);
  return weights.map((w) => w / total);
}
