import type { JsonValue } from "@localdecider/contracts";
import type { Entry, ImageAsset } from "@localdecider/contracts/decider";

/**
 * The one internal form of a decision, whatever dialect it came in: each route translates its request into a
 * DecisionTask and a TaskResult back into its answer (routes/systemone-dialect.ts, routes/decisions-dialect.ts),
 * so that decide/ never learns which dialect a request came in. Questions are an ordered list (never object
 * keys, which reorder integer-like names), options are addressed by index (a choice's values may be typed:
 * `"true"` and `true` are two options), and each question is answered by a distribution or a refusal.
 */

/** What a question asks for: yes/no (`noul`), one of its options, a level of a rubric, or a box in an image. */
export type QuestionKind = "noul" | "choice" | "score" | "box";

/** One outcome of a question, by its index in `options`. */
export interface TaskOption {
  /**
   * The text the model and a System One server see for it, unique within its question: a choice's label, a
   * score level's index ("0".."N-1"), "true"/"false" for a yes/no question.
   */
  label: string;
  /** The client's own value for a choice option where it is typed (a Decisions server is sent it as it is). */
  value?: string | boolean;
  description: Entry | undefined;
}

export interface TaskQuestion {
  /** Unique within the task: the name a model server and the prompt see, the calibration's name. */
  id: string;
  kind: QuestionKind;
  instructions: Entry | undefined;
  /** In the client's order; the answer's distribution is indexed like them. A box has none. */
  options: readonly TaskOption[];
}

export interface DecisionTask {
  /** The model the client named. */
  model: string;
  /** What the questions are about, as the prompt and a native server render it. */
  state: JsonValue;
  /** Images by name, referenced from the state or the instructions; only a native server takes them. */
  assets?: Readonly<Record<string, ImageAsset>> | undefined;
  questions: readonly TaskQuestion[];
  /**
   * Whether a question may be answered by a refusal while the others are answered. Without it, a question
   * that gets no readable answer after the retries fails the whole task (a 502), as it did before refusals.
   */
  partial: boolean;
  /**
   * The client's cache key: tasks with the same key go to the same model server and slot (its prompt cache),
   * whatever their state; without one, a task prefers the slot that last read the same state.
   */
  cacheKey?: string | undefined;
}

/** A question's answer: its distribution over its options (a box: its edges and confidence), or a refusal. */
export type QuestionOutcome = { distribution: number[] } | { refusal: string };

/** Tokens of every upstream call: evaluated, taken from a prompt cache (as the servers reported it), generated. */
export interface TaskUsage {
  input: number;
  cached: number;
  output: number;
}

export interface TaskResult {
  /** The model that answered, as the client may see it. */
  model: string;
  /** One per question, in the task's order. */
  outcomes: QuestionOutcome[];
  usage: TaskUsage;
}
