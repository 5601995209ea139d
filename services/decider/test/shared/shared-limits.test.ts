import path from "node:path";
import Redis from "ioredis";
import { FakeUpstream } from "../fake-upstream/server";
import { waitFor } from "../helpers";
import {
  burst,
  DeciderProcess,
  decide,
  env,
  freePort,
  LEASE_MS,
  OwnRedis,
  type Reply,
  readyOf,
  sharedTotals,
  startReplicas,
  TEST_REDIS,
  testPrefix,
  track,
} from "./processes";

/**
 * Several built deciders (separate processes) sharing LOCALDECIDER_MAX_INFLIGHT and LOCALDECIDER_MAX_QUEUE
 * through a real Redis, in front of one fake model server that records its peak concurrency.
 */

jest.setTimeout(60_000);

describe("deciders sharing limits through Redis", () => {
  let fake: FakeUpstream;
  let upstream: string;
  let deciders: DeciderProcess[] = [];
  let redis: Redis;
  beforeAll(async () => {
    redis = new Redis(TEST_REDIS, { maxRetriesPerRequest: 1 });
  });
  beforeEach(async () => {
    fake = new FakeUpstream();
    upstream = await fake.start();
  });
  afterEach(async () => {
    fake.release();
    await Promise.all(deciders.map((d) => d.stop()));
    deciders = [];
    await fake.stop();
  });
  afterAll(async () => {
    redis.disconnect();
  });

  it("without LOCALDECIDER_REDIS_URL, no Redis client is loaded and the limits are the process's own", async () => {
    const report = path.join(__dirname, "report-modules.cjs");
    const plain = env(upstream, TEST_REDIS, testPrefix(), { inflight: 1, queue: 1 });
    const { LOCALDECIDER_REDIS_URL: _url, ...withoutRedis } = plain;
    const alone = await new DeciderProcess(withoutRedis, ["--require", report]).start();
    const shared = await new DeciderProcess(plain, ["--require", report]).start();
    deciders = [alone, shared];
    expect(alone.lines.find((l) => l.message === "decider listening")?.limits).toBe("this process");
    expect((await decide(alone.url)).status).toBe(200);
    await alone.stop();
    await shared.stop();
    expect(alone.lines.find((l) => l.message === "modules at exit")?.redis).toBe(0);
    // The same report from a replica that does share its limits: the check sees a loaded client.
    expect(shared.lines.find((l) => l.message === "modules at exit")?.redis).toBeGreaterThan(0);
  });

  it("three replicas under a burst: the model server's peak stays at MAX_INFLIGHT, admissions at MAX_QUEUE, the rest 429, every admitted one answers", async () => {
    const prefix = testPrefix();
    const limits = { inflight: 2, queue: 6 };
    deciders = await startReplicas(3, upstream, prefix, limits);
    fake.holding = true;
    const total = 30;
    const replies = burst(deciders, total, "burst");
    const answered = track(replies);
    // The refused answer at once; the admitted wait on the held model server.
    await waitFor(() => fake.inflight === limits.inflight, "the model server's slots taken");
    const refusedSoFar = () => answered.filter((r) => r.status === 429).length;
    await waitFor(() => total - refusedSoFar() <= limits.queue, "the refusals");
    const refused = answered.filter((r) => r.status === 429);
    for (const r of refused) {
      expect(r.body.code).toBe("queue_full");
      expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1);
    }
    const admitted = total - refused.length;
    // Every admitted request's call counts toward MAX_QUEUE until it has finished, across replicas: none
    // finishes while the server is held, so exactly MAX_QUEUE are admitted, MAX_INFLIGHT of them running.
    expect(admitted).toBe(limits.queue);
    expect(answered.filter((r) => r.status !== 429)).toStrictEqual([]);
    fake.release();
    const all = await Promise.all(replies);
    expect(all.filter((r) => r.status === 200)).toHaveLength(admitted);
    expect(all.filter((r) => r.status !== 200 && r.status !== 429)).toStrictEqual([]);
    expect(fake.calls).toBe(admitted);
    expect(fake.maxInflight).toBeLessThanOrEqual(limits.inflight);
    // Everything handed back: nothing is queued in Redis any more.
    await waitForSharedQueue(prefix, 0);
  });

  it("a replica killed mid-burst loses its reservations when its lease ends; the other keeps serving", async () => {
    const prefix = testPrefix();
    const limits = { inflight: 2, queue: 4 };
    deciders = await startReplicas(2, upstream, prefix, limits);
    const [a, b] = deciders;
    if (a === undefined || b === undefined) throw new Error("two deciders");
    fake.holding = true;
    // Two running and four queued, all on A: the shared queue is full.
    void Promise.allSettled(burst([a], 2, "a-running"));
    await waitFor(() => fake.inflight === 2, "A's calls running");
    void Promise.allSettled(burst([a], 4, "a-queued"));
    await waitForSharedQueue(prefix, 4);
    const full = await decide(b.url, "b-refused");
    expect(full.status).toBe(429);
    const killed = performance.now();
    await a.kill();
    // B is refused until A's lease ends, then admitted: its calls run and answer.
    let admitted: Promise<Reply> | undefined;
    while (admitted === undefined) {
      const started = decide(b.url, "b-after");
      const early = await Promise.race([started, new Promise<undefined>((r) => setTimeout(() => r(undefined), 300))]);
      if (early === undefined || early.status !== 429) admitted = started;
      else {
        expect(performance.now() - killed).toBeLessThan(LEASE_MS * 3);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    await waitFor(() => fake.inflight === 1, "B's call running");
    fake.release();
    const reply = await admitted;
    expect(reply.status).toBe(200);
    expect((await decide(b.url, "b-next")).status).toBe(200);
    expect(fake.maxInflight).toBeLessThanOrEqual(limits.inflight);
    // The documented bound: a dead replica's reservations go within one lease (plus a heartbeat and a poll).
    const leases = await redis.zrange(`${prefix}leases`, "0", "-1");
    expect(leases).toHaveLength(1);
  });

  it("Redis stopped: /ready and new work answer 503; Redis back (empty): ready again, and what was running before still counts", async () => {
    const own = new OwnRedis(await freePort());
    await own.start();
    try {
      const prefix = testPrefix();
      const limits = { inflight: 1, queue: 2 };
      const d = await new DeciderProcess(env(upstream, own.url, prefix, limits)).start();
      deciders = [d];
      await waitFor(() => d.lines.some((l) => l.message === "shared limits: Redis answers"), "the first heartbeat");
      expect((await readyOf(d.url)).status).toBe(200);
      fake.holding = true;
      const before = decide(d.url, "before");
      await waitFor(() => fake.inflight === 1, "a call running");

      await own.stop();
      await waitForStatus(d.url, 503);
      const ready = await readyOf(d.url);
      expect(ready.body.code).toBe("limiter_unavailable");
      // No address to a caller without the API key; the log names it.
      expect(ready.body.error).toBe("the shared limits' Redis is unreachable");
      expect(d.lines.some((l) => l.message === "request failed" && String(l.cause).includes(own.url))).toBe(true);
      const refused = await decide(d.url, "while-down");
      expect(refused.status).toBe(503);
      expect(refused.body.code).toBe("limiter_unavailable");
      expect(refused.retryAfter).toBe("1");

      await own.start();
      await waitForStatus(d.url, 200);
      // Redis came back empty; the heartbeat restored the running request's call, so one more fits the
      // queue and the next is refused: no over-admission after the outage.
      const queued = decide(d.url, "queued");
      await waitForSharedQueue(prefix, 2, own.url);
      const over = await decide(d.url, "over");
      expect(over.status).toBe(429);
      fake.release();
      expect((await before).status).toBe(200);
      expect((await queued).status).toBe(200);
      expect(fake.maxInflight).toBe(1);
    } finally {
      await own.stop();
    }
  });
});

/** Three replicas in front of two fake model servers, both listed in LOCALDECIDER_UPSTREAM. */
describe("deciders sharing limits through Redis, in front of two model servers", () => {
  let fakes: FakeUpstream[] = [];
  let deciders: DeciderProcess[] = [];

  afterEach(async () => {
    for (const fake of fakes) fake.release();
    await Promise.all(deciders.map((d) => d.stop()));
    await Promise.all(fakes.map((f) => f.stop().catch(() => undefined)));
    deciders = [];
    fakes = [];
  });

  it("each server's peak stays at MAX_INFLIGHT and admissions at MAX_QUEUE; a server that dies mid-burst hands its requests to the other, and serves again once back", async () => {
    fakes = [new FakeUpstream(), new FakeUpstream()];
    const [a, b] = fakes as [FakeUpstream, FakeUpstream];
    const urls = await Promise.all(fakes.map((f) => f.start()));
    const limits = { inflight: 2, queue: 6 };
    const prefix = testPrefix();
    deciders = await startReplicas(3, urls.join(","), prefix, limits);
    a.holding = true;
    b.holding = true;
    const total = 30;
    const replies = burst(deciders, total, "burst");
    const answered = track(replies);
    await waitFor(() => a.inflight === limits.inflight && b.inflight === limits.inflight, "both servers' slots taken");
    await waitFor(() => total - answered.length <= limits.queue, "the refusals");
    expect(answered.map((r) => r.body.code)).toStrictEqual(answered.map(() => "queue_full"));
    const admitted = total - answered.length;
    // One queue for every server: MAX_QUEUE requests admitted, 2 x MAX_INFLIGHT of them running.
    expect(admitted).toBe(limits.queue);

    // A dies with its calls running: they fail over to B, which now serves every admitted request.
    await a.crash();
    a.holding = false;
    b.release();
    const all = await Promise.all(replies);
    expect(all.filter((r) => r.status === 200)).toHaveLength(admitted);
    expect(all.filter((r) => r.status !== 200 && r.status !== 429)).toStrictEqual([]);
    expect(a.maxInflight).toBeLessThanOrEqual(limits.inflight);
    expect(b.maxInflight).toBeLessThanOrEqual(limits.inflight);
    // Everything handed back across the move: Redis counts nothing queued and nothing running.
    let held = await sharedTotals(TEST_REDIS, prefix);
    for (let i = 0; i < 100 && (held.queued !== 0 || held.running !== 0); i++) {
      await new Promise((r) => setTimeout(r, 20));
      held = await sharedTotals(TEST_REDIS, prefix);
    }
    expect(held).toStrictEqual({ queued: 0, running: 0 });
    for (const d of deciders) {
      const ready = await readyOf(d.url);
      expect(ready.status).toBe(200);
      expect(ready.body.servers).toStrictEqual([
        { server: "server 1", state: "out", reason: "inference backend unreachable", protocol: "chat" },
        { server: "server 2", state: "ready", protocol: "chat" },
      ]);
    }

    // A back on its port: each replica's background probe finds it, and with both idle A (listed first) is
    // the least loaded again.
    await a.start(Number(new URL(urls[0] as string).port));
    for (const d of deciders) {
      await waitFor(() => d.lines.some((l) => l.message === "model server back in rotation"), "A back in rotation");
    }
    const callsBefore = a.calls;
    for (const [i, d] of deciders.entries()) expect((await decide(d.url, `after${i}`)).status).toBe(200);
    expect(a.calls).toBe(callsBefore + deciders.length);
  });
});

async function waitForSharedQueue(prefix: string, count: number, url = TEST_REDIS): Promise<void> {
  let queued = -1;
  for (let i = 0; i < 400 && queued !== count; i++) {
    queued = (await sharedTotals(url, prefix)).queued;
    if (queued !== count) await new Promise((r) => setTimeout(r, 10));
  }
  expect(queued).toBe(count);
}

async function waitForStatus(url: string, status: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if ((await readyOf(url)).status === status) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`/ready never answered ${status}`);
}
