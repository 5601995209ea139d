import { createLogger } from "@localdecider/service-kit";
import request from "supertest";
import { PROMPT_VERSION } from "../src/decide/prompt";
import { capturingLogger, type Harness, harness } from "./helpers";

describe("GET /health", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("answers 200 { status: ok } even when the backend is down and a key is configured", async () => {
    h = await harness({ apiKey: "k" });
    await h.fake.stop();
    const res = await request(h.app).get("/health");
    expect(res.status).toBe(200);
    expect(res.body).toStrictEqual({ status: "ok" });
  });
});

describe("GET /ready", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("answers 200 when the backend lists the configured model, without a bearer even if a key is set (naming the server by its label)", async () => {
    h = await harness({ apiKey: "k" });
    const res = await request(h.app).get("/ready");
    expect(res.status).toBe(200);
    expect(res.body).toStrictEqual({
      status: "ready",
      upstream: "server 1",
      model: "test-model",
      protocol: "chat",
      limits: "this process",
    });
  });

  it("answers 503 with exactly 'inference backend returned HTTP 404' when the backend answers 404", async () => {
    h = await harness();
    h.fake.modelsStatus = 404;
    const res = await request(h.app).get("/ready");
    expect(res.status).toBe(503);
    expect(res.body).toStrictEqual({ error: "inference backend returned HTTP 404", code: "backend_not_ready" });
  });

  it("answers 503 when the backend lists no models", async () => {
    h = await harness();
    h.fake.models = [];
    const res = await request(h.app).get("/ready");
    expect(res.status).toBe(503);
    expect(res.body).toStrictEqual({
      error:
        'inference backend returned HTTP 404: it lists no models (it found no model directory), so not "test-model"',
      code: "backend_not_ready",
    });
  });

  it("answers 503 saying the configured model is missing, never naming a model the server has", async () => {
    h = await harness({ upstreamModel: "qwen2.5-1.5b-instruct" });
    h.fake.models = ["ft:customer-acme-private-2026", "phi-4"];
    const res = await request(h.app).get("/ready");
    expect(res.status).toBe(503);
    expect(res.body).toStrictEqual({
      error: 'inference backend returned HTTP 404: it does not serve model "qwen2.5-1.5b-instruct"',
      code: "backend_not_ready",
    });
  });

  it("with the model missing, a decision's 503 names no model the server has either", async () => {
    h = await harness({ upstreamModel: "qwen2.5-1.5b-instruct" });
    h.fake.models = ["ft:customer-acme-private-2026"];
    const res = await request(h.app)
      .post("/v1/systemone")
      .send({ model: "localdecider", state: "s", questions: { a: { type: "noul", instructions: "Is it?" } } });
    expect({ status: res.status, body: res.body }).toStrictEqual({
      status: 503,
      body: {
        error: 'inference backend returned HTTP 404: it does not serve model "qwen2.5-1.5b-instruct"',
        code: "model_unavailable",
      },
    });
    expect(h.fake.calls).toBe(0);
  });

  it("logs what the server lists once, bounded: the first 20 names, each cut to 100 characters, and the count", async () => {
    const { logger, lines } = capturingLogger("info");
    h = await harness({ upstreamModel: "qwen2.5-1.5b-instruct", logger });
    const long = `ft:customer-${"x".repeat(200)}`;
    h.fake.models = [long, ...Array.from({ length: 24 }, (_, i) => `private-${i}`)];
    for (let i = 0; i < 2; i++) await request(h.app).get("/ready").expect(503);
    const shown = [`${long.slice(0, 100)}…`, ...Array.from({ length: 19 }, (_, i) => `private-${i}`)];
    expect(lines.filter((l) => l.message === "model server not ready")).toStrictEqual([
      expect.objectContaining({
        level: "warn",
        reason: 'inference backend returned HTTP 404: it does not serve model "qwen2.5-1.5b-instruct"',
        detail: `GET ${h.upstream}/v1/models lists 25 models: ${shown.map((n) => JSON.stringify(n)).join(", ")} (and 5 more)`,
      }),
    ]);
  });

  it("answers 503 when the backend is unreachable, logging the change once at warn and no error per poll", async () => {
    const lines: { level: string; message: string }[] = [];
    const logger = createLogger({ service: "t", level: "info" });
    for (const t of logger.transports) t.silent = true;
    logger.on("data", (info: { level: string; message: string }) => lines.push(info));
    h = await harness({ logger });
    await h.fake.stop();
    for (let i = 0; i < 3; i++) {
      const res = await request(h.app).get("/ready");
      expect(res.status).toBe(503);
      expect(res.body.code).toBe("backend_not_ready");
      expect(res.body.error).toBe("inference backend unreachable");
    }
    expect(lines.filter((l) => l.level === "error")).toStrictEqual([]);
    expect(lines.filter((l) => l.message === "model server not ready").map((l) => l.level)).toStrictEqual(["warn"]);
  });

  it("answers 503 for another backend error status", async () => {
    h = await harness();
    h.fake.modelsStatus = 500;
    const res = await request(h.app).get("/ready");
    expect(res.status).toBe(503);
    expect(res.body).toStrictEqual({ error: "inference backend returned HTTP 500", code: "backend_not_ready" });
  });
});

describe("GET /v1/models", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("lists our model and the TypeSafe aliases it serves, naming the model server (by its label: no key is set) and its model", async () => {
    h = await harness();
    const res = await request(h.app).get("/v1/models");
    expect(res.status).toBe(200);
    const description = "Local System One decisions from token logprobs of test-model (localdecider 0.1.0).";
    expect(res.body).toStrictEqual({
      models: [
        { name: "localdecider", description, release_date: "2026-11-22" },
        {
          name: "jev-latest",
          description: `Alias of localdecider for clients of TypeSafe's hosted API. ${description}`,
          release_date: "2026-11-22",
        },
        {
          name: "jev",
          description: `Alias of localdecider for clients of TypeSafe's hosted API. ${description}`,
          release_date: "2026-11-22",
        },
      ],
      backend: { kind: "server", address: "server 1", model: "test-model", protocol: "chat" },
      calibration: { active: false, prompt_version: PROMPT_VERSION },
      // The same models as the `openai` SDK's client.models.list() reads them (created: the release date).
      object: "list",
      data: ["localdecider", "jev-latest", "jev"].map((id) => ({
        id,
        object: "model",
        created: Date.parse("2026-11-22T00:00:00Z") / 1000,
        owned_by: "localdecider",
      })),
    });
  });
});

describe("unknown routes", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("answer 404 in the error shape", async () => {
    h = await harness();
    const res = await request(h.app).get("/v1/nothing");
    expect(res.status).toBe(404);
    expect(res.body).toStrictEqual({ error: "Not found", code: "not_found" });
  });

  it("a method the path does not take answers 405 with Allow, in the error shape; OPTIONS answers 204 with Allow", async () => {
    h = await harness();
    const get = await request(h.app).get("/v1/systemone");
    expect([get.status, get.headers.allow, get.body]).toStrictEqual([
      405,
      "POST, OPTIONS",
      { error: "Method GET not allowed on this path", code: "method_not_allowed" },
    ]);
    const del = await request(h.app).delete("/v1/models");
    expect([del.status, del.headers.allow, del.body.code]).toStrictEqual([
      405,
      "GET, HEAD, OPTIONS",
      "method_not_allowed",
    ]);
    const options = await request(h.app).options("/v1/systemone");
    expect([options.status, options.headers.allow]).toStrictEqual([204, "POST, OPTIONS"]);
    expect(h.fake.requests).toHaveLength(0);
  });
});
