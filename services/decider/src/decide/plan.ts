import type { Entry, Question } from "@localdecider/contracts";

/** An outcome code as the model emits it: a JSON boolean (noul), a digit (score) or one letter (choice). */
export type OutcomeCode = boolean | number | string;

/**
 * The most outcomes one asked question may have: `top_logprobs` can show at most 20 tokens, so a choice
 * with more labels is split into chunks of at most this many and recombined.
 */
export const MAX_OUTCOMES_PER_PART = 20;

/** Choice codes: single letters, whose first (only) tokens differ in every tokenizer we know. */
export const CHOICE_CODES = "ABCDEFGHIJKLMNOPQRST".split("");

export interface PartOption {
  code: OutcomeCode;
  /** The label (choice), the level index as a string (score) or "true"/"false" (noul). */
  label: string;
  description: Entry | undefined;
}

/** One question as asked in one upstream call: a whole question, one chunk of a choice, or a final round. */
export interface Part {
  question: string;
  kind: Question["type"];
  instructions: Entry | undefined;
  options: PartOption[];
  /** `chunk`: labels `chunk`-th slice of a split choice; `final`: the round among the chunks' leaders. */
  round: { kind: "whole" } | { kind: "chunk"; index: number; of: number } | { kind: "final" };
}

export interface Limits {
  questionsPerCall: number;
  outcomesPerCall: number;
}

export function partsOf(name: string, question: Question): Part[] {
  const instructions = question.instructions ?? undefined;
  switch (question.type) {
    case "noul":
      return [
        {
          question: name,
          kind: "noul",
          instructions,
          options: [
            { code: true, label: "true", description: question.criteria?.true ?? undefined },
            { code: false, label: "false", description: question.criteria?.false ?? undefined },
          ],
          round: { kind: "whole" },
        },
      ];
    case "score":
      return [
        {
          question: name,
          kind: "score",
          instructions,
          options: question.criteria.map((description, i) => ({ code: i, label: String(i), description })),
          round: { kind: "whole" },
        },
      ];
    case "choice": {
      const labels = Object.entries(question.criteria);
      const chunks: [string, Entry][][] = [];
      for (let i = 0; i < labels.length; i += MAX_OUTCOMES_PER_PART) {
        chunks.push(labels.slice(i, i + MAX_OUTCOMES_PER_PART));
      }
      return chunks.map((chunk, index) => ({
        question: name,
        kind: "choice",
        instructions,
        options: choiceOptions(chunk),
        round: chunks.length === 1 ? { kind: "whole" } : { kind: "chunk", index, of: chunks.length },
      }));
    }
  }
}

export function choiceOptions(labels: [string, Entry][]): PartOption[] {
  return labels.map(([label, description], i) => ({ code: CHOICE_CODES[i] as string, label, description }));
}

/** Number of chunks of each split choice: each needs one final round with that many options. */
export function finalRoundSizes(parts: Part[]): Map<string, number> {
  const sizes = new Map<string, number>();
  for (const part of parts) {
    if (part.round.kind === "chunk") sizes.set(part.question, part.round.of);
  }
  return sizes;
}

/** Packs parts, in order, into calls of at most `questionsPerCall` parts and `outcomesPerCall` outcomes. */
export function packCalls<T extends { options: readonly unknown[] }>(parts: T[], limits: Limits): T[][] {
  const calls: T[][] = [];
  let current: T[] = [];
  let outcomes = 0;
  for (const part of parts) {
    const n = part.options.length;
    if (current.length > 0 && (current.length >= limits.questionsPerCall || outcomes + n > limits.outcomesPerCall)) {
      calls.push(current);
      current = [];
      outcomes = 0;
    }
    current.push(part);
    outcomes += n;
  }
  if (current.length > 0) calls.push(current);
  return calls;
}

export interface Plan {
  /** Calls of the first round: every whole question and every chunk. */
  firstRound: Part[][];
  /** Split choices and their number of chunks, asked in a second round among the chunks' leaders. */
  finalSizes: Map<string, number>;
  /** Every upstream call the request needs (both rounds), without malformed-output retries. */
  callCount: number;
}

export function planRequest(questions: Record<string, Question>, limits: Limits): Plan {
  const parts = Object.entries(questions).flatMap(([name, q]) => partsOf(name, q));
  const firstRound = packCalls(parts, limits);
  const finalSizes = finalRoundSizes(parts);
  const finalCalls = packCalls(
    [...finalSizes.values()].map((n) => ({ options: new Array<unknown>(n) })),
    limits,
  ).length;
  return { firstRound, finalSizes, callCount: firstRound.length + finalCalls };
}

/** The key of the i-th part of a call in the model's JSON answer. */
export function answerKey(index: number): string {
  return `q${index + 1}`;
}

/** The `response_format` JSON schema of one call: each answer an enum of its codes (a boolean for noul). */
export function callSchema(parts: Part[]): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  parts.forEach((part, i) => {
    const codes = part.options.map((o) => o.code);
    properties[answerKey(i)] =
      part.kind === "noul"
        ? { type: "boolean" }
        : part.kind === "score"
          ? { type: "integer", enum: codes }
          : { type: "string", enum: codes };
  });
  return {
    type: "object",
    properties,
    required: parts.map((_, i) => answerKey(i)),
    additionalProperties: false,
  };
}
