import type { ChatMessage, ProbeRequest, Reading } from "../upstream/types";
import { answerKey, type Part } from "./plan";

/**
 * The assistant prefill that ends exactly where the part's value begins, written as the model itself would
 * write `{"q1": true}` and split at a pre-token boundary of byte-level BPE tokenizers (GPT-2, Llama 3,
 * Qwen2): `{"q1":` before ` true`/` false`; `{"q1": ` before a digit, which carries no leading space;
 * `{"q1": "` before a letter. The server tokenizes this text the same way on every call, so the value's
 * position never depends on how a sampler split earlier text, nor on another question's answer.
 */
export function prefill(part: Part, index: number): string {
  const key = `{"${answerKey(index)}":`;
  if (part.kind === "noul") return key;
  if (part.kind === "score") return `${key} `;
  return `${key} "`;
}

export function readingOf(part: Part): Reading {
  if (part.kind === "choice")
    return { literals: part.options.map((o) => `${String(o.code)}"`), whitespaceFirst: false };
  return { literals: part.options.map((o) => String(o.code)), whitespaceFirst: true };
}

/** The text of each outcome after the prefill: a boolean after its space; a digit or a letter code at once. */
export function continuationsOf(part: Part): string[] {
  return part.options.map((o) => (part.kind === "noul" ? ` ${String(o.code)}` : String(o.code)));
}

/** The probe of the `index`-th part of a prompt whose shared messages are `shared`. */
export function probeOf(shared: ChatMessage[], part: Part, index: number): ProbeRequest {
  return {
    messages: [...shared, { role: "assistant", content: prefill(part, index) }],
    reading: readingOf(part),
    continuations: continuationsOf(part),
  };
}
