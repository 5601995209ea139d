import {
  checkRecordedResponses,
  expectResponseMatchesOpenApi,
  metricSample,
  validateOpenApi31,
} from "@localdecider/service-kit/test-utils";
import request from "supertest";
import { buildDeciderOpenApi } from "../src/app";
import { type Harness, harness, waitFor } from "./helpers";
import { recorder } from "./setup/openapi-responses";

const nouls = (n: number, prefix = "n") =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, { type: "noul", instructions: "Is it?" }]));
const payload = (n = 1, prefix?: string) => ({ model: "localdecider", state: "s", questions: nouls(n, prefix) });

const scrape = async (h: Harness) => {
  const res = await request(h.app).get("/metrics").expect(200);
  expect(res.headers["content-type"]).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text;
};

let h: Harness;
afterEach(async () => {
  await h.close();
});

describe("GET /metrics", () => {
  it("after a decision, counts the request under its route pattern and moves the upstream and token series", async () => {
    h = await harness({ questionsPerCall: 1 });
    const res = await request(h.app).post("/v1/systemone").send(payload(2)).expect(200);
    await request(h.app).get("/v1/nowhere/42").expect(404);
    const text = await scrape(h);
    const http = { method: "POST", route: "/v1/systemone", status: "200", service: "decider" };
    expect(metricSample(text, "http_requests_total", http)).toBe(1);
    expect(metricSample(text, "http_request_duration_seconds_count", http)).toBe(1);
    // Unmatched URLs share one series instead of one per URL.
    expect(metricSample(text, "http_requests_total", { route: "unmatched", status: "404" })).toBe(1);
    expect(text).not.toContain("/v1/nowhere/42");
    expect(metricSample(text, "decider_upstream_call_duration_seconds_count", { outcome: "ok" })).toBe(2);
    expect(metricSample(text, "decider_upstream_call_duration_seconds_count", { outcome: "error" })).toBe(0);
    expect(res.body.usage).toStrictEqual({ input_tokens: 200, output_tokens: 2 });
    expect(metricSample(text, "decider_tokens_total", { direction: "input" })).toBe(200);
    expect(metricSample(text, "decider_tokens_total", { direction: "output" })).toBe(2);
    expect(metricSample(text, "decider_absent_outcomes_total")).toBe(0);
    expect(metricSample(text, "decider_malformed_retries_total")).toBe(0);
    expect(metricSample(text, "decider_queue_rejected_total")).toBe(0);
  });

  it("shows queued and in-flight upstream calls while they wait, and a 429 moves the rejected counter", async () => {
    h = await harness({ maxInflight: 1, maxQueue: 3, questionsPerCall: 1 });
    h.fake.holding = true;
    const first = request(h.app)
      .post("/v1/systemone")
      .send(payload(3))
      .then((r) => r);
    await waitFor(() => h.fake.inflight === 1, "the first call in flight");
    const refused = await request(h.app).post("/v1/systemone").send(payload(2, "m"));
    expect(refused.status).toBe(429);
    const busy = await scrape(h);
    expect(metricSample(busy, "decider_queue_length")).toBe(2);
    expect(metricSample(busy, "decider_upstream_inflight")).toBe(1);
    expect(metricSample(busy, "decider_queue_rejected_total")).toBe(1);
    expect(metricSample(busy, "http_requests_total", { route: "/v1/systemone", status: "429" })).toBe(1);
    h.fake.release();
    expect((await first).status).toBe(200);
    const idle = await scrape(h);
    expect(metricSample(idle, "decider_queue_length")).toBe(0);
    expect(metricSample(idle, "decider_upstream_inflight")).toBe(0);
  });

  it("counts a malformed output that was retried, and the malformed call by its outcome", async () => {
    h = await harness();
    h.fake.faults = ["malformed"];
    await request(h.app).post("/v1/systemone").send(payload()).expect(200);
    const text = await scrape(h);
    expect(metricSample(text, "decider_malformed_retries_total")).toBe(1);
    expect(metricSample(text, "decider_upstream_call_duration_seconds_count", { outcome: "malformed" })).toBe(1);
    expect(metricSample(text, "decider_upstream_call_duration_seconds_count", { outcome: "ok" })).toBe(1);
  });

  it("keeps one registry per app: a second app starts from zero", async () => {
    h = await harness();
    await request(h.app).get("/health").expect(200);
    const other = await harness();
    try {
      const text = await scrape(other);
      expect(metricSample(text, "http_requests_total", { route: "/health" })).toBeUndefined();
    } finally {
      await other.close();
    }
  });
});

describe("GET /openapi.json and GET /docs", () => {
  it("serves an OpenAPI 3.1 document built from ROUTE_DOCS that the official schema accepts", async () => {
    h = await harness();
    const res = await request(h.app).get("/openapi.json").expect(200);
    expect(res.body).toStrictEqual(buildDeciderOpenApi({ hostCheck: true }));
    const validation = await validateOpenApi31(res.body);
    expect(validation).toStrictEqual({ valid: true, report: expect.anything() });
    expect(Object.keys(res.body.paths).sort()).toStrictEqual([
      "/health",
      "/ready",
      "/v1/decisions",
      "/v1/models",
      "/v1/systemone",
    ]);
    // The official schema is compiled before it validates: ~3.6 s of a 45 KB document on a loaded 2-core machine.
  }, 30_000);

  it("describes both backends, the embedded engine (the default) and model servers, not only a model server", async () => {
    h = await harness();
    const doc = (await request(h.app).get("/openapi.json").expect(200)).body;
    expect(doc.info.description).toContain("one this process runs itself (the embedded engine");
    expect(doc.info.description).toContain("OpenAI-compatible model servers (LOCALDECIDER_UPSTREAM)");
    const ready = doc.paths["/ready"].get;
    expect(ready.summary).toContain("the embedded engine's model is loaded");
    expect(ready.responses["503"].description).toContain("The embedded model still on its way");
    expect(doc.paths["/v1/systemone"].post.responses["503"].description).toContain("the embedded model not loaded");
  });

  it("serves the interactive reference at /docs from this server only", async () => {
    h = await harness();
    const res = await request(h.app).get("/docs").expect(200);
    expect(res.headers["content-type"]).toMatch(/^text\/html/);
    expect(res.text).toContain('<script src="docs/init.js"></script>');
    expect((await request(h.app).get("/docs/init.js").expect(200)).text).toContain('url: "openapi.json"');
  });

  it("leaves /metrics, /openapi.json and /docs open when LOCALDECIDER_API_KEY is set, while /v1 needs it", async () => {
    h = await harness({ apiKey: "secret-key" });
    await request(h.app).get("/v1/models").expect(401);
    for (const path of ["/metrics", "/openapi.json", "/docs"]) {
      const res = await request(h.app).get(path);
      expect([path, res.status]).toStrictEqual([path, 200]);
      expect(res.text).not.toContain("secret-key");
    }
  });
});

describe("live responses against /openapi.json", () => {
  const document = buildDeciderOpenApi({ hostCheck: false });
  const decide = (target: Harness, body: unknown = payload()) =>
    request(target.app)
      .post("/v1/systemone")
      .send(body as object);

  it("every route answers its main statuses with bodies matching the document", async () => {
    h = await harness({ apiKey: "k", bodyLimit: "1kb", timeoutSeconds: 0.2 });
    const auth = { Authorization: "Bearer k" };
    const check = (method: "get" | "post", path: string, res: request.Response) =>
      expectResponseMatchesOpenApi(document, { method, path, status: res.status, body: res.body });

    check("get", "/health", await request(h.app).get("/health").expect(200));
    check("get", "/ready", await request(h.app).get("/ready").expect(200));
    check("get", "/v1/models", await request(h.app).get("/v1/models").set(auth).expect(200));
    check("get", "/v1/models", await request(h.app).get("/v1/models").expect(401));
    check("post", "/v1/systemone", await decide(h).set(auth).expect(200));
    check("post", "/v1/systemone", await decide(h).expect(401));
    check("post", "/v1/systemone", await decide(h, { model: "localdecider" }).set(auth).expect(422));
    check(
      "post",
      "/v1/systemone",
      await request(h.app)
        .post("/v1/systemone")
        .set(auth)
        .set("content-type", "application/json")
        .send('{"model":')
        .expect(400),
    );
    check(
      "post",
      "/v1/systemone",
      await decide(h, { ...payload(), state: "x".repeat(2048) })
        .set(auth)
        .expect(413),
    );
    h.fake.faults = ["http500"];
    check("post", "/v1/systemone", await decide(h).set(auth).expect(502));
    h.fake.faults = ["model404"];
    check("post", "/v1/systemone", await decide(h).set(auth).expect(503));
    h.fake.faults = ["hang"];
    check("post", "/v1/systemone", await decide(h).set(auth).expect(504));
    await waitFor(() => h.fake.aborted === 1, "the fake to see the abort");
    await h.fake.stop();
    check("get", "/ready", await request(h.app).get("/ready").expect(503));

    const queued = await harness({ maxInflight: 1, maxQueue: 2, questionsPerCall: 1 });
    try {
      queued.fake.holding = true;
      const first = decide(queued, payload(2)).then((r) => r);
      await waitFor(() => queued.fake.inflight === 1, "the first call in flight");
      check("post", "/v1/systemone", await decide(queued, payload(2)).expect(429));
      queued.fake.release();
      await first;
    } finally {
      await queued.close();
    }

    // Everything this file received (the tests above included) matches the document, and covers this:
    expect(checkRecordedResponses(document, recorder.responses)).toStrictEqual([
      "GET /health 200",
      "GET /ready 200",
      "GET /ready 503",
      "GET /v1/models 200",
      "GET /v1/models 401",
      "POST /v1/systemone 200",
      "POST /v1/systemone 400",
      "POST /v1/systemone 401",
      "POST /v1/systemone 413",
      "POST /v1/systemone 422",
      "POST /v1/systemone 429",
      "POST /v1/systemone 502",
      "POST /v1/systemone 503",
      "POST /v1/systemone 504",
    ]);
  });
});
