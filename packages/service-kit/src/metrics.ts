import type { Request, RequestHandler } from "express";
import { Counter, collectDefaultMetrics, Histogram, Registry } from "prom-client";

// Services register their own metrics on the registry they get from createMetrics, so they need the
// metric classes but not a dependency of their own on prom-client.
export { Counter, Gauge, Histogram, Registry, Summary } from "prom-client";

/** Route label of a request no route matched (404s, probes of random URLs): one series, not one per URL. */
export const UNMATCHED_ROUTE = "unmatched";

/**
 * Request latency buckets in seconds. Express's usual range, extended to 60 s because a decider request
 * waits for a local model and may legitimately take tens of seconds.
 */
export const HTTP_LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export interface MetricsOptions {
  /** Added as the `service` label on every series, so one Prometheus can scrape both services. */
  service: string;
  /** Node process metrics (CPU, memory, event loop lag, GC). Default true. */
  defaultMetrics?: boolean;
  buckets?: number[];
}

export interface Metrics {
  /** The registry `handler` exposes; register service-specific metrics with `registers: [registry]`. */
  registry: Registry;
  /** Counts and times every request by method, route pattern and status. Mount it before the routes. */
  httpMiddleware: RequestHandler;
  /** Serves the registry in Prometheus text format, for `app.get("/metrics", metrics.handler)`. */
  handler: RequestHandler;
}

/**
 * The route label is the Express route pattern (`/users/:userId/todos`), never the raw URL: raw URLs carry
 * user ids and would create a series per user. Read when the response finishes, by which time Express
 * has set req.route for a matched route; baseUrl covers routes inside a mounted router.
 */
export function routeLabel(req: Request): string {
  const route: unknown = req.route;
  if (typeof route !== "object" || route === null || !("path" in route)) return UNMATCHED_ROUTE;
  const path = route.path;
  if (typeof path !== "string") return UNMATCHED_ROUTE;
  return `${req.baseUrl}${path}` || "/";
}

export function createMetrics(options: MetricsOptions): Metrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service: options.service });
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });

  const labelNames = ["method", "route", "status"] as const;
  const requests = new Counter({
    name: "http_requests_total",
    help: "HTTP requests answered, by method, route pattern and status code.",
    labelNames,
    registers: [registry],
  });
  const duration = new Histogram({
    name: "http_request_duration_seconds",
    help: "Time from receiving an HTTP request to finishing its response, by method, route pattern and status code.",
    labelNames,
    buckets: options.buckets ?? HTTP_LATENCY_BUCKETS,
    registers: [registry],
  });

  const httpMiddleware: RequestHandler = (req, res, next) => {
    const start = process.hrtime.bigint();
    // Express sets req.route when a route matches, while req.baseUrl is still the mount path of the router
    // holding it. By the time the response finishes after an error, Express has restored baseUrl to the
    // parent's, so the full pattern is captured at assignment instead.
    let matchedRoute: string | undefined;
    let route: unknown;
    Object.defineProperty(req, "route", {
      configurable: true,
      enumerable: true,
      get: () => route,
      set: (value: unknown) => {
        route = value;
        const label = routeLabel(req);
        if (label !== UNMATCHED_ROUTE) matchedRoute = label;
      },
    });
    let recorded = false;
    const record = () => {
      // "close" follows "finish" on a normal response; a client that hangs up early only gives "close".
      if (recorded) return;
      recorded = true;
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      const labels = { method: req.method, route: matchedRoute ?? UNMATCHED_ROUTE, status: String(res.statusCode) };
      requests.inc(labels);
      duration.observe(labels, seconds);
    };
    res.once("finish", record);
    res.once("close", record);
    next();
  };

  const handler: RequestHandler = async (_req, res) => {
    const body = await registry.metrics();
    res.setHeader("Content-Type", registry.contentType);
    res.send(body);
  };

  return { registry, httpMiddleware, handler };
}
