import { type AppError, clip } from "@localdecider/service-kit";
import { deciderError } from "../errors";
import { AbortedError, LimiterUnavailableError } from "../limits/types";
import { bodyTooLarge } from "./body-limit";
import { clientRetryAfter } from "./retry-after";
import { rootCauseMessage, UpstreamError, type UpstreamFailure } from "./types";

/**
 * The decider's failure policy, in one place: how a model server's answer is classified (once, where the
 * call failed), what each kind means for the server's rotation and for a retry, and what the client is told
 * (status, code, text, Retry-After). The adapters classify; the pool, the decider and the routes switch on
 * the kind. Every client-facing text is written here, and only here.
 */

/** The seed's text for a backend that does not hold the configured model (its conformance checks compare it). */
export const MODEL_404 = "inference backend returned HTTP 404";

/** llama.cpp's 500 when calls running at once overflow the context its slots share (recording 0007). */
const SHARED_CONTEXT_EXCEEDED = /context size has been exceeded/i;
/**
 * A server's 400 for a prompt longer than its context (llama.cpp, vLLM, the embedded engine): one of these
 * words, or "maximum … length" on one line (mentionsMaximumLength). The server's text can be long and can
 * repeat the request, so every test of it must run in linear time.
 */
const CONTEXT_TOO_LONG = /context|too long|too many tokens|exceed/i;
/** A kept-alive connection closed by the other side as a call went out, as opposed to one refused. */
const CUT = /other side closed|ECONNRESET|EPIPE|socket hang up/i;

/** A server's answer with an error status, as a kind. */
export function classifyStatus(status: number, message: string, retryAfter?: string): UpstreamFailure {
  const after = retryAfter === undefined ? {} : { retryAfter };
  if (status === 404) return { kind: "model_missing", detail: message };
  if (status === 500 && SHARED_CONTEXT_EXCEEDED.test(message)) {
    return { kind: "context_overflow", together: true, detail: message };
  }
  if (status === 400 && (CONTEXT_TOO_LONG.test(message) || mentionsMaximumLength(message)))
    return { kind: "context_overflow", together: false, detail: message };
  if (status === 429) return { kind: "busy", status, detail: message, ...after };
  if (status === 503) return { kind: "not_ready", status, detail: message, ...after };
  return { kind: "server_error", status, detail: message };
}

/**
 * A native System One server's answer with an error status, as a kind. The statuses follow llama.cpp's
 * published contract (tools/server/tests/unit/test_systemone.py, ERROR_CONTRACT): 413 request_too_large
 * (its prompt-token budget or question count: smaller calls may pass), 422 unprocessable_entity (the
 * request's own fault; whether a refusal is about the number of options is the adapter's to learn, from
 * the call it refused: option-limits.ts), 429 rate_limit with Retry-After (its decision queue is full), 501 not_supported (not a
 * decision model, or images a model without image input cannot take). The rest as any server's.
 */
export function classifyNativeStatus(
  status: number,
  message: string,
  retryAfter: string | undefined,
  withImages: boolean,
): UpstreamFailure {
  if (status === 413) return { kind: "too_large", detail: message };
  // llama.cpp's 400 exceed_context_size_error is a context overflow as on the chat path; its other 400s
  // (exceed_batch_size_error, a body it could not read) are refusals of this request.
  if (status === 400 && (CONTEXT_TOO_LONG.test(message) || mentionsMaximumLength(message))) {
    return classifyStatus(status, message, retryAfter);
  }
  if (status === 422 || status === 400) return { kind: "refused", status, reason: message, detail: message };
  if (status === 501 && withImages) return { kind: "refused", status, reason: message, detail: message };
  if (status === 501) return { kind: "not_decision_model", detail: message };
  return classifyStatus(status, message, retryAfter);
}

/**
 * Whether some line of `message` holds "maximum" and, after it, "length" (any letter case): what the regex
 * `/maximum.*length/i` matches, read in one pass. That regex rescans the rest of the line from every
 * "maximum", so a server's message repeating the word (8,000 times: 0.2 s) costs quadratic time.
 */
export function mentionsMaximumLength(message: string): boolean {
  const text = message.toLowerCase();
  let nextLength = -1;
  let at = text.indexOf("maximum");
  while (at !== -1) {
    // Both searches only move forward: the whole text is read a bounded number of times.
    if (nextLength !== -1 && nextLength < at + 7) nextLength = -1;
    if (nextLength === -1) nextLength = text.indexOf("length", at + 7);
    if (nextLength === -1) return false;
    const lineEnd = lineEndAfter(text, at);
    if (nextLength < lineEnd) return true;
    // No later "maximum" on this line can be followed by "length" on it either.
    at = text.indexOf("maximum", lineEnd);
  }
  return false;
}

/** Where the line holding `from` ends: its first line terminator at or after `from` (as a regex `.` sees them). */
function lineEndAfter(text: string, from: number): number {
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x0a || c === 0x0d || c === 0x2028 || c === 0x2029) return i;
  }
  return text.length;
}

/**
 * A call that got no answer: refused or unreachable, or cut as it went out (worth one more try). An answer
 * whose reading was stopped at LOCALDECIDER_UPSTREAM_MAX_BODY did come, and is malformed: the server
 * answered, so it stays in rotation (unreachable would take a healthy server out).
 */
export function classifyTransport(err: unknown): UpstreamFailure {
  const large = bodyTooLarge(err);
  if (large !== undefined) return { kind: "malformed", detail: large.message };
  const detail = rootCauseMessage(err);
  return CUT.test(detail) ? { kind: "connection_cut", detail } : { kind: "unreachable", detail };
}

/** Whether the call is sent once more on a new connection: it was cut before any answer. */
export function retryOnNewConnection(failure: UpstreamFailure): boolean {
  return failure.kind === "connection_cut";
}

/** Whether the rest of the request runs again holding every slot: calls that fit alone overflowed together. */
export function retryAlone(failure: UpstreamFailure): boolean {
  return failure.kind === "context_overflow" && failure.together;
}

/**
 * Why a failed call says its server cannot serve now (it leaves rotation), or undefined when the fault is
 * the request's or passing: a malformed answer, a busy 429, a timeout (a loaded server is slow too), a
 * context too small for this prompt, a cancelled call, a 4xx.
 */
export function leavesRotation(err: unknown): string | undefined {
  if (!(err instanceof UpstreamError)) return undefined;
  const f = err.failure;
  switch (f.kind) {
    case "unreachable":
    case "connection_cut":
      return "inference backend unreachable";
    case "model_missing":
      return MODEL_404;
    case "not_decision_model":
      return NOT_A_DECISION_MODEL;
    case "not_ready":
      return `inference backend returned HTTP ${f.status}`;
    case "server_error":
      return f.status >= 500 ? `inference backend returned HTTP ${f.status}` : undefined;
    default:
      return undefined;
  }
}

/**
 * A failed call as the client's error: a stable code and a short text. The server's own text and the
 * addresses involved go to the log (the decider logs the failure), never to the client.
 */
export function upstreamClientError(failure: UpstreamFailure, timeoutSeconds: number): AppError {
  switch (failure.kind) {
    case "timeout":
      return deciderError("upstream_timeout", `inference backend did not answer within ${timeoutSeconds} s`);
    case "aborted":
      return requestCancelled();
    case "unreachable":
    case "connection_cut":
      return deciderError("upstream_unreachable", "inference backend unreachable");
    case "malformed":
      return deciderError("upstream_malformed", "inference backend returned a malformed response");
    case "model_missing":
      return deciderError("model_unavailable", MODEL_404);
    case "context_overflow":
      return deciderError(
        "context_too_long",
        "the request does not fit the model's context: send a shorter state, or fewer questions per prompt (LOCALDECIDER_QUESTIONS_PER_CALL), or give the model a larger context (the embedded engine: LOCALDECIDER_CONTEXT_SIZE)",
      );
    case "busy":
    case "not_ready":
      return deciderError("upstream_busy", `inference backend is busy (HTTP ${failure.status})`, {
        headers: { "Retry-After": clientRetryAfter(failure.retryAfter) },
      });
    case "server_error":
      return deciderError("upstream_error", `inference backend returned HTTP ${failure.status}`);
    case "too_large":
      return deciderError(
        "payload_too_large",
        `the model server refuses even one question of this request as too large: ${clientReason(failure.detail)}`,
      );
    case "refused":
      return deciderError("invalid_request", `the model server refused the request: ${clientReason(failure.reason)}`);
    case "option_limit":
      return deciderError(
        "invalid_request",
        `the model server takes at most ${failure.limit} options per question: ${clientReason(failure.detail)}`,
      );
    case "not_decision_model":
      return deciderError("model_unavailable", `${NOT_A_DECISION_MODEL}; the decider checks the server again`);
  }
}

/**
 * A choice whose chunks would not fit one final round: the server takes `limit` options per question, so a
 * choice of more than limit² labels would need a third round, which the plan does not make.
 */
export function tooFewOptions(limit: number, question: string, labels: number): AppError {
  return deciderError(
    "invalid_request",
    `the model server takes at most ${limit} options per question, so the choice "${question}" of ${labels} labels cannot be split into chunks whose leaders fit one final round; send at most ${limit * limit} labels`,
  );
}

/**
 * A request holding Jev 1.14's images or a box question when no model server speaks System One itself: only a
 * native server can take them (the chat probe reads token probabilities of text).
 */
export function imagesNeedNative(): AppError {
  return deciderError(
    "images_unsupported",
    `images and box questions need a native System One upstream; this decider runs ${CHAT_SERVERS_RUN}`,
  );
}

/** What model servers that all take the chat path are, in the 422 that refuses images (routes/images.ts too). */
export const CHAT_SERVERS_RUN = "a chat model server (OpenAI-compatible, answers read from token logprobs)";

/** The client-facing text of a native server's 501 for a model that cannot decide. */
export const NOT_A_DECISION_MODEL = "inference backend returned HTTP 501: its model is not a decision model";

/**
 * A native server's reason for refusing the client's request, for the client: it is about the request (a
 * field, an option count, an image), so it is passed on, on one line and bounded.
 */
function clientReason(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length <= 300 ? line : `${line.slice(0, 300)}…`;
}

/** Any failure of a decision as the client's error: an upstream failure, a cancellation, the shared limits'. */
export function clientError(err: unknown, timeoutSeconds: number): unknown {
  if (err instanceof UpstreamError) return upstreamClientError(err.failure, timeoutSeconds);
  if (err instanceof AbortedError) return requestCancelled();
  if (err instanceof LimiterUnavailableError) return limiterUnavailable(err);
  return err;
}

export function requestCancelled(): AppError {
  return deciderError("request_aborted", "request cancelled by the client");
}

/** The shared limits (Redis) do not answer: nothing new is admitted. */
export function limiterUnavailable(err: LimiterUnavailableError): AppError {
  return deciderError("limiter_unavailable", `${err.message}; no new work is admitted until it answers again`, {
    headers: { "Retry-After": "1" },
    cause: err,
  });
}

/** The queue is full; `retryAfter` seconds is when it should have drained enough (the limiter's estimate). */
export function queueFull(retryAfter: number): AppError {
  return deciderError("queue_full", `too many decisions queued; retry in ${retryAfter} s`, {
    headers: { "Retry-After": String(retryAfter) },
  });
}

/**
 * A request that could never be admitted: refusing it with 429 would make clients retry forever. It holds too
 * many questions for this deployment's queue, so it is the same 413 as too many questions outright.
 */
export function tooManyCalls(calls: number, maxQueue: number): AppError {
  return deciderError(
    "too_many_questions",
    `this request needs ${calls} upstream calls but at most ${maxQueue} can be queued (LOCALDECIDER_MAX_QUEUE); send fewer questions per request`,
  );
}

/** More questions than one request may hold (LOCALDECIDER_MAX_QUESTIONS), refused before they are read. */
export function tooManyQuestions(count: number, maxQuestions: number): AppError {
  return deciderError(
    "too_many_questions",
    `this request holds ${count} questions, more than the ${maxQuestions} one request may hold (LOCALDECIDER_MAX_QUESTIONS); send them in several requests`,
  );
}

/** The model asked for is quoted clipped (ECHO_LIMITS.quote): a 1 MB name was answered and logged whole. */
export function unknownModel(model: string, accepted: readonly string[]): AppError {
  return deciderError("unknown_model", `Unknown model "${clip(model)}"; available models: ${accepted.join(", ")}`);
}

/** The decision's deadline (LOCALDECIDER_TIMEOUT) passed: every failure after it is this 504. */
export function deadlinePassed(timeoutSeconds: number): AppError {
  return deciderError("upstream_timeout", `the decision did not complete within ${timeoutSeconds} s`);
}

/** Malformed output every time it was asked; `reason` says what the last one was. */
export function malformedOutput(attempts: number, reason: string): AppError {
  return deciderError(
    "upstream_malformed",
    `inference backend returned malformed output ${attempts} time(s); last: ${reason}`,
  );
}

export function noLogprobs(): AppError {
  return deciderError(
    "no_logprobs",
    "inference backend returned no logprobs, so no probabilities can be read; use a server that reports top_logprobs, or set LOCALDECIDER_ALLOW_NO_LOGPROBS=true to accept answers from the emitted token alone (probability 1)",
  );
}
