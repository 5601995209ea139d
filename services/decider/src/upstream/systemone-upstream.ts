import type { JsonValue } from "@localdecider/contracts";
import { IMAGES_HEADER } from "@localdecider/contracts/decider";
import { classifyNativeStatus } from "./failure";
import { createHttpTransport, type HttpRequest } from "./http-fetch";
import { errorMessage, type NativeAdapterOptions, type NativeResponse, postJson } from "./native-post";
import { OptionLimits, readRefusal, widestChoice } from "./option-limits";
import type { ServerKind } from "./server-profile";
import {
  type NativeCall,
  type NativeQuestion,
  type NativeResult,
  type NativeUpstream,
  type ProbeOptions,
  UpstreamError,
} from "./types";

/** The route is `{baseURL}/systemone`; a 501 for a call without images means the model is not a decision model (any more). */
export type SystemOneUpstreamOptions = NativeAdapterOptions;

/**
 * Options one question may have, per model type, as llama.cpp documents them (tools/server/README.md, "POST
 * /v1/systemone": "52 for openjev, 255 for laya, clef, pplx-decider, lfm2-d1 and lfm2-d1-omni"; openjev names
 * options A-Z a-z, one token each) and the project's SYSTEMONE.md notes (nimble 52 too). A model's type is read from
 * its name; any other name gets 255 (TypeSafe's own ceiling), and a server that takes fewer says so in its 422.
 */
export function documentedOptionLimit(model: string): number {
  return /openjev|nimble/i.test(model) ? 52 : 255;
}

/**
 * The adapter for a model server that speaks System One itself: one `POST {upstream}/v1/systemone` per prompt
 * of the plan, its questions under the client's own names, and back the server's answers and usage. It checks
 * only the envelope (a JSON object with an `answers` object); each answer is checked against its question by
 * the decider (decide/native.ts), in the one place both protocols' answers are read. Its HTTP is node:http over
 * kept-alive connections (http-fetch.ts), as the chat adapter's.
 */
export class SystemOneUpstream implements NativeUpstream {
  readonly protocol = "systemone";
  private readonly send: HttpRequest;
  private readonly url: URL;
  /** Option limits per model: documented, or learnt from the server's refusals (option-limits.ts). */
  private readonly limits: OptionLimits;
  /** What kind of server answers (its start-up check reads it): llama.cpp and Ollama take images their own way. */
  serverKind: ServerKind = "unknown";

  constructor(private readonly options: SystemOneUpstreamOptions) {
    this.send = createHttpTransport({ maxBodyBytes: options.maxBodyBytes }).request;
    this.url = new URL(`${options.baseURL}/systemone`);
    this.limits = new OptionLimits(documentedOptionLimit, options.now);
  }

  optionLimit(model: string): number {
    return this.limits.limit(model);
  }

  async decide(call: NativeCall, options: ProbeOptions): Promise<NativeResult> {
    const body = JSON.stringify(wireBody(call, this.serverKind));
    // Decided once for the header and for what a 501 means: a call with images or a box question refused 501
    // is this call's refusal (no image input), never the model ceasing to be a decision model.
    const images = call.assets !== undefined || call.questions.some((q) => q.type === "box");
    const response = await this.post(body, options.signal, images);
    if (response.status !== 200) throw this.failed(call, response, images);
    const result = resultOf(response.text);
    this.limits.answered(call.model, widestChoice(call));
    return result;
  }

  private post(body: string, signal: AbortSignal, images: boolean): Promise<NativeResponse> {
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" };
    // Jev 1.14's images and box questions are opt-in on TypeSafe's API: the client's opt-in is passed on.
    if (images) headers[IMAGES_HEADER.toLowerCase()] = "true";
    if (this.options.authorization !== undefined) headers.authorization = this.options.authorization;
    return postJson(this.send, this.url, headers, body, signal);
  }

  /**
   * A non-200 answer, classified once; a 501 reported. A refusal of a call holding a wide choice may be the
   * server's option limit, whatever its wording: then it is an `option_limit` naming the smaller size to try
   * (OptionLimits), and the decider splits the choice again.
   */
  private failed(call: NativeCall, response: NativeResponse, images: boolean): UpstreamError {
    const message = errorMessage(response.text);
    const failure = readRefusal(this.limits, call, response.status, message, () =>
      classifyNativeStatus(response.status, message, response.retryAfter, images),
    );
    if (failure.kind === "not_decision_model") this.options.onNotDecisionModel?.();
    return new UpstreamError(failure);
  }
}

/**
 * The request body: the model, the state as the client sent it, each question under its own name, and Jev
 * 1.14's `assets` as the client sent them. A server that takes images its own way gets them that way too, in
 * the assets' order: llama.cpp as `images` data URLs (tools/server/README.md, "POST /v1/systemone": `files`,
 * alias `images`, placed before the state), Ollama as `images` base64 strings (the project's SYSTEMONE.md notes). The
 * names in the text stay as the client wrote them.
 */
export function wireBody(call: NativeCall, kind: ServerKind = "unknown"): Record<string, JsonValue> {
  const body: Record<string, JsonValue> = {
    model: call.model,
    state: call.state,
    questions: Object.fromEntries(call.questions.map((q) => [q.key, wireQuestion(q)])),
  };
  if (call.assets === undefined) return body;
  const assets = Object.values(call.assets);
  body.assets = call.assets as unknown as JsonValue;
  if (kind === "llama.cpp") {
    body.images = assets.map((a) => `data:image/${a.format === "jpg" ? "jpeg" : "png"};base64,${a.data_base64}`);
  }
  if (kind === "ollama") body.images = assets.map((a) => a.data_base64);
  return body;
}

function wireQuestion(q: NativeQuestion): Record<string, JsonValue> {
  const wire: Record<string, JsonValue> = { type: q.type };
  if (q.instructions !== undefined) wire.instructions = q.instructions;
  switch (q.type) {
    case "choice":
      wire.criteria = Object.fromEntries(q.options.map((o) => [o.label, o.description ?? null]));
      break;
    case "score":
      wire.criteria = q.options.map((o) => o.description ?? null);
      break;
    case "box":
      break;
    case "noul": {
      // Only the descriptions the client gave: an absent one leaves the server's own default wording.
      const described = q.options.filter((o) => o.description !== undefined);
      if (described.length > 0) {
        wire.criteria = Object.fromEntries(described.map((o) => [o.label, o.description ?? null]));
      }
      break;
    }
  }
  return wire;
}

/** The answers and usage of a 200; only an envelope without an `answers` object is malformed here. */
function resultOf(text: string): NativeResult {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new UpstreamError({ kind: "malformed", detail: "the body is not JSON", serverText: text.slice(0, 200) });
  }
  const answers = isObject(body) ? body.answers : undefined;
  if (!isObject(answers)) {
    throw new UpstreamError({ kind: "malformed", detail: "the body has no answers object" });
  }
  const usage = isObject(body) && isObject(body.usage) ? body.usage : {};
  return { answers, usage: { input: count(usage.input_tokens), output: count(usage.output_tokens) } };
}

/** A token count as the server reported it; anything but a whole non-negative number counts as none. */
function count(value: unknown): number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : 0;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
