import { getHeapStatistics } from "node:v8";
import { DECIDER_AUTH_RESPONSES, DECIDER_HOST_RESPONSES, deciderRoutes } from "@localdecider/contracts/decider";
import {
  type AllowedHosts,
  accessLog,
  buildOpenApiDocument,
  CORS_DEFAULTS,
  cors,
  docsRouter,
  errorHandler,
  hostCheck,
  jsonBody,
  type Logger,
  type Metrics,
  notFoundHandler,
  type OpenApiDocument,
  PROBE_PATHS,
  registerRoutes,
  requestId,
  validationDetails,
} from "@localdecider/service-kit";
import express, { type Express, Router } from "express";
import { bearerAuth, keyHolder } from "./auth";
import type { Backend } from "./backend";
import type { Calibration } from "./calibration/calibration";
import { Decider } from "./decide/decider";
import type { Limits } from "./decide/plan";
import { PROMPT_VERSION } from "./decide/prompt";
import { deciderError } from "./errors";
import type { UpstreamLimiter } from "./limits/limiter";
import { createDeciderMetrics, fanOut } from "./metrics";
import type { DeciderObserver } from "./observer";
import { playgroundRouter } from "./playground";
import { deciderHandlers } from "./routes";
import { inputLimitIssue, questionCount } from "./routes/input-limits";
import { invalidBody } from "./routes/invalid-body";
import { OPENAI_PATHS, openAIIssues, presentOpenAIError } from "./routes/openai-errors";
import { CACHED_TOKENS_HEADER } from "./routes/systemone";
import { tooManyQuestions } from "./upstream/failure";
import { ModelGate } from "./upstream/model-gate";
import { SERVICE_VERSION } from "./version";

export interface AppDeps {
  /** What answers: the model servers, or the embedded engine (backend.ts builds it from the config). */
  backend: Backend;
  limiter: UpstreamLimiter;
  logger: Logger;
  /** Sees every decider hook besides the app's own Prometheus series (tests record with one). */
  observer?: DeciderObserver;
  apiKey: string | undefined;
  /**
   * The Host check against DNS rebinding (hostPolicy of LOCALDECIDER_ALLOWED_HOSTS, LOCALDECIDER_HOST and the
   * API key): a request for any other name gets 421 `host_not_allowed` before any route runs, except on
   * /health, /ready and /metrics. undefined: no check (an API key without LOCALDECIDER_ALLOWED_HOSTS, or `*`).
   */
  allowedHosts: AllowedHosts | undefined;
  /** Origins allowed by CORS (`*_CORS_ORIGINS`); undefined or empty: no CORS headers. */
  corsOrigins?: readonly string[] | undefined;
  limits: Limits;
  malformedRetries: number;
  timeoutSeconds: number;
  /** LOCALDECIDER_ALLOW_NO_LOGPROBS. */
  allowNoLogprobs: boolean;
  /** LOCALDECIDER_MAX_QUESTIONS: more questions in one request is a 413 too_many_questions, before any check. */
  maxQuestions: number;
  /** LOCALDECIDER_BODY_LIMIT, in bytes: the largest body, and the most characters a state may render to. */
  bodyLimit: number;
  /** LOCALDECIDER_CALIBRATION, loaded: applied to every answer and shown by GET /v1/models. */
  calibration?: Calibration;
  /** Most heap the requests admitted may hold (see DeciderOptions.maxHeldBytes); default defaultMaxHeldBytes(). */
  maxHeldBytes?: number;
  /**
   * Serve the decision playground at GET /playground (LOCALDECIDER_PLAYGROUND, resolved by playgroundEnabled).
   * Off (the default here): /playground is a 404 like any unknown path.
   */
  playground?: boolean;
  /** Runs after request id and access log, before any route (tests mount a response recorder here). */
  hooks?: { beforeRoutes?: (app: Express) => void };
}

/** The 421 `host_not_allowed` body's text. */
export const HOST_NOT_ALLOWED_MESSAGE =
  "Host not allowed: this service answers only for the names in LOCALDECIDER_ALLOWED_HOSTS";

export interface DeciderApp {
  app: Express;
  decider: Decider;
  /** This app's own registry (served at /metrics), so test apps never share a global one. */
  metrics: Metrics;
  /** Served at /openapi.json, built from deciderRoutes. */
  openapi: OpenApiDocument;
}

/**
 * The API description, from the same route contracts the routes are registered and validated from. The
 * bearer scheme is always declared: whether LOCALDECIDER_API_KEY is set is the deployment's business. The
 * Host check's 421 is declared on every route but the probes' while the check is on.
 */
export function buildDeciderOpenApi(options: { hostCheck: boolean }): OpenApiDocument {
  return buildOpenApiDocument({
    info: {
      title: "localdecider decider",
      version: SERVICE_VERSION,
      description:
        "Calibrated answers from the token probabilities of a local LLM: one this process runs itself (the embedded " +
        "engine, llama.cpp through node-llama-cpp; the default, LOCALDECIDER_UPSTREAM unset), or one behind " +
        "OpenAI-compatible model servers (LOCALDECIDER_UPSTREAM). GET /metrics (Prometheus), " +
        "GET /openapi.json and GET /docs are open even when LOCALDECIDER_API_KEY is set.",
    },
    routes: deciderRoutes,
    ...(options.hostCheck ? { shared: { responses: DECIDER_HOST_RESPONSES, exceptPaths: PROBE_PATHS } } : {}),
    auth: {
      scheme: "bearerAuth",
      definition: { type: "http", scheme: "bearer", description: "LOCALDECIDER_API_KEY, when set" },
      responses: DECIDER_AUTH_RESPONSES,
    },
  });
}

export function createApp(deps: AppDeps): DeciderApp {
  const { pool } = deps.backend;
  const { metrics, observer } = createDeciderMetrics(deps.limiter, pool);
  const openapi = buildDeciderOpenApi({ hostCheck: deps.allowedHosts !== undefined });
  const gate = new ModelGate(pool, deps.logger, pool.maxAgeMs);
  const decider = new Decider({
    gate,
    allowNoLogprobs: deps.allowNoLogprobs,
    pool,
    limiter: deps.limiter,
    observer: deps.observer === undefined ? observer : fanOut(observer, deps.observer),
    logger: deps.logger,
    limits: deps.limits,
    malformedRetries: deps.malformedRetries,
    upstreamModel: deps.backend.model,
    timeoutSeconds: deps.timeoutSeconds,
    calibration: deps.calibration,
    // The state as shown to the model is bounded by the body it came in (compact JSON is never longer,
    // bar numbers written short such as 1e308): what a request may hold once admitted.
    maxStateChars: deps.bodyLimit,
    maxHeldBytes: deps.maxHeldBytes ?? defaultMaxHeldBytes(),
  });
  const app = express();
  app.disable("x-powered-by");
  // The SDK reads its request id from x-typesafe-request-id. The async context carries the id to the log
  // lines the decider writes below its handlers (retries, malformed answers, upstream failures); its price
  // (promise hooks, see requestId) is small next to a model call.
  app.use(requestId({ echoHeaders: ["x-typesafe-request-id"], asyncContext: true }));
  app.use(accessLog(deps.logger));
  app.use(metrics.httpMiddleware);
  deps.hooks?.beforeRoutes?.(app);
  if (deps.corsOrigins !== undefined && deps.corsOrigins.length > 0) {
    const allowHeaders = [...CORS_DEFAULTS.allowHeaders, "x-typesafe-request-id"];
    // A browser client reads X-Cached-Tokens (what the backend reused) only when it is exposed.
    const exposeHeaders = [...CORS_DEFAULTS.exposeHeaders, CACHED_TOKENS_HEADER.toLowerCase()];
    app.use(cors({ origins: deps.corsOrigins, allowHeaders, exposeHeaders }));
  }
  // Before any route, so that a request for a rebound name reads nothing and reaches no model server.
  if (deps.allowedHosts !== undefined) {
    app.use(
      hostCheck({
        allowed: deps.allowedHosts,
        reject: (cause) => deciderError("host_not_allowed", HOST_NOT_ALLOWED_MESSAGE, { cause }),
      }),
    );
  }
  // Operational endpoints, not in the contracts and so outside the bearer check: they reveal no secrets
  // (no keys, no request content), and Prometheus and browsers should not need the API key.
  app.use(docsRouter(openapi));
  // A static page, open like /docs: what it sends goes through the API routes and their bearer check.
  if (deps.playground === true) app.use(playgroundRouter());
  app.use(operationsRouter(metrics));
  registerRoutes(
    app,
    deciderRoutes,
    deciderHandlers({
      decider,
      gate,
      limiter: deps.limiter,
      pool,
      upstream: deps.backend.display,
      upstreamModel: deps.backend.model,
      describeBackend: () => deps.backend.describe(),
      upstreamAccepts: () => deps.backend.upstreamAccepts(),
      calibration: deps.calibration?.describe() ?? { active: false, prompt_version: PROMPT_VERSION },
      keyHolder: keyHolder(deps.apiKey),
    }),
    {
      authenticate: bearerAuth(deps.apiKey),
      jsonBody: jsonBody({ limit: deps.bodyLimit }),
      checkBody: (body) => {
        const questions = questionCount(body);
        if (questions > deps.maxQuestions) throw tooManyQuestions(questions, deps.maxQuestions);
        const issue = inputLimitIssue(body);
        if (issue !== undefined) throw deciderError("invalid_request", "Invalid request body", { details: [issue] });
      },
      invalid: (_part, error, body, route) => {
        const issues = (OPENAI_PATHS as readonly string[]).includes(route.path)
          ? openAIIssues(error.issues as Parameters<typeof openAIIssues>[0])
          : validationDetails(error, { root: "body" });
        const { message, details } = invalidBody(body, issues);
        return deciderError("invalid_request", message, { details });
      },
      methodNotAllowed: (method) => deciderError("method_not_allowed", `Method ${method} not allowed on this path`),
    },
  );
  app.use(notFoundHandler(() => deciderError("not_found", "Not found")));
  // OpenAI's paths (/v1/decisions) answer in OpenAI's error envelope; every other route in the decider's own.
  app.use(errorHandler({ logger: deps.logger, internalCode: "internal_error", present: presentOpenAIError }));
  return { app, decider, metrics, openapi };
}

/** GET /metrics, in a router of its own so the app's route list stays exactly deciderRoutes. */
function operationsRouter(metrics: Metrics): Router {
  const router = Router();
  router.get("/metrics", metrics.handler);
  return router;
}

/**
 * Half of V8's heap limit (`--max-old-space-size`, else what Node chose for this machine): what the requests
 * admitted may hold at once, leaving the rest to the prompts being rendered, the responses and the service.
 */
export function defaultMaxHeldBytes(): number {
  return Math.floor(getHeapStatistics().heap_size_limit / 2);
}
