import { HOST_NOT_ALLOWED_STATUS } from "@localdecider/contracts";
import { TODO_MESSAGES, TODOS_AUTH_RESPONSES, TODOS_HOST_RESPONSES, todosRoutes } from "@localdecider/contracts/todos";
import {
  type AllowedHosts,
  AppError,
  accessLog,
  bodyParserErrorType,
  buildOpenApiDocument,
  cors,
  docsRouter,
  errorHandler,
  hostCheck,
  jsonBody,
  type Logger,
  notFoundHandler,
  type OpenApiDocument,
  PROBE_PATHS,
  registerRoutes,
  requestId,
} from "@localdecider/service-kit";
import express, { type Express } from "express";
import { DEFAULT_MAX_ITEMS_PER_USER } from "./config";
import { BEARER_SCHEME, BEARER_SECURITY_SCHEME, requireUser, type TodosAuth } from "./http/auth";
import { DEFAULT_LIST_LIMITS, type ListLimits } from "./http/list-window";
import { todoHandlers } from "./http/todo-routes";
import { invalidTodosRequest } from "./http/validation";
import { createTodosMetrics, type TodosMetrics } from "./metrics";
import type { TodoRepository } from "./storage/repository";

/** Bodies above this get 413 (issue 2: 64 KiB). */
export const BODY_LIMIT_BYTES = 64 * 1024;

/** Shown in /openapi.json; a test pins it to package.json. */
export const SERVICE_VERSION = "0.1.0";

export interface AppDeps {
  repository: TodoRepository;
  logger: Logger;
  /**
   * The app's Prometheus series, served at /metrics. Create it with createTodosMetrics() before opening
   * storage and pass its onQuery/watchPool to openStorage; when omitted the app makes its own (HTTP series
   * only, no database ones).
   */
  metrics?: TodosMetrics;
  /**
   * Sign-in (TODOS_AUTH=jwt, built by authFromConfig or createJwtAuth): every per-user route then wants a
   * bearer JWT whose `sub` is the path's userId. Omitted: no authentication, the default.
   */
  auth?: TodosAuth | undefined;
  /** Items one user may hold (TODOS_MAX_ITEMS_PER_USER); a create past it answers 409. Default 10,000. */
  maxItemsPerUser?: number | undefined;
  /**
   * What one list answer without `limit`/`page` holds (TODOS_LIST_MAX_ITEMS, TODOS_LIST_MAX_BYTES); the rest
   * is behind `Link: <…>; rel="next"`. Default 1,000 items and 1 MiB.
   */
  listLimits?: ListLimits | undefined;
  /**
   * The Host check against DNS rebinding (hostPolicy of TODOS_ALLOWED_HOSTS, TODOS_HOST and sign-in): a
   * request for any other name gets 421 before any route runs, except on /health, /ready and /metrics.
   * undefined: no check (sign-in on without TODOS_ALLOWED_HOSTS, or `*`).
   */
  allowedHosts: AllowedHosts | undefined;
  /** Origins allowed by CORS (`*_CORS_ORIGINS`); undefined or empty: no CORS headers. */
  corsOrigins?: readonly string[] | undefined;
  /**
   * Hooks for what is wired in later without editing this file: `beforeRoutes` runs after request id and
   * access log and before any route (tests mount their response recorders here).
   */
  hooks?: {
    beforeRoutes?: (app: Express) => void;
  };
}

/** Known failures as todos error bodies, which carry no `code` (the seed fixes them to `{ error }`). */
function mapKnownError(err: unknown): AppError | undefined {
  switch (bodyParserErrorType(err)) {
    // The seed documents a 500 `{ error: "Internal server error" }` for a body that is not JSON. That is
    // kept, but it is the client's fault, so it is logged as a client error (warn), not as a server fault.
    case "entity.parse.failed":
      return new AppError(500, TODO_MESSAGES.internal, { logLevel: "warn", cause: err });
    case "entity.too.large":
      return new AppError(413, TODO_MESSAGES.tooLarge);
    case "encoding.unsupported":
    case "charset.unsupported":
      return new AppError(415, TODO_MESSAGES.unsupportedEncoding);
    case "request.aborted":
      return new AppError(400, TODO_MESSAGES.aborted);
  }
  // The router could not percent-decode a path parameter (e.g. "%E0%A4%A"): the client's malformed URL.
  if (err instanceof URIError && (err as URIError & { status?: number }).status === 400) {
    return new AppError(400, TODO_MESSAGES.invalidPath);
  }
  // body-parser's other client errors (a corrupt gzip/deflate/br stream, a body shorter than its
  // Content-Length) come as http-errors 400 without a type: the body could not even be read, which is not
  // the seed's "unparseable JSON" case.
  if (typeof err === "object" && err !== null && "status" in err && err.status === 400 && "expose" in err) {
    return new AppError(400, TODO_MESSAGES.invalidBody);
  }
  return undefined;
}

/**
 * The API description, from the same route contracts the routes are registered and validated from. The
 * bearer scheme and its 401/403 (503 with a key set) are declared only when sign-in is on: with sign-in
 * off the document says no authentication, which is the truth. Likewise the Host check's 421, on every
 * route but the probes', only when the check is on.
 */
export function buildTodosOpenApi(options: { auth?: TodosAuth | undefined; hostCheck: boolean }): OpenApiDocument {
  const { auth } = options;
  const { 503: keysUnavailable, ...always } = TODOS_AUTH_RESPONSES;
  return buildOpenApiDocument({
    info: {
      title: "localdecider todos",
      version: SERVICE_VERSION,
      description:
        "Per-user todo lists. GET /metrics (Prometheus), GET /openapi.json and GET /docs are not listed here.",
    },
    routes: todosRoutes,
    ...(options.hostCheck ? { shared: { responses: TODOS_HOST_RESPONSES, exceptPaths: PROBE_PATHS } } : {}),
    ...(auth === undefined
      ? {}
      : {
          auth: {
            scheme: BEARER_SCHEME,
            definition: BEARER_SECURITY_SCHEME,
            responses: auth.keySource === "jwks" ? { ...always, 503: keysUnavailable } : always,
          },
        }),
  });
}

export function createApp(deps: AppDeps): Express {
  const { logger } = deps;
  const metrics = deps.metrics ?? createTodosMetrics();
  const app = express();
  app.disable("x-powered-by");
  // Repeated parameters arrive as arrays and are rejected by validation; no nested objects.
  app.set("query parser", "simple");

  app.use(requestId());
  app.use(accessLog(logger));
  app.use(metrics.metrics.httpMiddleware);
  deps.hooks?.beforeRoutes?.(app);
  if (deps.corsOrigins !== undefined && deps.corsOrigins.length > 0) app.use(cors({ origins: deps.corsOrigins }));
  // Before any route, so that a request for a rebound name reads and changes nothing (its body unread).
  if (deps.allowedHosts !== undefined) {
    app.use(
      hostCheck({
        allowed: deps.allowedHosts,
        reject: (cause) => new AppError(HOST_NOT_ALLOWED_STATUS, TODO_MESSAGES.hostNotAllowed, { cause }),
      }),
    );
  }
  app.get("/metrics", metrics.metrics.handler);
  app.use(docsRouter(buildTodosOpenApi({ auth: deps.auth, hostCheck: deps.allowedHosts !== undefined })));

  // Only routes that take a body read one: a body sent with GET or DELETE is ignored, never a 413/500.
  // Sign-in comes first: a request without a valid token gets its 401/403 before its body is read.
  const handlers = todoHandlers(
    deps.repository,
    deps.maxItemsPerUser ?? DEFAULT_MAX_ITEMS_PER_USER,
    deps.listLimits ?? DEFAULT_LIST_LIMITS,
  );
  registerRoutes(app, todosRoutes, handlers, {
    authenticate: deps.auth === undefined ? undefined : requireUser(deps.auth),
    jsonBody: jsonBody({ limit: BODY_LIMIT_BYTES }),
    invalid: invalidTodosRequest,
    methodNotAllowed: (method) => new AppError(405, `Method ${method} not allowed on this path`),
  });

  app.use(notFoundHandler(() => new AppError(404, TODO_MESSAGES.routeNotFound)));
  app.use(errorHandler({ logger, map: mapKnownError, internalMessage: TODO_MESSAGES.internal }));
  return app;
}
