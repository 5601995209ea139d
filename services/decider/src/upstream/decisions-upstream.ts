import type { JsonValue } from "@localdecider/contracts";
import type { Entry, ImageAsset } from "@localdecider/contracts/decider";
import { classifyNativeStatus } from "./failure";
import { createHttpTransport, type HttpRequest } from "./http-fetch";
import { errorMessage, type NativeAdapterOptions, type NativeResponse, postJson } from "./native-post";
import { OptionLimits, readRefusal, widestChoice } from "./option-limits";
import {
  type NativeCall,
  type NativeQuestion,
  type NativeResult,
  type NativeUpstream,
  type ProbeOptions,
  UpstreamError,
} from "./types";

/** The route is `{baseURL}/decisions`; a 501 means the server cannot serve the model (vLLM). */
export type DecisionsUpstreamOptions = NativeAdapterOptions;

/**
 * The most choices one question may have in OpenAI's Decisions dialect (openai 7.59.0, resources/decisions.d.ts:
 * "Provide between 2 and 255 choices"). A server that takes fewer (vLLM: 26, labelled A–Z) refuses a wider
 * choice, and the decider learns its limit from that refusal (option-limits.ts).
 */
export const DECISIONS_OPTION_LIMIT = 255;

/**
 * The adapter for a model server that speaks OpenAI's Decisions dialect (OpenAI's own API with `gpt-6-luna`,
 * vLLM 0.33+, LiteLLM): one `POST {upstream}/v1/decisions` per prompt of the plan, behind the same port as a
 * System One server. Each of the call's questions becomes one of the dialect's, in order and named by its key
 * (decisionsBody), and each answer comes back in the System One shape the decider reads (answersOf), so the
 * rest of the decider (its checks, its chunks and their recombination, its calibration) is the same for both.
 * Only the documented fields are sent: vLLM refuses any other.
 */
export class DecisionsUpstream implements NativeUpstream {
  readonly protocol = "decisions";
  private readonly send: HttpRequest;
  private readonly url: URL;
  private readonly limits: OptionLimits;

  constructor(private readonly options: DecisionsUpstreamOptions) {
    this.send = createHttpTransport({ maxBodyBytes: options.maxBodyBytes }).request;
    this.url = new URL(`${options.baseURL}/decisions`);
    this.limits = new OptionLimits(() => DECISIONS_OPTION_LIMIT, options.now);
  }

  optionLimit(model: string): number {
    return this.limits.limit(model);
  }

  async decide(call: NativeCall, options: ProbeOptions): Promise<NativeResult> {
    if (call.questions.some((q) => q.type === "box")) {
      throw new UpstreamError({
        kind: "refused",
        status: 501,
        reason: "box questions have no counterpart in OpenAI's Decisions dialect",
        detail: "a box question sent to a Decisions server",
      });
    }
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" };
    if (this.options.authorization !== undefined) headers.authorization = this.options.authorization;
    const body = JSON.stringify(decisionsBody(call));
    const response = await postJson(this.send, this.url, headers, body, options.signal);
    if (response.status !== 200) throw this.failed(call, response);
    const result = resultOf(call, response.text);
    this.limits.answered(call.model, widestChoice(call));
    return result;
  }

  /** A non-200 answer, as a kind; a refusal of a wide choice teaches the option limit, whatever its wording. */
  private failed(call: NativeCall, response: NativeResponse): UpstreamError {
    const message = errorMessage(response.text);
    const images = call.assets !== undefined;
    const failure = readRefusal(this.limits, call, response.status, message, () =>
      classifyNativeStatus(response.status, message, response.retryAfter, images),
    );
    if (failure.kind === "not_decision_model") this.options.onNotDecisionModel?.();
    return new UpstreamError(failure);
  }
}

/**
 * The request body, with only the fields the dialect documents: `model`, `input` (the state: text as text, a
 * JSON object or a list of them as an `input_json` part, anything else as its JSON text; Jev 1.14's images as
 * `input_image` data URLs after it) and `questions`, each named by its key:
 *
 * - noul → `predicate`, its true/false criteria added to the instructions (the dialect has no criteria for a
 *   predicate; TanStack's @tanstack/ai-openai maps them so too);
 * - choice → `choice` with `choices[{value, description}]`, the value the option's typed one where the client
 *   gave one (`value ?? label`);
 * - score → `score` with `levels[{label}]`, a level's text (or JSON text) as its label, its index without one.
 */
export function decisionsBody(call: NativeCall): Record<string, JsonValue> {
  return {
    model: call.model,
    input: inputOf(call.state, call.assets),
    questions: call.questions.map(questionOf),
  };
}

function inputOf(state: JsonValue, assets: NativeCall["assets"]): JsonValue {
  const images = Object.values(assets ?? {}).map(imagePart);
  if (typeof state === "string" && images.length === 0) return state;
  const content: JsonValue[] = [stateText(state), ...images];
  return [{ role: "user", content }];
}

/** The state as one input part: a JSON object, or a list of objects, as `input_json`; the rest as text. */
function stateText(state: JsonValue): JsonValue {
  if (typeof state === "string") return { type: "input_text", text: state };
  const objects = Array.isArray(state) ? state.every(isObject) : isObject(state);
  return objects ? { type: "input_json", data: state } : { type: "input_text", text: JSON.stringify(state) };
}

function imagePart(asset: ImageAsset): JsonValue {
  const format = asset.format === "jpg" ? "jpeg" : "png";
  return { type: "input_image", image_url: `data:image/${format};base64,${asset.data_base64}` };
}

function questionOf(q: NativeQuestion): JsonValue {
  const instructions = instructionsOf(q);
  switch (q.type) {
    case "noul":
      return { type: "predicate", name: q.key, instructions };
    case "choice":
      return {
        type: "choice",
        name: q.key,
        instructions,
        choices: q.options.map((o) => ({ value: o.value ?? o.label, ...described(o.description) })),
      };
    default:
      return {
        type: "score",
        name: q.key,
        instructions,
        levels: q.options.map((o) => ({ label: levelLabel(o.description, o.label) })),
      };
  }
}

/**
 * The question's instructions: text stays text; JSON becomes an `input_json` part (an object, or a list of
 * objects) or its JSON text. A noul's criteria follow, as text: "True means: …", "False means: …".
 */
function instructionsOf(q: NativeQuestion): JsonValue {
  const criteria =
    q.type === "noul"
      ? q.options
          .filter((o) => o.description !== undefined && o.description !== null)
          .map((o) => `${o.label === "true" ? "True" : "False"} means: ${textOf(o.description)}`)
      : [];
  const own = q.instructions;
  if (typeof own === "string" || own === undefined || own === null) {
    const text = typeof own === "string" ? own : "";
    return criteria.length === 0 ? text : [text, ...criteria].filter((t) => t !== "").join("\n\n");
  }
  const parts: JsonValue[] = [stateText(own as JsonValue)];
  for (const line of criteria) parts.push({ type: "input_text", text: line });
  return parts;
}

/** A level's label: its text (or JSON text); a level without one is named by its index. */
function levelLabel(description: Entry | undefined, index: string): string {
  if (description === undefined || description === null) return index;
  const text = textOf(description);
  return text === "" ? index : text;
}

/** A description, as the dialect's optional string; none without one. */
function described(description: Entry | undefined): { description?: string } {
  if (description === undefined || description === null) return {};
  return { description: textOf(description) };
}

function textOf(entry: Entry | undefined): string {
  return typeof entry === "string" ? entry : JSON.stringify(entry ?? null);
}

/**
 * The answers of a 200, mapped to System One's shape by question key: the dialect answers in question order,
 * so the i-th answer is the i-th question's (a name other than the question's key leaves that question
 * unanswered, which the decider reads as malformed).
 *
 * - predicate `{probability}` → `{type: "noul", noul}`;
 * - choice `probabilities[{value, probability}]` → `probabilities {label: p}`, each value matched to the option
 *   sent with that value, typed (`"true"` is not `true`); a value not sent keeps a key of its own, so the
 *   decider sees an option that was not asked;
 * - score `probabilities[{value, label, probability}]` → `probabilities {"<value>": p}` by level index;
 * - refusal → `{type: "refusal"}`.
 *
 * Usage: `input_tokens`, `input_tokens_details.cached_tokens` (as `cached`) and `output_tokens`.
 */
function resultOf(call: NativeCall, text: string): NativeResult {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new UpstreamError({ kind: "malformed", detail: "the body is not JSON", serverText: text.slice(0, 200) });
  }
  const answers = isObject(body) ? body.answers : undefined;
  if (!Array.isArray(answers)) {
    throw new UpstreamError({ kind: "malformed", detail: "the body has no answers list" });
  }
  const mapped: Record<string, unknown> = {};
  for (const [i, q] of call.questions.entries()) {
    const answer: unknown = answers[i];
    if (!isObject(answer) || (typeof answer.name === "string" && answer.name !== q.key)) continue;
    mapped[q.key] = answerOf(q, answer);
  }
  const usage = isObject(body) && isObject(body.usage) ? body.usage : {};
  const details = isObject(usage.input_tokens_details) ? usage.input_tokens_details : {};
  const cached = count(details.cached_tokens);
  return {
    answers: mapped,
    usage: {
      // OpenAI's input_tokens include the cached ones; ProbeUsage counts them apart (`cached`), as the chat path does.
      input: Math.max(0, count(usage.input_tokens) - cached),
      output: count(usage.output_tokens),
      ...(cached > 0 ? { cached } : {}),
    },
  };
}

function answerOf(q: NativeQuestion, answer: Record<string, unknown>): unknown {
  switch (answer.type) {
    case "refusal":
      return { type: "refusal" };
    case "predicate":
      return { type: "noul", noul: answer.probability };
    case "choice": {
      if (!Array.isArray(answer.probabilities)) return { type: "choice" };
      const probabilities: Record<string, unknown> = {};
      for (const [i, entry] of answer.probabilities.entries()) {
        const value = isObject(entry) ? entry.value : undefined;
        const option = q.options.find((o) => (o.value ?? o.label) === value);
        // A value not sent, or sent twice: a key no option has, so the decider reads the answer as malformed.
        const key = option === undefined || Object.hasOwn(probabilities, option.label) ? `\u0000${i}` : option.label;
        probabilities[key] = isObject(entry) ? entry.probability : undefined;
      }
      return { type: "choice", probabilities };
    }
    case "score": {
      if (!Array.isArray(answer.probabilities)) return { type: "score" };
      const probabilities: Record<string, unknown> = {};
      for (const [i, entry] of answer.probabilities.entries()) {
        const value = isObject(entry) ? entry.value : undefined;
        const known = typeof value === "number" && Number.isInteger(value) && value >= 0 && value < q.options.length;
        const key = known && !Object.hasOwn(probabilities, String(value)) ? String(value) : `\u0000${i}`;
        probabilities[key] = isObject(entry) ? entry.probability : undefined;
      }
      return { type: "score", probabilities };
    }
    default:
      return { type: answer.type };
  }
}

/** A token count as the server reported it; anything but a whole non-negative number counts as none. */
function count(value: unknown): number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : 0;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
