import type { Answer, TextQuestion } from "@localdecider/contracts/decider";
import type { Calibration } from "../calibration/calibration";
import { argmax, choiceConfidence, scoreStats } from "./math";
import type { Part, Plan } from "./plan";
import { recombineChunks } from "./recombine";

/** One probed part and the distribution read out for it, indexed like the part's options. */
export interface PartResult {
  part: Part;
  distribution: number[];
}

/** The chunk distributions of every split choice, in chunk order (the final round's input). */
export function chunkDistributions(results: readonly PartResult[]): Map<string, number[][]> {
  const chunks = new Map<string, number[][]>();
  for (const { part, distribution } of results) {
    if (part.round.kind !== "chunk") continue;
    const list = chunks.get(part.question) ?? [];
    list[part.round.index] = distribution;
    chunks.set(part.question, list);
  }
  return chunks;
}

/**
 * Every question's answer from the results of both rounds. A calibration (LOCALDECIDER_CALIBRATION) rescales
 * each question's final distribution before its answer is derived from it.
 */
export function answersOf(
  plan: Plan,
  results: readonly PartResult[],
  calibration?: Calibration,
): Record<string, Answer> {
  const whole = new Map<string, number[]>();
  const finals = new Map<string, number[]>();
  for (const { part, distribution } of results) {
    if (part.round.kind === "whole") whole.set(part.question, distribution);
    if (part.round.kind === "final") finals.set(part.question, distribution);
  }
  const chunks = chunkDistributions(results);
  return Object.fromEntries(
    Object.entries(plan.questions).map(([name, question]) => {
      const split = chunks.get(name);
      const dist =
        split === undefined
          ? (whole.get(name) as number[])
          : recombineChunks(split, finals.get(name) as number[]).flat();
      return [name, toAnswer(question, calibration === undefined ? dist : calibration.apply(name, question, dist))];
    }),
  );
}

export function toAnswer(question: TextQuestion, dist: number[]): Answer {
  switch (question.type) {
    case "noul":
      return { type: "noul", noul: dist[0] as number };
    case "score": {
      const { score, confidence } = scoreStats(dist);
      return {
        type: "score",
        score,
        probabilities: Object.fromEntries(dist.map((p, i) => [String(i), p])),
        confidence,
        legend: Object.fromEntries(question.criteria.map((c, i) => [String(i), c])),
      };
    }
    case "choice": {
      const labels = Object.keys(question.criteria);
      return {
        type: "choice",
        choice: labels[argmax(dist)] as string,
        probabilities: Object.fromEntries(labels.map((label, i) => [label, dist[i] as number])),
        confidence: choiceConfidence(dist),
      };
    }
  }
}
