import type { ValidationIssue } from "@localdecider/contracts";
import { DECIDER_ERROR_STATUS, type DeciderErrorCode } from "@localdecider/contracts/decider";
import { AppError } from "@localdecider/service-kit";

/** An AppError whose status is the one contracts assign to its code, so the two can never disagree. */
export function deciderError(
  code: DeciderErrorCode,
  message: string,
  options: {
    details?: ValidationIssue[];
    headers?: Record<string, string>;
    cause?: unknown;
    logLevel?: "error" | "warn" | "info" | "debug";
  } = {},
): AppError {
  return new AppError(DECIDER_ERROR_STATUS[code], message, { code, ...options });
}

/**
 * When each error code is answered, for people: the one text of the decider's table in docs/errors.md, which
 * `pnpm docs:gen` writes from this map and DECIDER_ERROR_STATUS (the code's status). Keyed by the contracts'
 * codes, so a code added there without a line here fails the typecheck. Links are relative to docs/.
 */
export const DECIDER_ERROR_DOCS: Record<DeciderErrorCode, string> = {
  invalid_json: "The body is not JSON.",
  unknown_model:
    "`model` is not listed; the message names the available ones. A missing `model` (422 `invalid_request`) names them too.",
  context_too_long:
    "A prompt does not fit the model's context: the server said so (400), or llama.cpp's 500 `Context size has been exceeded.` came back again when the call was retried alone.",
  request_aborted: "The body was not fully received.",
  unauthorized:
    'No bearer (`Missing API key`), a wrong key or a malformed `Bearer` header (`Invalid API key`); with `WWW-Authenticate: Bearer realm="localdecider"` ([Bearer header](security.md#bearer-header)).',
  not_found: "No such route.",
  method_not_allowed:
    "A method the path does not take (`GET /v1/systemone`); `Allow` lists the ones it does. `OPTIONS` on a path answers 204 with `Allow`.",
  payload_too_large:
    "Body over `LOCALDECIDER_BODY_LIMIT`, or a state that renders to more characters than that for the model.",
  too_many_questions:
    "More questions than `LOCALDECIDER_MAX_QUESTIONS` (default 4096), or a request needing more upstream calls than `MAX_QUEUE` could ever hold; split it.",
  unsupported_media_type: "Unsupported body encoding/charset.",
  host_not_allowed:
    "The request's `Host` is not a name the decider answers for ([Host check](security.md#host-check-dns-rebinding)); nothing was read or called.",
  invalid_request:
    "Validation ([422, as Jev](decider-api.md#validation-answers-422-as-jev-and-llamacpp-do)): a schema-invalid body (wrong types, empty `questions`, `instructions` missing or empty, unknown type, 256 labels, 11 levels, an asset no text names, …), one nested deeper than 64 levels or holding over 100,000 JSON values, or images or box questions without `TypeSafe-Danger-Zone-Images: true`; `details` lists paths like `questions.q1.criteria`.",
  images_unsupported:
    "Images or box questions, opted in, while the backend is not a native System One server; the text names the backend ([Images and box questions](decider-api.md#images-and-box-questions-jev-114)).",
  queue_full:
    "The request's calls would overflow `MAX_QUEUE`; `Retry-After` (seconds) estimates when the queue drains.",
  internal_error: "A bug; logged with its stack.",
  upstream_unreachable: "Connection refused or dropped by the model server.",
  upstream_error:
    "The model server answered 5xx or another unexpected status; the embedded engine failed to evaluate (`inference backend returned HTTP 500`, the cause in the log).",
  upstream_malformed: "Malformed response after `MALFORMED_RETRIES` retries.",
  no_logprobs: "The model server sent no logprobs (unless `LOCALDECIDER_ALLOW_NO_LOGPROBS=true`).",
  model_unavailable:
    "Embedded engine: the model is not loaded; the text is `/ready`'s (`loading model (40 %)`, a failure). A model server: it lacks `LOCALDECIDER_UPSTREAM_MODEL` (404 from vLLM, Ollama; not in llama.cpp's `/v1/models`): `inference backend returned HTTP 404…`.",
  upstream_busy: "The model server answered 429/503 (`Retry-After` passed on, or 1).",
  limiter_unavailable:
    "With `LOCALDECIDER_REDIS_URL`: Redis does not answer, so nothing is admitted (`Retry-After: 1`); `/ready` says the same. A request already admitted waits for Redis to answer (for its slot) until its own deadline (then 504).",
  backend_not_ready:
    "`/ready` only: the embedded model not loaded yet or failed, no model server ready, or the shared limits down.",
  upstream_timeout: "The decision did not complete within `LOCALDECIDER_TIMEOUT`.",
};

export { DECIDER_ERROR_STATUS };
