import { loadConfig } from "@localdecider/service-kit";
import { metricSample } from "@localdecider/service-kit/test-utils";
import request from "supertest";
import { createBackend } from "../src/backend";
import { configSchema } from "../src/config";
import { freePort } from "./engine/backends";
import { FakeUpstream } from "./fake-upstream/server";
import { capturingLogger, type DeciderUnderTest, deciderFor, deciderOver } from "./helpers";

/**
 * What the open endpoints say of internal addresses (the model servers', the shared limits' Redis): nothing to
 * a caller without the API key. /ready and /metrics are open to anyone, and /v1/models is while no key is
 * set: they name each model server by its label (`server 1`, its place in LOCALDECIDER_UPSTREAM) and the
 * Redis not at all. A caller with LOCALDECIDER_API_KEY's bearer sees the addresses; the log always has them.
 */

const KEY = "the-api-key";
const decision = { model: "localdecider", state: "s", questions: { a: { type: "noul", instructions: "Is it so?" } } };

describe("internal addresses on the open endpoints", () => {
  let fakes: FakeUpstream[] = [];
  let urls: string[];
  let d: DeciderUnderTest | undefined;
  let closeBackend: (() => Promise<void>) | undefined;
  beforeEach(async () => {
    fakes = [new FakeUpstream(), new FakeUpstream()];
    urls = await Promise.all(fakes.map((f) => f.start()));
  });
  afterEach(async () => {
    await d?.close();
    d = undefined;
    await closeBackend?.();
    closeBackend = undefined;
    await Promise.all(fakes.map((f) => f.stop()));
  });

  /** Every form a host:port of `urls` takes in a text (the ports alone would match other numbers). */
  const addressesIn = (text: string) => urls.filter((u) => text.includes(new URL(u).host));

  it("one model server, no API key: /ready, /v1/models and /metrics name it `server 1`, never its address", async () => {
    d = deciderFor(urls[0] as string);
    const ready = await request(d.app).get("/ready");
    expect(ready.body).toStrictEqual({
      status: "ready",
      upstream: "server 1",
      model: "test-model",
      protocol: "chat",
      limits: "this process",
    });
    expect((await request(d.app).post("/v1/systemone").send(decision)).status).toBe(200);
    const models = await request(d.app).get("/v1/models");
    expect(models.body.backend).toStrictEqual({
      kind: "server",
      address: "server 1",
      model: "test-model",
      protocol: "chat",
    });
    const metrics = await request(d.app).get("/metrics");
    expect(metricSample(metrics.text, "decider_upstream_in_rotation", { server: "server 1" })).toBe(1);
    // A bearer is no key when none is set: it shows nothing more.
    const bearer = await request(d.app).get("/ready").set("authorization", `Bearer ${KEY}`);
    for (const res of [ready, models, metrics, bearer]) expect(addressesIn(res.text)).toStrictEqual([]);
  });

  it("several model servers, a key set: /ready without the key (or with a wrong one) lists labels, 200 and 503 alike; with the key, addresses", async () => {
    const { logger, lines } = capturingLogger("info");
    const config = loadConfig(configSchema, {
      LOCALDECIDER_UPSTREAM: urls.join(","),
      LOCALDECIDER_UPSTREAM_MODEL: "test-model",
    });
    const backend = createBackend(config, logger, config.LOCALDECIDER_MAX_INFLIGHT);
    closeBackend = backend.close;
    d = deciderOver(backend, { apiKey: KEY, logger });
    const asAnyone = await request(d.app).get("/ready");
    expect(asAnyone.body).toStrictEqual({
      status: "ready",
      upstream: "server 1,server 2",
      model: "test-model",
      servers: [
        { server: "server 1", state: "ready", protocol: "chat" },
        { server: "server 2", state: "ready", protocol: "chat" },
      ],
      limits: "this process",
    });
    const wrongKey = await request(d.app).get("/ready").set("authorization", "Bearer not-the-key");
    expect(wrongKey.body).toStrictEqual(asAnyone.body);
    const asHolder = await request(d.app).get("/ready").set("authorization", `Bearer ${KEY}`);
    expect(asHolder.body).toStrictEqual({
      status: "ready",
      upstream: urls.join(","),
      model: "test-model",
      servers: urls.map((server) => ({ server, state: "ready", protocol: "chat" })),
      limits: "this process",
    });
    const models = await request(d.app).get("/v1/models").set("authorization", `Bearer ${KEY}`);
    expect(models.body.backend.address).toBe(urls.join(","));
    expect(models.body.backend.servers).toStrictEqual(urls.map((server) => ({ server, protocol: "chat" })));
    const modelsAsAnyone = await request(d.app).get("/v1/models");
    expect(modelsAsAnyone.status).toBe(401);

    await Promise.all(fakes.map((f) => f.crash()));
    const down = await request(d.app).get("/ready");
    expect(down.body).toStrictEqual({
      error: "no model server is ready (inference backend unreachable)",
      code: "backend_not_ready",
      details: [
        { path: "server 1", message: "inference backend unreachable" },
        { path: "server 2", message: "inference backend unreachable" },
      ],
    });
    const downAsHolder = await request(d.app).get("/ready").set("authorization", `Bearer ${KEY}`);
    expect(downAsHolder.body.details.map((detail: { path: string }) => detail.path)).toStrictEqual(urls);
    const metrics = await request(d.app).get("/metrics");
    for (const res of [asAnyone, wrongKey, down, metrics]) expect(addressesIn(res.text)).toStrictEqual([]);
    // The log names them, for the operator.
    expect(addressesIn(lines.map((l) => JSON.stringify(l)).join("\n"))).toStrictEqual(urls);
  });

  it("the shared limits' Redis down: /ready's and a decision's 503 name no address to anyone without the key; the key holder and the log get it", async () => {
    const port = await freePort();
    const { logger, lines } = capturingLogger("info");
    d = deciderFor(urls[0] as string, {
      sharedRedis: true,
      redisUrl: `redis://:redis-password@127.0.0.1:${port}`,
      apiKey: KEY,
      logger,
    });
    const ready = await request(d.app).get("/ready");
    expect(ready.body).toStrictEqual({ error: "the shared limits' Redis is unreachable", code: "limiter_unavailable" });
    const asHolder = await request(d.app).get("/ready").set("authorization", `Bearer ${KEY}`);
    expect(asHolder.status).toBe(503);
    expect(asHolder.body.error).toMatch(
      new RegExp(`^the shared limits' Redis at redis://127\\.0\\.0\\.1:${port} is unreachable`),
    );
    const refused = await request(d.app).post("/v1/systemone").set("authorization", `Bearer ${KEY}`).send(decision);
    expect(refused.body).toStrictEqual({
      error: "the shared limits' Redis is unreachable; no new work is admitted until it answers again",
      code: "limiter_unavailable",
    });
    for (const text of [ready.text, refused.text]) {
      expect(text).not.toContain(String(port));
      expect(text).not.toContain("127.0.0.1");
    }
    const logged = lines.map((l) => JSON.stringify(l)).join("\n");
    expect(logged).toContain(`redis://127.0.0.1:${port}`);
    expect(`${logged}${asHolder.text}`).not.toContain("redis-password");
  });
});
