import type { BackendInfo } from "@localdecider/contracts";
import {
  accessLog,
  buildOpenApiDocument,
  docsRouter,
  errorHandler,
  type Logger,
  type Metrics,
  notFoundHandler,
  type OpenApiDocument,
  requestId,
} from "@localdecider/service-kit";
import express, { type Express, Router } from "express";
import { Decider } from "./decide/decider";
import type { Limits } from "./decide/plan";
import { deciderError } from "./errors";
import type { UpstreamLimiter } from "./limiter";
import { createDeciderMetrics, fanOut } from "./metrics";
import type { DeciderObserver } from "./observer";
import { ROUTE_DOCS, registerRoutes } from "./routes";
import { ModelGate } from "./upstream/model-gate";
import type { ReadinessProbe } from "./upstream/readiness";
import type { Upstream } from "./upstream/types";
import { SERVICE_VERSION } from "./version";

export interface AppDeps {
  upstream: Upstream;
  probe: ReadinessProbe;
  /** What GET /v1/models says answers the questions (default: the model server at upstreamAddress). */
  describeBackend?: () => BackendInfo;
  limiter: UpstreamLimiter;
  logger: Logger;
  /** Sees every decider hook besides the app's own Prometheus series (tests record with one). */
  observer?: DeciderObserver;
  /** Shown by /ready. */
  upstreamAddress: string;
  upstreamModel: string;
  apiKey: string | undefined;
  limits: Limits;
  malformedRetries: number;
  timeoutSeconds: number;
  /** LOCALDECIDER_ALLOW_NO_LOGPROBS. */
  allowNoLogprobs: boolean;
  bodyLimit: string | number;
  /** Runs after request id and access log, before any route (tests mount a response recorder here). */
  hooks?: { beforeRoutes?: (app: Express) => void };
}

export interface DeciderApp {
  app: Express;
  decider: Decider;
  /** This app's own registry (served at /metrics), so test apps never share a global one. */
  metrics: Metrics;
  /** Served at /openapi.json, built from ROUTE_DOCS. */
  openapi: OpenApiDocument;
}

/** The API description, from the same route table and contracts schemas the routes validate with. */
export function buildDeciderOpenApi(): OpenApiDocument {
  return buildOpenApiDocument({
    info: {
      title: "localdecider decider",
      version: SERVICE_VERSION,
      description:
        "Calibrated answers from token logprobs of an OpenAI-compatible model server. GET /metrics (Prometheus), " +
        "GET /openapi.json and GET /docs are open even when LOCALDECIDER_API_KEY is set.",
    },
    routes: ROUTE_DOCS,
    securitySchemes: { bearerAuth: { type: "http", scheme: "bearer", description: "LOCALDECIDER_API_KEY, when set" } },
    security: [{ bearerAuth: [] }],
  });
}

export function createApp(deps: AppDeps): DeciderApp {
  const { metrics, observer } = createDeciderMetrics(deps.limiter);
  const openapi = buildDeciderOpenApi();
  const gate = new ModelGate(deps.probe, deps.logger, deps.probe.maxAgeMs);
  const decider = new Decider({
    gate,
    allowNoLogprobs: deps.allowNoLogprobs,
    upstream: deps.upstream,
    limiter: deps.limiter,
    observer: deps.observer === undefined ? observer : fanOut(observer, deps.observer),
    logger: deps.logger,
    limits: deps.limits,
    malformedRetries: deps.malformedRetries,
    upstreamModel: deps.upstreamModel,
    timeoutSeconds: deps.timeoutSeconds,
  });
  const app = express();
  app.disable("x-powered-by");
  // The SDK reads its request id from x-typesafe-request-id.
  app.use(requestId({ echoHeaders: ["x-typesafe-request-id"] }));
  app.use(accessLog(deps.logger));
  app.use(metrics.httpMiddleware);
  deps.hooks?.beforeRoutes?.(app);
  // Operational endpoints, outside /v1 and so outside the bearer check: they reveal no secrets (no keys,
  // no request content), and Prometheus and browsers should not need the API key.
  app.use(docsRouter(openapi));
  app.use(operationsRouter(metrics));
  registerRoutes(app, {
    decider,
    gate,
    apiKey: deps.apiKey,
    upstream: deps.upstreamAddress,
    upstreamModel: deps.upstreamModel,
    describeBackend:
      deps.describeBackend ?? (() => ({ kind: "server", address: deps.upstreamAddress, model: deps.upstreamModel })),
    bodyLimit: deps.bodyLimit,
  });
  app.use(notFoundHandler(() => deciderError("not_found", "Not found")));
  app.use(errorHandler({ logger: deps.logger, internalCode: "internal_error" }));
  return { app, decider, metrics, openapi };
}

/** GET /metrics, in a router of its own so the app's route list stays exactly ROUTE_DOCS. */
function operationsRouter(metrics: Metrics): Router {
  const router = Router();
  router.get("/metrics", metrics.handler);
  return router;
}
