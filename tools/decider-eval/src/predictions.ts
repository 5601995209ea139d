import type { Answer, QuestionType, TextQuestion } from "@localdecider/contracts/decider";
import type { DataRecord, Label } from "./dataset";
import type { Prediction } from "./metrics";

/** A labelled answer, with where it came from (for grouping, the split and the fit). */
export interface LabelledAnswer extends Prediction {
  /** The record's key. */
  record: string;
  name: string;
  type: QuestionType;
}

/** The outcomes of a question in a fixed order: [true, false], the choice's labels, or the levels 0..n-1. */
export function outcomesOf(question: TextQuestion): string[] {
  switch (question.type) {
    case "noul":
      return ["true", "false"];
    case "choice":
      return Object.keys(question.criteria);
    case "score":
      return question.criteria.map((_, i) => String(i));
  }
}

/** An answer with probabilities: what a data set's questions (noul, choice, score) get. */
type TextAnswer = Exclude<Answer, { type: "box" }>;

/** The answer's distribution in outcomesOf order. */
export function distributionOf(question: TextQuestion, answer: TextAnswer): number[] {
  if (answer.type === "noul") return [answer.noul, 1 - answer.noul];
  return outcomesOf(question).map((o) => answer.probabilities[o] ?? 0);
}

/**
 * The labelled answers of one answered record. A question without a label is asked but not scored; an
 * answer whose type does not match its question (a broken server) is skipped and counted by the caller.
 */
export function labelledAnswers(key: string, record: DataRecord, answers: Record<string, Answer>): LabelledAnswer[] {
  const out: LabelledAnswer[] = [];
  for (const [name, label] of Object.entries(record.labels)) {
    const question = record.questions[name] as TextQuestion;
    const answer = answers[name];
    if (answer === undefined || answer.type === "box" || answer.type !== question.type) continue;
    out.push({
      record: key,
      name,
      type: question.type,
      probabilities: distributionOf(question, answer),
      label: outcomesOf(question).indexOf(labelText(label)),
    });
  }
  return out;
}

const labelText = (label: Label): string => String(label);
