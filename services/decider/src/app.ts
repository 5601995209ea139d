import { accessLog, errorHandler, type Logger, notFoundHandler, requestId } from "@localdecider/service-kit";
import express, { type Express } from "express";
import { Decider } from "./decide/decider";
import type { Limits } from "./decide/plan";
import { deciderError } from "./errors";
import type { UpstreamLimiter } from "./limiter";
import { type DeciderObserver, noopObserver } from "./observer";
import { registerRoutes } from "./routes";
import type { ReadinessProbe } from "./upstream/readiness";
import type { Upstream } from "./upstream/types";

export interface AppDeps {
  upstream: Upstream;
  probe: ReadinessProbe;
  limiter: UpstreamLimiter;
  logger: Logger;
  observer?: DeciderObserver;
  /** Shown by /ready. */
  upstreamAddress: string;
  upstreamModel: string;
  apiKey: string | undefined;
  limits: Limits;
  malformedRetries: number;
  timeoutSeconds: number;
  bodyLimit: string | number;
}

export interface DeciderApp {
  app: Express;
  decider: Decider;
}

export function createApp(deps: AppDeps): DeciderApp {
  const decider = new Decider({
    upstream: deps.upstream,
    limiter: deps.limiter,
    observer: deps.observer ?? noopObserver,
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
  registerRoutes(app, {
    decider,
    probe: deps.probe,
    apiKey: deps.apiKey,
    upstream: deps.upstreamAddress,
    upstreamModel: deps.upstreamModel,
    bodyLimit: deps.bodyLimit,
  });
  app.use(notFoundHandler(() => deciderError("not_found", "Not found")));
  app.use(errorHandler({ logger: deps.logger, internalCode: "internal_error" }));
  return { app, decider };
}
