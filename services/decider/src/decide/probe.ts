import type { ChatMessage } from "../prompt";
import { answerKey, type Part } from "./plan";

/**
 * How to read the next token after a probe's prefill: the JSON text each outcome code continues as
 * (`true`, `7`, or `B"` for a choice, whose opening quote is in the prefill) and whether JSON whitespace
 * may come first there (not inside a string).
 */
export interface Reading {
  literals: readonly string[];
  whitespaceFirst: boolean;
}

/** One upstream call: the prompt's shared messages, then an assistant message prefilled up to one value. */
export interface ProbeRequest {
  messages: ChatMessage[];
  /** How a server's reported alternatives are read (see readout.ts). */
  reading: Reading;
  /**
   * Each outcome's text right after the prefill, as the model would write it (` true`, `7`, `B`): what an
   * engine that scores outcomes exactly scores. Codes are prefix-free (one width), so no closing text is needed.
   */
  continuations: string[];
}

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
