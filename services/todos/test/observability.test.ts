import { readFileSync } from "node:fs";
import { join } from "node:path";
import { metricSample, validateOpenApi31 } from "@localdecider/service-kit/test-utils";
import request from "supertest";
import { todosOpenApi } from "./setup/openapi-responses";
import { pgliteMode, postgresMode, suiteApp, type TestApp } from "./support/storage-modes";

const scrape = async (t: TestApp) => {
  const res = await request(t.app).get("/metrics").expect(200);
  expect(res.headers["content-type"]).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text;
};

// One PGlite app for the PGlite and document tests (each opening costs about two seconds on 2 cores).
const pglite = suiteApp(pgliteMode);

describe("GET /metrics on PGlite", () => {
  it("counts requests by route pattern and status, and each query in the database histogram", async () => {
    await request(pglite.app).post("/users/metrics-user/todos").send({ title: "x" }).expect(201);
    await request(pglite.app).get("/users/metrics-user/todos").expect(200);
    await request(pglite.app).get("/users/other-user/todos").expect(200);
    await request(pglite.app).get("/no/such/route").expect(404);
    const text = await scrape(pglite);
    const list = { method: "GET", route: "/users/:userId/todos", status: "200", service: "todos" };
    expect(metricSample(text, "http_requests_total", list)).toBe(2);
    expect(metricSample(text, "http_request_duration_seconds_count", list)).toBe(2);
    expect(metricSample(text, "http_requests_total", { method: "POST", status: "201" })).toBe(1);
    expect(metricSample(text, "http_requests_total", { route: "unmatched", status: "404" })).toBe(1);
    // Route patterns, never the raw URLs with their user ids.
    expect(text).not.toContain("metrics-user");
    expect(
      metricSample(text, "todos_db_query_duration_seconds_count", { operation: "todoItem.findMany", outcome: "ok" }),
    ).toBe(2);
    expect(
      metricSample(text, "todos_db_query_duration_seconds_count", { operation: "todoItem.create", outcome: "ok" }),
    ).toBe(1);
    // PGlite has no connection pool.
    expect(metricSample(text, "todos_db_pool_connections")).toBeUndefined();
  });
});

describe("GET /metrics on PostgreSQL", () => {
  const postgres = suiteApp(postgresMode);

  it("shows the connection pool's figures next to the query histogram", async () => {
    await request(postgres.app).get("/users/pool-user/todos").expect(200);
    const text = await scrape(postgres);
    expect(
      metricSample(text, "todos_db_query_duration_seconds_count", { operation: "todoItem.findMany", outcome: "ok" }),
    ).toBe(1);
    expect(metricSample(text, "todos_db_pool_connections")).toBe(1);
    expect(metricSample(text, "todos_db_pool_idle_connections")).toBe(1);
    expect(metricSample(text, "todos_db_pool_waiting_requests")).toBe(0);
  });
});

describe("GET /openapi.json and GET /docs", () => {
  it("serves an OpenAPI 3.1 document built from the route table that the official schema accepts", async () => {
    const res = await request(pglite.app).get("/openapi.json").expect(200);
    expect(res.body).toStrictEqual(todosOpenApi());
    expect(res.body.info.version).toBe(JSON.parse(readFileSync(join(__dirname, "../package.json"), "utf8")).version);
    expect(await validateOpenApi31(res.body)).toStrictEqual({ valid: true, report: expect.anything() });
    expect(Object.keys(res.body.paths).sort()).toStrictEqual([
      "/health",
      "/ready",
      "/users/{userId}/todos",
      "/users/{userId}/todos/{itemId}",
      "/v1/user/{userId}/todos",
    ]);
  });

  it("serves the interactive reference at /docs from this server only", async () => {
    const res = await request(pglite.app).get("/docs").expect(200);
    expect(res.headers["content-type"]).toMatch(/^text\/html/);
    expect(res.text).toContain('<script src="docs/init.js"></script>');
    expect((await request(pglite.app).get("/docs/init.js").expect(200)).text).toContain('url: "openapi.json"');
  });
});
