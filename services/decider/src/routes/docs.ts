import {
  DeciderErrorBody,
  DeciderReadyResponse,
  HealthResponse,
  ModelsResponse,
  SystemOneRequest,
  SystemOneResponse,
} from "@localdecider/contracts";
import type { RouteDoc } from "@localdecider/service-kit";

const error = (description: string, headers?: RouteDoc["responses"][number]["headers"]) => ({
  description,
  schema: DeciderErrorBody,
  ...(headers === undefined ? {} : { headers }),
});
const UNAUTHORIZED = error("Missing or wrong bearer (only when LOCALDECIDER_API_KEY is set)", {
  "WWW-Authenticate": { description: 'Always `Bearer realm="localdecider"`' },
});
const OPEN: RouteDoc["security"] = [];

/**
 * Every route of the service with its contracts schemas and responses per status, in the kit's RouteDoc
 * shape: `buildOpenApiDocument({ routes: ROUTE_DOCS, ... })` documents the service, and `path` is the
 * metrics route label. `registerRoutes` registers exactly these paths.
 */
export const ROUTE_DOCS: RouteDoc[] = [
  {
    method: "get",
    path: "/health",
    summary: "Liveness",
    security: OPEN,
    responses: { 200: { description: "The process answers", schema: HealthResponse } },
  },
  {
    method: "get",
    path: "/ready",
    summary: "Readiness: the model server lists the configured model",
    security: OPEN,
    responses: {
      200: { description: "Ready", schema: DeciderReadyResponse },
      503: error(
        "Backend unreachable, answering 404 (`inference backend returned HTTP 404`), or not serving the model",
      ),
    },
  },
  {
    method: "get",
    path: "/v1/models",
    summary: "Models this service answers as (what the SDK's models.list() reads)",
    responses: { 200: { description: "Model cards", schema: ModelsResponse }, 401: UNAUTHORIZED },
  },
  {
    method: "post",
    path: "/v1/systemone",
    summary: "Answer named questions about a state with calibrated probabilities",
    body: SystemOneRequest,
    responses: {
      200: { description: "One answer per question", schema: SystemOneResponse },
      400: error("invalid_json, invalid_request (with details), unknown_model, context_too_long or request_aborted"),
      401: UNAUTHORIZED,
      413: error("Body over LOCALDECIDER_BODY_LIMIT"),
      415: error("A body in a character set other than UTF-8 (e.g. charset=latin1)"),
      429: error("The request's upstream calls would overflow LOCALDECIDER_MAX_QUEUE", {
        "Retry-After": { description: "Seconds until the queue is expected to have room" },
      }),
      502: error(
        "Model server unreachable, failing (5xx), a malformed response after the retries, or no logprobs (no_logprobs)",
      ),
      503: error("Model server does not hold the model (answered 404, or does not list it), or is busy"),
      504: error("The decision did not complete within LOCALDECIDER_TIMEOUT"),
    },
  },
];
