import { randomUUID } from "node:crypto";
import { request as httpRequest } from "node:http";
import Redis from "ioredis";
import request from "supertest";
import { FakeUpstream } from "./fake-upstream/server";
import {
  capturingLogger,
  type DeciderUnderTest,
  deciderFor,
  type Harness,
  harness,
  listen,
  TEST_REDIS,
  waitFor,
} from "./helpers";

const decision = (question: string) => ({
  model: "localdecider",
  state: "s",
  questions: { [question]: { type: "noul", instructions: "Is it so?" } },
});

/** A decision over a real connection that the test can cut (destroy) as a client that gives up. */
function openDecision(url: string, question: string): { destroy: () => void } {
  const body = JSON.stringify(decision(question));
  const req = httpRequest(`${url}/v1/systemone`, {
    method: "POST",
    headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
  });
  req.on("error", () => {});
  req.end(body);
  return { destroy: () => req.destroy() };
}

/** Calls queued across replicas under `prefix`, as the machine's Redis holds them. */
async function sharedQueued(redis: Redis, prefix: string): Promise<number> {
  return (await redis.hvals(`${prefix}queued`)).map(Number).reduce((a, b) => a + b, 0);
}

async function waitForShared(redis: Redis, prefix: string, queued: number): Promise<void> {
  let seen = -1;
  for (let i = 0; i < 400 && seen !== queued; i++) {
    seen = await sharedQueued(redis, prefix);
    if (seen !== queued) await new Promise((r) => setTimeout(r, 10));
  }
  expect(seen).toBe(queued);
}

/**
 * A client that goes away while its request still waits (for the model server's start-up check, in the
 * queue behind a held slot, for a slot another replica holds) ends the wait at once: the request is never
 * sent to the model server, and what it reserved is handed back then, not when the wait would have ended.
 */
describe.each([
  ["in this process", false],
  ["shared through Redis", true],
])("a request abandoned while it waits, limits %s", (_mode, sharedRedis) => {
  let h: Harness;
  let redis: Redis;
  let prefix: string;
  let closeServer: (() => Promise<void>) | undefined;
  beforeAll(() => {
    redis = new Redis(TEST_REDIS, { maxRetriesPerRequest: 1 });
  });
  afterAll(() => {
    redis.disconnect();
  });
  beforeEach(() => {
    prefix = `localdecider-test:${randomUUID()}:`;
  });
  afterEach(async () => {
    await closeServer?.();
    closeServer = undefined;
    await h.close();
  });

  async function start(options: { maxInflight?: number } = {}) {
    const { logger, lines } = capturingLogger("silly");
    h = await harness({ sharedRedis, redisPrefix: prefix, logger, flavour: "llama", ...options });
    const server = await listen(h);
    closeServer = server.close;
    const aborted = () => lines.filter((l) => l.message === "request failed" && l.code === "request_aborted").length;
    return { url: server.url, aborted };
  }

  it("while the model server's start-up check runs: never sent once the check ends, and nothing stays reserved", async () => {
    const { url, aborted } = await start();
    h.fake.holdingInspections = true;
    const gone = openDecision(url, "gone");
    // The request's own readiness check found no answer yet and started the start-up check, held here.
    await waitFor(() => h.fake.inspections.length > 0, "the start-up check to run");
    gone.destroy();
    await waitFor(() => aborted() === 1, "the decider to drop the abandoned request");
    h.fake.releaseInspections();
    // The check ends, and the decider is ready: a new decision is served, and it is the only call sent.
    const next = await request(h.app).post("/v1/systemone").send(decision("next"));
    expect(next.status).toBe(200);
    expect(h.fake.requests.map((r) => FakeUpstream.probed(r).question.name)).toStrictEqual(["next"]);
    expect(h.limiter.counts()).toStrictEqual({ queued: 0, running: 0 });
    if (sharedRedis) await waitForShared(redis, prefix, 0);
  });

  it("in the queue behind a held slot: leaves the queue at once, and is never sent when the slot frees", async () => {
    const { url, aborted } = await start({ maxInflight: 1 });
    expect((await request(h.app).get("/ready")).status).toBe(200);
    h.fake.holding = true;
    const holder = request(h.app)
      .post("/v1/systemone")
      .send(decision("holder"))
      .then((r) => r);
    await waitFor(() => h.fake.inflight === 1, "the holder's call in flight");
    const gone = openDecision(url, "gone");
    await waitFor(() => h.limiter.counts().queued === 1, "the abandoned request queued");
    if (sharedRedis) await waitForShared(redis, prefix, 2);
    gone.destroy();
    await waitFor(() => aborted() === 1, "the decider to drop the abandoned request");
    // Handed back while the holder still holds the slot: only its call counts.
    await waitFor(() => h.limiter.counts().queued === 0, "the abandoned request's call to leave the queue");
    expect(h.limiter.counts()).toStrictEqual({ queued: 0, running: 1 });
    if (sharedRedis) await waitForShared(redis, prefix, 1);
    h.fake.release();
    expect((await holder).status).toBe(200);
    // The slot is free again, for the next request (the abandoned one never took it).
    expect((await request(h.app).post("/v1/systemone").send(decision("next"))).status).toBe(200);
    expect(h.fake.requests.map((r) => FakeUpstream.probed(r).question.name)).toStrictEqual(["holder", "next"]);
    expect(h.limiter.counts()).toStrictEqual({ queued: 0, running: 0 });
    if (sharedRedis) await waitForShared(redis, prefix, 0);
  });

  if (sharedRedis) {
    it("waiting for a slot another replica holds: gives up its place across replicas at once", async () => {
      await start({ maxInflight: 1 });
      const other: DeciderUnderTest = deciderFor(h.upstream, { sharedRedis, redisPrefix: prefix, maxInflight: 1 });
      const running = await listen({ ...h, ...other });
      try {
        for (let i = 0; (await other.limiter.unavailable()) !== undefined; i++) {
          if (i === 200) throw new Error("the second replica never reached Redis");
          await new Promise((r) => setTimeout(r, 10));
        }
        expect((await request(h.app).get("/ready")).status).toBe(200);
        expect((await request(other.app).get("/ready")).status).toBe(200);
        h.fake.holding = true;
        const holder = request(h.app)
          .post("/v1/systemone")
          .send(decision("holder"))
          .then((r) => r);
        await waitFor(() => h.fake.inflight === 1, "the holder's call in flight on the first replica");
        const gone = openDecision(running.url, "gone");
        await waitForShared(redis, prefix, 2);
        gone.destroy();
        await waitFor(() => other.limiter.counts().queued === 0, "the abandoned request's call to leave the queue");
        await waitForShared(redis, prefix, 1);
        h.fake.release();
        expect((await holder).status).toBe(200);
        expect(h.fake.requests.map((r) => FakeUpstream.probed(r).question.name)).toStrictEqual(["holder"]);
        await waitForShared(redis, prefix, 0);
      } finally {
        await running.close();
        await other.close();
      }
    });
  }
});

describe("GET /v1/models abandoned while the start-up check runs", () => {
  it("stops waiting for the check when its client goes away", async () => {
    const { logger, lines } = capturingLogger("silly");
    const h = await harness({ logger, flavour: "llama" });
    const server = await listen(h);
    try {
      const aborted = () => lines.filter((l) => l.message === "request failed" && l.code === "request_aborted").length;
      h.fake.holdingInspections = true;
      const req = httpRequest(`${server.url}/v1/models`);
      req.on("error", () => {});
      req.end();
      await waitFor(() => h.fake.inspections.length > 0, "the start-up check to run");
      req.destroy();
      await waitFor(() => aborted() === 1, "the decider to drop the abandoned request");
      h.fake.releaseInspections();
      expect((await request(h.app).get("/v1/models")).status).toBe(200);
    } finally {
      await server.close();
      await h.close();
    }
  });
});
