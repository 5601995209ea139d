import type { Calibration } from "../calibration/calibration";
import type { Part, Plan } from "./plan";
import { recombineChunks } from "./recombine";
import type { QuestionOutcome } from "./task";

/** One probed part and the distribution read out for it (indexed like the part's options), or its refusal. */
export type PartResult = { part: Part; distribution: number[] } | { part: Part; refusal: string };

/** The chunk distributions of every split choice, in chunk order (the final round's input); refused chunks absent. */
export function chunkDistributions(results: readonly PartResult[]): Map<string, number[][]> {
  const chunks = new Map<string, number[][]>();
  for (const result of results) {
    const { part } = result;
    if (part.round.kind !== "chunk" || !("distribution" in result)) continue;
    const list = chunks.get(part.question) ?? [];
    list[part.round.index] = result.distribution;
    chunks.set(part.question, list);
  }
  return chunks;
}

/**
 * Every question's outcome, in the plan's order, from the results of both rounds: its distribution, or a
 * refusal when any of its parts was refused (a split choice missing a chunk has no final round). A
 * calibration (LOCALDECIDER_CALIBRATION) rescales each final distribution before an answer is derived from it.
 */
export function answersOf(plan: Plan, results: readonly PartResult[], calibration?: Calibration): QuestionOutcome[] {
  const whole = new Map<string, number[]>();
  const finals = new Map<string, number[]>();
  const refused = new Map<string, string>();
  for (const result of results) {
    const { part } = result;
    if (!("distribution" in result)) {
      refused.set(part.question, result.refusal);
      continue;
    }
    if (part.round.kind === "whole") whole.set(part.question, result.distribution);
    if (part.round.kind === "final") finals.set(part.question, result.distribution);
  }
  const chunks = chunkDistributions(results);
  return plan.questions.map((question): QuestionOutcome => {
    const refusal = refused.get(question.id);
    if (refusal !== undefined) return { refusal };
    const split = chunks.get(question.id);
    const final = finals.get(question.id);
    const dist = split === undefined ? whole.get(question.id) : final && recombineChunks(split, final).flat();
    if (dist === undefined) return { refusal: "no answer was read for this question" };
    // A box's edges are no distribution: the calibration's temperatures apply to the others only.
    const calibrated =
      calibration === undefined || question.kind === "box"
        ? dist
        : calibration.applyKind(question.id, question.kind, dist);
    return { distribution: calibrated };
  });
}
