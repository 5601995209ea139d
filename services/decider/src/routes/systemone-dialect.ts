import type { Answer, Question, SystemOneRequest, SystemOneResponse } from "@localdecider/contracts/decider";
import { argmax, choiceConfidence, scoreStats } from "../decide/math";
import type { DecisionTask, QuestionOutcome, TaskQuestion } from "../decide/task";
import { malformedOutput } from "../upstream/failure";

/**
 * TypeSafe's System One dialect at the edge: a request's named questions as the decider's ordered task (in the
 * order the parsed body holds them), and the task's outcomes back as the answers map. System One has no
 * refusal: a request whose question gets no readable answer fails whole (502 upstream_malformed), as before.
 */

/** One System One question as the internal form, under its name. */
export function systemOneQuestion(name: string, question: Question): TaskQuestion {
  const instructions = question.instructions ?? undefined;
  switch (question.type) {
    case "noul":
      return {
        id: name,
        kind: "noul",
        instructions,
        options: [
          { label: "true", description: question.criteria?.true ?? undefined },
          { label: "false", description: question.criteria?.false ?? undefined },
        ],
      };
    case "score":
      return {
        id: name,
        kind: "score",
        instructions,
        options: question.criteria.map((description, i) => ({ label: String(i), description })),
      };
    case "choice":
      return {
        id: name,
        kind: "choice",
        instructions,
        options: Object.entries(question.criteria).map(([label, description]) => ({ label, description })),
      };
    case "box":
      return { id: name, kind: "box", instructions, options: [] };
  }
}

/** A System One request's questions as the internal form, in the order of the parsed body's keys. */
export function systemOneQuestions(questions: Record<string, Question>): TaskQuestion[] {
  return Object.entries(questions).map(([name, q]) => systemOneQuestion(name, q));
}

export function systemOneTask(request: SystemOneRequest): DecisionTask {
  return {
    model: request.model,
    state: request.state ?? null,
    assets: request.assets,
    questions: systemOneQuestions(request.questions),
    partial: false,
  };
}

/** The task's result as System One's answers map (keyed by name) and usage. */
export function systemOneResponse(
  request: SystemOneRequest,
  result: { model: string; outcomes: readonly QuestionOutcome[]; usage: { input: number; output: number } },
): SystemOneResponse {
  const names = Object.keys(request.questions);
  const answers: Record<string, Answer> = {};
  for (const [i, name] of names.entries()) {
    const outcome = result.outcomes[i];
    // partial is off for System One, so the decider refuses the request first; kept as a guard.
    if (outcome === undefined || !("distribution" in outcome)) {
      throw malformedOutput(1, outcome === undefined ? "no outcome" : outcome.refusal);
    }
    answers[name] = toAnswer(request.questions[name] as Question, outcome.distribution);
  }
  return {
    model: result.model,
    answers,
    usage: { input_tokens: result.usage.input, output_tokens: result.usage.output },
  };
}

/**
 * A question's answer from its final distribution (a box: from its edges and confidence, in native.ts's
 * BOX_FIELDS order).
 */
export function toAnswer(question: Question, dist: number[]): Answer {
  switch (question.type) {
    case "box": {
      const [top, bottom, left, right, confidence] = dist as [number, number, number, number, number];
      return { type: "box", box: { top, bottom, left, right }, confidence };
    }
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
