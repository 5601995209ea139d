import express from "express";
import request from "supertest";
import { AppError, createLogger, createMetrics, errorHandler, Gauge, notFoundHandler, UNMATCHED_ROUTE } from "../src";

function appWithMetrics() {
  const metrics = createMetrics({ service: "svc-test" });
  const app = express();
  app.use(metrics.httpMiddleware);
  app.get("/metrics", metrics.handler);
  app.get("/users/:userId/todos", (_req, res) => {
    res.json({ todoItems: [] });
  });
  app.delete("/users/:userId/todos/:itemId", () => {
    throw new AppError(404, "Todo item not found");
  });
  const nested = express.Router();
  nested.get("/models", (_req, res) => {
    res.json({ models: [] });
  });
  nested.get("/models/:modelId", async () => {
    await new Promise((resolve) => setImmediate(resolve));
    throw new AppError(404, "Unknown model");
  });
  app.use("/v1", nested);
  app.use(notFoundHandler(() => new AppError(404, "Not found")));
  app.use(errorHandler({ logger: createLogger({ service: "svc-test", level: "silent" }) }));
  return { app, metrics };
}

/** The value of one sample of a metric, read from the registry rather than by parsing text. */
async function sample(metrics: ReturnType<typeof createMetrics>, name: string, labels: Record<string, string>) {
  const all = await metrics.registry.getMetricsAsJSON();
  // A histogram's samples (_bucket, _sum, _count) sit under the histogram's name, each with its metricName.
  const values = all.flatMap((m) =>
    (m.values as { labels: Record<string, string | number>; value: number; metricName?: string }[]).map((v) => ({
      ...v,
      metricName: v.metricName ?? m.name,
    })),
  );
  return values.find(
    (v) => v.metricName === name && Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want),
  )?.value;
}

describe("createMetrics httpMiddleware", () => {
  it("labels requests by the route pattern, not the raw URL, so two users share one series", async () => {
    const { app, metrics } = appWithMetrics();
    await request(app).get("/users/alice/todos").expect(200);
    await request(app).get("/users/bob/todos").expect(200);
    const labels = { method: "GET", route: "/users/:userId/todos", status: "200" };
    expect(await sample(metrics, "http_requests_total", labels)).toBe(2);
    expect(await sample(metrics, "http_request_duration_seconds_count", labels)).toBe(2);
    const text = await metrics.registry.metrics();
    expect(text).not.toContain("alice");
    expect(text).not.toContain("bob");
  });

  it("records the status an error handler answered with, under the matched route", async () => {
    const { app, metrics } = appWithMetrics();
    await request(app).delete("/users/u1/todos/i1").expect(404);
    const labels = { method: "DELETE", route: "/users/:userId/todos/:itemId", status: "404" };
    expect(await sample(metrics, "http_requests_total", labels)).toBe(1);
  });

  it("labels a URL no route matched as unmatched, whatever the URL", async () => {
    const { app, metrics } = appWithMetrics();
    await request(app).get("/no/such/path/123").expect(404);
    await request(app).post("/other").expect(404);
    expect(await sample(metrics, "http_requests_total", { method: "GET", route: UNMATCHED_ROUTE, status: "404" })).toBe(
      1,
    );
    expect(
      await sample(metrics, "http_requests_total", { method: "POST", route: UNMATCHED_ROUTE, status: "404" }),
    ).toBe(1);
    expect(await metrics.registry.metrics()).not.toContain("/no/such/path");
  });

  it("includes the mount path of a router in the route label", async () => {
    const { app, metrics } = appWithMetrics();
    await request(app).get("/v1/models").expect(200);
    expect(await sample(metrics, "http_requests_total", { method: "GET", route: "/v1/models", status: "200" })).toBe(1);
  });

  it("keeps the mount path when a route inside a router fails and the app's error handler answers", async () => {
    const { app, metrics } = appWithMetrics();
    await request(app).get("/v1/models/nope").expect(404);
    const labels = { method: "GET", route: "/v1/models/:modelId", status: "404" };
    expect(await sample(metrics, "http_requests_total", labels)).toBe(1);
  });
});

describe("GET /metrics", () => {
  it("answers Prometheus text with request, latency, process and service-registered metrics, all labelled by service", async () => {
    const { app, metrics } = appWithMetrics();
    const queue = new Gauge({ name: "svc_queue_length", help: "Requests waiting.", registers: [metrics.registry] });
    queue.set(3);
    await request(app).get("/users/alice/todos").expect(200);

    const res = await request(app).get("/metrics");

    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toBe("text/plain; version=0.0.4; charset=utf-8");
    expect(res.text).toContain("# TYPE http_requests_total counter");
    expect(res.text).toContain(
      'http_requests_total{method="GET",route="/users/:userId/todos",status="200",service="svc-test"} 1',
    );
    expect(res.text).toContain("# TYPE http_request_duration_seconds histogram");
    expect(res.text).toContain(
      'http_request_duration_seconds_bucket{le="60",service="svc-test",method="GET",route="/users/:userId/todos",status="200"} 1',
    );
    expect(res.text).toContain('svc_queue_length{service="svc-test"} 3');
    expect(res.text).toMatch(/^process_cpu_user_seconds_total\{service="svc-test"\} [0-9.e-]+$/m);
    expect(res.text).toMatch(/^nodejs_eventloop_lag_seconds\{service="svc-test"\} [0-9.e-]+$/m);
  });

  it("keeps two services' registries apart", async () => {
    const a = createMetrics({ service: "a", defaultMetrics: false });
    const b = createMetrics({ service: "b", defaultMetrics: false });
    new Gauge({ name: "only_in_a", help: "x", registers: [a.registry] }).set(1);
    expect(await a.registry.metrics()).toContain("only_in_a");
    expect(await b.registry.metrics()).not.toContain("only_in_a");
  });
});
