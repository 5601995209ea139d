import type { NativeQuestion } from "../upstream/types";
import type { Part } from "./plan";

/**
 * What one part's call brought back, read: its distribution over the part's options (a box: its edges and
 * confidence, BOX_FIELDS), a refusal (the server declined this question: the model's answer, never retried), or
 * why it is malformed.
 */
export type Read = { distribution: number[] } | { refusal: string } | { malformed: string };

/**
 * How far a native answer's probabilities may sum from 1. llama.cpp's own tests hold its answers to 1e-4
 * (test_systemone.py) and to 1e-3 where answers are summed after rounding; a server that rounds to four
 * places (its README's example) stays within this too.
 */
export const SUM_TOLERANCE = 1e-3;

/** A part of the plan as a native call's question, under the client's own question name. */
export function nativeQuestionOf(part: Part): NativeQuestion {
  return {
    key: part.question,
    type: part.kind,
    instructions: part.instructions,
    options: part.options.map((o) =>
      o.value === undefined
        ? { label: o.label, description: o.description }
        : { label: o.label, value: o.value, description: o.description },
    ),
  };
}

/**
 * A native server's answer to one part, checked against what was asked: present, of the part's type, and for
 * choice and score exactly the part's labels (score levels "0".."N-1") as keys, each probability a finite
 * number in [0, 1], summing to 1 within SUM_TOLERANCE; noul's `noul` a probability. Fields beside those are
 * ignored (the server's own `choice`, `score` and `confidence` too: the decider derives them from the
 * probabilities, after calibration). The distribution is the server's numbers as they are, never rescaled, so
 * without calibration a question asked whole is answered with exactly the server's probabilities.
 */
export function readNativeAnswer(part: Part, answer: unknown): Read {
  const name = JSON.stringify(part.question);
  if (answer === undefined) return { malformed: `the answers hold none for ${name}` };
  if (!isObject(answer)) return { malformed: `the answer for ${name} is not an object` };
  // Any native adapter reports a question its server declined as `{ type: "refusal" }` (upstream/types.ts).
  if (answer.type === "refusal") return { refusal: `the model server declined to answer ${name}` };
  if (answer.type !== part.kind) {
    return { malformed: `the answer for ${name} has type ${JSON.stringify(answer.type)}, not "${part.kind}"` };
  }
  if (part.kind === "box") return readBox(name, answer);
  if (part.kind === "noul") {
    const p = answer.noul;
    if (!isProbability(p)) return { malformed: `the answer for ${name} has noul ${shown(p)}, not a probability` };
    return { distribution: [p, 1 - p] };
  }
  const probabilities = answer.probabilities;
  if (!isObject(probabilities)) return { malformed: `the answer for ${name} has no probabilities object` };
  const labels = part.options.map((o) => o.label);
  const asked = new Set(labels);
  const unknown = Object.keys(probabilities).filter((key) => !asked.has(key));
  const missing = labels.filter((label) => !Object.hasOwn(probabilities, label));
  if (unknown.length > 0 || missing.length > 0) {
    return {
      malformed: `the answer for ${name} ${[
        missing.length > 0 ? `lacks ${listed(missing)}` : "",
        unknown.length > 0 ? `names ${listed(unknown)}, which were not asked` : "",
      ]
        .filter((t) => t !== "")
        .join(" and ")}`,
    };
  }
  const distribution: number[] = [];
  for (const label of labels) {
    const p = probabilities[label];
    if (!isProbability(p)) {
      return { malformed: `the answer for ${name} gives ${JSON.stringify(label)} ${shown(p)}, not a probability` };
    }
    distribution.push(p);
  }
  const total = distribution.reduce((a, b) => a + b, 0);
  if (Math.abs(total - 1) > SUM_TOLERANCE) {
    return { malformed: `the probabilities for ${name} sum to ${total}, not 1` };
  }
  return { distribution };
}

/** A box answer's fields, in the order toAnswer reads them. */
export const BOX_FIELDS = ["top", "bottom", "left", "right", "confidence"] as const;

/**
 * A box answer: four edges, each a fraction of the image in [0, 1] (Jev 1.14's clients read them as `top`,
 * `bottom`, `left` and `right`, beside `confidence`; nested under `box` as the decider answers them is read too),
 * and a confidence in [0, 1]. The edges are passed on as the server gave them, neither clamped nor reordered.
 */
function readBox(name: string, answer: Record<string, unknown>): Read {
  const edges = isObject(answer.box) ? answer.box : answer;
  const values: number[] = [];
  for (const field of BOX_FIELDS) {
    const value = field === "confidence" ? answer.confidence : edges[field];
    if (!isProbability(value)) {
      return { malformed: `the box for ${name} has ${field} ${shown(value)}, not a fraction from 0 to 1` };
    }
    values.push(value);
  }
  return { distribution: values };
}

function isProbability(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 && value <= 1;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length <= 40 ? text : `${text.slice(0, 40)}…`;
}

function listed(keys: readonly string[]): string {
  const names = keys.slice(0, 5).map((k) => JSON.stringify(k));
  return keys.length > 5 ? `${names.join(", ")} and ${keys.length - 5} more` : names.join(", ");
}
