import express from "express";
import request from "supertest";
import { z } from "zod";
import { buildOpenApiDocument } from "../src";
import { checkRecordedResponses, documentPathOf, metricSample, responseRecorder } from "../src/test-utils";

const document = buildOpenApiDocument({
  info: { title: "sample", version: "0.1.0" },
  routes: {
    list: {
      method: "get",
      path: "/users/:userId/todos",
      summary: "List",
      auth: "none",
      responses: {
        200: { description: "Items", schema: z.object({ items: z.array(z.string()) }) },
        400: { description: "Bad", schema: z.object({ error: z.string() }) },
      },
    },
  },
});

function sampleApp(recorder: ReturnType<typeof responseRecorder>, items: unknown) {
  const app = express();
  app.use(recorder.middleware);
  app.get("/users/:userId/todos", (req, res) => {
    if (req.params.userId === "bad") res.status(400).json({ error: "Invalid userId" });
    else res.json({ items });
  });
  return app;
}

describe("responseRecorder + checkRecordedResponses", () => {
  it("when every live response matches, returns the operations and statuses covered, unknown paths left out", async () => {
    const recorder = responseRecorder();
    const app = sampleApp(recorder, ["a"]);
    await request(app).get("/users/u1/todos?limit=1").expect(200);
    await request(app).get("/users/bad/todos").expect(400);
    await request(app).get("/nowhere").expect(404);
    expect(recorder.responses.map((r) => `${r.method} ${r.path} ${r.status}`)).toStrictEqual([
      "GET /users/u1/todos 200",
      "GET /users/bad/todos 400",
      "GET /nowhere 404",
    ]);
    expect(checkRecordedResponses(document, recorder.responses)).toStrictEqual([
      "GET /users/{userId}/todos 200",
      "GET /users/{userId}/todos 400",
    ]);
  });

  it("when a body breaks its schema or a status is undocumented, throws naming each", async () => {
    const recorder = responseRecorder();
    const app = sampleApp(recorder, [1]);
    await request(app).get("/users/u1/todos").expect(200);
    recorder.responses.push({ method: "GET", path: "/users/u2/todos", status: 500, body: { error: "x" } });
    expect(() => checkRecordedResponses(document, recorder.responses)).toThrow(
      /GET \/users\/u1\/todos 200: \/items\/0 must be string[\s\S]*GET \/users\/u2\/todos 500: .*documents no 500/,
    );
  });

  it("matches a path only to a template of the same method and segment count", () => {
    expect(documentPathOf(document, "GET", "/users/a/todos")).toBe("/users/{userId}/todos");
    expect(documentPathOf(document, "POST", "/users/a/todos")).toBeUndefined();
    expect(documentPathOf(document, "GET", "/users/a/b/todos")).toBeUndefined();
  });
});

describe("metricSample", () => {
  const text = [
    "# HELP http_requests_total Requests.",
    "# TYPE http_requests_total counter",
    'http_requests_total{method="GET",route="/a",status="200",service="s"} 3',
    'http_requests_total{method="GET",route="/a",status="404",service="s"} 1',
    'db_query_duration_seconds_count{operation="x",outcome="ok"} 2',
    "queue_length 0",
  ].join("\n");

  it("reads the sample whose labels include the ones asked for, undefined when none does", () => {
    expect(metricSample(text, "http_requests_total", { route: "/a", status: "404" })).toBe(1);
    expect(metricSample(text, "http_requests_total", { route: "/a", status: "200" })).toBe(3);
    expect(metricSample(text, "db_query_duration_seconds_count", { operation: "x" })).toBe(2);
    expect(metricSample(text, "queue_length")).toBe(0);
    expect(metricSample(text, "http_requests_total", { route: "/b" })).toBeUndefined();
  });
});
