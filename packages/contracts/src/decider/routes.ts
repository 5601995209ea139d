import { HealthResponse } from "../core/health";
import { defineRoutes, errorResponses, type ResponseContract } from "../core/route";
import { Decision, DecisionCreateRequest, OpenAIErrorBody } from "./decisions";
import { DeciderErrorBody, DeciderReadyResponse, ModelsResponse, SystemOneRequest, SystemOneResponse } from "./schemas";

/** Every decider error answers with one body, DeciderErrorBody, except on OpenAI's paths (openAIError). */
const error = errorResponses(DeciderErrorBody);

/** `/v1/decisions` answers every error in OpenAI's envelope, which the `openai` SDK reads. */
const openAIError = errorResponses(OpenAIErrorBody);

/** What the bearer check adds to every `auth: "bearer"` route. */
export const DECIDER_AUTH_RESPONSES = {
  401: error("Missing or wrong bearer (only when LOCALDECIDER_API_KEY is set)", {
    "WWW-Authenticate": { description: 'Always `Bearer realm="localdecider"`' },
  }),
} satisfies Record<number, ResponseContract>;

/**
 * What the Host check adds to every route but the probes' (`/health`, `/ready`): 421 `host_not_allowed` for a
 * request whose `Host` is not in LOCALDECIDER_ALLOWED_HOSTS (or a loopback name), the answer a page on a
 * rebound DNS name gets. On unless LOCALDECIDER_API_KEY is set and LOCALDECIDER_ALLOWED_HOSTS is not.
 */
export const DECIDER_HOST_RESPONSES = {
  421: error("Host not allowed (host_not_allowed): the request's Host is not a name this service answers for"),
} satisfies Record<number, ResponseContract>;

/**
 * Every endpoint of the decider. GET /metrics, /openapi.json and /docs are operational, not listed. Each route
 * with a body also gives the body reader's refusals (the common responses, after the routes).
 */
export const deciderRoutes = defineRoutes(
  {
    health: {
      method: "get",
      path: "/health",
      summary: "Liveness",
      auth: "none",
      responses: { 200: { description: "The process answers", schema: HealthResponse } },
    },
    ready: {
      method: "get",
      path: "/ready",
      summary:
        "Readiness: the embedded engine's model is loaded, or a model server lists the configured model (and the shared limits answer, when set)",
      auth: "none",
      responses: {
        200: { description: "Ready", schema: DeciderReadyResponse },
        503: error(
          "The embedded model still on its way (`starting the engine`, `downloading model (42 %)`, `loading model (80 %)`) or failed to download or load (the reason); a model server unreachable, answering 404 (`inference backend returned HTTP 404`), or not serving the model; or, with LOCALDECIDER_REDIS_URL, the shared limits unreachable (`limiter_unavailable`)",
        ),
      },
    },
    listModels: {
      method: "get",
      path: "/v1/models",
      summary: "Models this service answers as (what the SDK's models.list() reads)",
      auth: "bearer",
      responses: { 200: { description: "Model cards", schema: ModelsResponse } },
    },
    systemOne: {
      method: "post",
      path: "/v1/systemone",
      summary: "Answer named questions about a state with calibrated probabilities",
      description:
        "Jev 1.14's images (`assets`) and `box` questions are opt-in with the header `TypeSafe-Danger-Zone-Images: true` " +
        "(without it: 422 invalid_request), and are answered only through a native System One upstream (else: 422 " +
        "images_unsupported).",
      auth: "bearer",
      body: SystemOneRequest,
      responses: {
        200: { description: "One answer per question", schema: SystemOneResponse },
        400: error(
          "Malformed JSON (invalid_json), a model this service does not serve (unknown_model), a prompt longer than the model's context (context_too_long), or a body cut off (request_aborted)",
        ),
        413: error(
          "too_many_questions: more questions than LOCALDECIDER_MAX_QUESTIONS (default 4096), or than LOCALDECIDER_MAX_QUEUE's upstream calls can hold; payload_too_large: a body over LOCALDECIDER_BODY_LIMIT, or a state that renders to more characters than that",
        ),
        422: error(
          "Validation (invalid_request, with details): the body breaks the schema (e.g. instructions missing or empty), nests deeper than 64 levels or holds over 100,000 JSON values, references no asset it sends, or holds images or box questions without the header TypeSafe-Danger-Zone-Images: true; images_unsupported: images or box questions while the backend is not a native System One server",
        ),
        429: error("The request's upstream calls would overflow LOCALDECIDER_MAX_QUEUE", {
          "Retry-After": { description: "Seconds until the queue is expected to have room" },
        }),
        502: error(
          "Model server unreachable, failing (5xx), a malformed response after the retries, or no logprobs (no_logprobs); the embedded engine failing to evaluate (upstream_error)",
        ),
        503: error(
          "The model is not ready: the embedded model not loaded (model_unavailable, with /ready's text), or a model server that does not hold it (answered 404, or does not list it); or a model server busy (upstream_busy)",
        ),
        504: error("The decision did not complete within LOCALDECIDER_TIMEOUT"),
      },
    },
    decisions: {
      method: "post",
      path: "/v1/decisions",
      summary: "OpenAI's Decisions dialect: answer predicate, choice and score questions about an input, in order",
      description:
        "What the `openai` SDK's `client.decisions.create()` (7.59.0) sends, answered by the same machinery as " +
        "/v1/systemone (limits, queue, deadline, calibration). A question without evidence is answered " +
        '`{"type":"refusal"}` while the others are answered. Every error is in OpenAI\'s envelope ' +
        "`{error: {message, type, param, code}}`; see docs/decisions.md.",
      auth: "bearer",
      body: DecisionCreateRequest,
      responses: {
        200: { description: "One answer per question, in question order", schema: Decision },
        400: openAIError(
          "The body breaks the schema (param names the field, e.g. `questions[0].choices`), malformed JSON, an image for a backend that takes none, or a prompt longer than the model's context",
        ),
        401: openAIError("Missing or wrong bearer (only when LOCALDECIDER_API_KEY is set)", {
          "WWW-Authenticate": { description: 'Always `Bearer realm="localdecider"`' },
        }),
        404: openAIError("A model this service does not serve (code model_not_found, param model)"),
        413: openAIError(
          "More questions than LOCALDECIDER_MAX_QUESTIONS (or than LOCALDECIDER_MAX_QUEUE's calls can hold), or a body over LOCALDECIDER_BODY_LIMIT",
        ),
        415: openAIError("A body in a character set other than UTF-8"),
        429: openAIError("The request's upstream calls would overflow LOCALDECIDER_MAX_QUEUE", {
          "Retry-After": { description: "Seconds until the queue is expected to have room" },
        }),
        502: openAIError("Model server unreachable or failing, or no logprobs"),
        503: openAIError("The model is not ready, or a model server busy"),
        504: openAIError("The decision did not complete within LOCALDECIDER_TIMEOUT"),
      },
    },
  },
  {
    withBody: {
      413: error("Body over LOCALDECIDER_BODY_LIMIT"),
      415: error("A body in a character set other than UTF-8 (e.g. charset=latin1)"),
    },
  },
);
export type DeciderRoutes = typeof deciderRoutes;
