import type { Entry } from "@localdecider/contracts/decider";
import { argmax } from "./math";
import type { QuestionKind, TaskOption, TaskQuestion } from "./task";

/** An outcome code as the model writes it: a JSON boolean (noul), a digit (score) or one letter (choice). */
export type OutcomeCode = boolean | number | string;

/**
 * The most outcomes one probed answer may have on a model server: it reports at most 20 alternatives per
 * position (`top_logprobs`; OpenAI's, vLLM's default and Ollama's limit), so a choice with more labels is
 * split into chunks of at most this many, and the chunks' leaders meet in a final round. An engine that
 * scores every outcome exactly (the embedded one) has no such limit: see Limits.outcomesPerPart.
 */
export const MAX_OUTCOMES_PER_PART = 20;

const LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";

/**
 * The codes of a choice's options, all of one width so that no code is the prefix of another: single
 * capital letters (each a single token in every tokenizer we know) up to 26 options, else two letters
 * (AA, AB, ...), which an engine scores as the product of their tokens' probabilities.
 */
export function choiceCodes(count: number): string[] {
  if (count <= LETTERS.length) return LETTERS.slice(0, count).split("");
  return Array.from({ length: count }, (_, i) => `${LETTERS[Math.floor(i / 26)]}${LETTERS[i % 26]}`);
}

export interface PartOption {
  code: OutcomeCode;
  /** The label (choice), the level index as a string (score) or "true"/"false" (noul). */
  label: string;
  /** A choice option's typed value, where the client gave one (TaskOption.value). */
  value?: string | boolean;
  description: Entry | undefined;
}

/**
 * One question as asked in one prompt: a whole question, one chunk of a choice, or a final round. A `box`
 * question (Jev 1.14, native System One servers only) is one part with no options: its answer is no
 * distribution but the four edges of a box.
 */
export interface Part {
  /** The question's id (TaskQuestion.id). */
  question: string;
  kind: QuestionKind;
  instructions: Entry | undefined;
  options: PartOption[];
  /** `chunk`: the `index`-th slice of a split choice's labels; `final`: the round among the chunks' leaders. */
  round: { kind: "whole" } | { kind: "chunk"; index: number; of: number } | { kind: "final" };
}

export interface Limits {
  /** Questions rendered in one prompt (the prefix that the probes of those questions share). */
  questionsPerCall: number;
  /** Outcomes rendered in one prompt. */
  outcomesPerCall: number;
  /**
   * Most outcomes one probe can tell apart: MAX_OUTCOMES_PER_PART (the default) on a model server, no
   * limit on an engine that scores every outcome; a choice with more labels is split into chunks.
   */
  outcomesPerPart?: number;
  /**
   * At most one part of each question per prompt (a native System One call sends each part under the
   * client's question name, so two chunks of one choice cannot share a call). Off for the chat probe, whose
   * prompts number their parts.
   */
  onePartPerQuestion?: boolean;
}

/**
 * The fewest outcomes a chunk of a split choice may have: with one, each chunk's leader is its only label and
 * the final round is the whole choice again; with none, splitting never ends (a loop that fills memory).
 * Whatever a server claims (upstream/option-limits.ts keeps its lessons at 2 or more), no plan is made with less.
 */
export const MIN_OUTCOMES_PER_PART = 2;

export function partsOf(question: TaskQuestion, outcomesPerPart = MAX_OUTCOMES_PER_PART): Part[] {
  const size = checkedChunkSize(outcomesPerPart);
  const { id, kind, instructions } = question;
  switch (kind) {
    case "noul":
      return [
        {
          question: id,
          kind,
          instructions,
          options: question.options.map((o, i) => ({ code: i === 0, label: o.label, description: o.description })),
          round: { kind: "whole" },
        },
      ];
    case "score":
      return [
        {
          question: id,
          kind,
          instructions,
          options: question.options.map((o, i) => ({ code: i, label: o.label, description: o.description })),
          round: { kind: "whole" },
        },
      ];
    case "box":
      return [{ question: id, kind, instructions, options: [], round: { kind: "whole" } }];
    case "choice": {
      const chunks: TaskOption[][] = [];
      for (let i = 0; i < question.options.length; i += size) {
        chunks.push(question.options.slice(i, i + size));
      }
      return chunks.map((chunk, index) => ({
        question: id,
        kind,
        instructions,
        options: choiceOptions(chunk),
        round: chunks.length === 1 ? { kind: "whole" } : { kind: "chunk", index, of: chunks.length },
      }));
    }
  }
}

export function choiceOptions(options: readonly TaskOption[]): PartOption[] {
  const codes = choiceCodes(options.length);
  return options.map((o, i) => ({
    code: codes[i] as string,
    label: o.label,
    ...(o.value === undefined ? {} : { value: o.value }),
    description: o.description,
  }));
}

/**
 * Packs parts, in order, into prompts of at most `questionsPerCall` parts and `outcomesPerCall` outcomes (and,
 * with `onePartPerQuestion`, never two parts of one question).
 */
export function packPrompts<T extends { options: readonly unknown[]; question: string }>(
  parts: T[],
  limits: Limits,
): T[][] {
  const prompts: T[][] = [];
  let current: T[] = [];
  let outcomes = 0;
  for (const part of parts) {
    const n = part.options.length;
    const full = current.length >= limits.questionsPerCall || outcomes + n > limits.outcomesPerCall;
    const repeated = limits.onePartPerQuestion === true && current.some((p) => p.question === part.question);
    if (current.length > 0 && (full || repeated)) {
      prompts.push(current);
      current = [];
      outcomes = 0;
    }
    current.push(part);
    outcomes += n;
  }
  if (current.length > 0) prompts.push(current);
  return prompts;
}

/**
 * Everything a request asks, decided before any call: the prompts of the first round and the split
 * choices that need a final round. Each part is probed once (one upstream call), so `callCount` is the
 * number of parts of both rounds.
 */
export interface Plan {
  /** The task's questions, in its order. */
  questions: readonly TaskQuestion[];
  /** First round: every whole question and every chunk, grouped into prompts that share a prefix. */
  firstRound: Part[][];
  /** Split choices, in request order, with their number of chunks. */
  splitChoices: { question: string; chunks: number }[];
  /** Upstream calls the request needs, both rounds together. */
  callCount: number;
  limits: Limits;
}

export function planRequest(questions: readonly TaskQuestion[], limits: Limits): Plan {
  const parts = questions.flatMap((q) => partsOf(q, chunkSize(limits)));
  const splitChoices = parts.flatMap((part) =>
    part.round.kind === "chunk" && part.round.index === 0 ? [{ question: part.question, chunks: part.round.of }] : [],
  );
  return {
    questions,
    firstRound: packPrompts(parts, limits),
    splitChoices,
    callCount: parts.length + splitChoices.length,
    limits,
  };
}

/**
 * The final round of every split choice: one part among each chunk's leader (its most probable label),
 * packed into prompts. `chunkDistributions` holds each split choice's chunk distributions in chunk order.
 */
export function finalRound(plan: Plan, chunkDistributions: ReadonlyMap<string, number[][]>): Part[][] {
  // A split choice with a chunk refused has no final round: the question is refused (answer.ts).
  const finals = plan.splitChoices.flatMap(({ question, chunks: count }): Part[] => {
    const q = questionById(plan, question);
    const chunks = chunkDistributions.get(question) ?? [];
    if (q === undefined || chunks.filter((c) => c !== undefined).length < count) return [];
    const leaders = chunks.map((dist, c) => q.options[c * chunkSize(plan.limits) + argmax(dist)] as TaskOption);
    return [
      {
        question,
        kind: "choice",
        instructions: q.instructions,
        options: choiceOptions(leaders),
        round: { kind: "final" },
      },
    ];
  });
  return packPrompts(finals, plan.limits);
}

/** The plan's question with this id. */
export function questionById(plan: Plan, id: string): TaskQuestion | undefined {
  return plan.questions.find((q) => q.id === id);
}

export function chunkSize(limits: Limits): number {
  return checkedChunkSize(limits.outcomesPerPart ?? MAX_OUTCOMES_PER_PART);
}

/**
 * A chunk's size, whole (an unlimited engine's is Infinity): one under MIN_OUTCOMES_PER_PART (or not a number)
 * is a fault of whatever computed it, thrown rather than planned with.
 */
function checkedChunkSize(size: number): number {
  if (!(size >= MIN_OUTCOMES_PER_PART)) {
    throw new RangeError(`a choice cannot be split into chunks of ${size} options (at least ${MIN_OUTCOMES_PER_PART})`);
  }
  return Math.floor(size);
}

/** The key of the i-th part of a prompt in the model's JSON answer. */
export function answerKey(index: number): string {
  return `q${index + 1}`;
}
