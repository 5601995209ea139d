import { createLogger } from "@localdecider/service-kit";
import Redis from "ioredis";
import { RedisLimits, type RedisLimitsOptions } from "../../src/limits/redis-limits";
import { AbortedError, LimiterUnavailableError } from "../../src/limits/types";
import { TEST_REDIS } from "../helpers";
import { freePort, OwnRedis, sharedPins, sharedTotals, testPrefix } from "./processes";

/** RedisLimits of two "replicas" in one process, against the test run's Redis (TEST_REDIS), each test under its own prefix. */

const SERVER = "http://model:8081";
const logger = createLogger({ service: "decider-test", level: "silent" });
let opened: RedisLimits[] = [];

async function replicas(count: number, options: Partial<RedisLimitsOptions>): Promise<RedisLimits[]> {
  const prefix = testPrefix();
  const made = Array.from(
    { length: count },
    () =>
      new RedisLimits({
        url: TEST_REDIS,
        prefix,
        maxInflight: 2,
        maxQueue: 10,
        leaseMs: 5000,
        logger,
        ...options,
      }),
  );
  opened.push(...made);
  for (const limits of made) {
    for (let i = 0; (await limits.unavailable()) !== undefined; i++) {
      if (i === 200) throw new Error(`the test run's Redis (${TEST_REDIS}) does not answer`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  return made;
}

/** Whether a promise has settled within a few of the waiters' polls. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  // A wait that should not end is given two and a half polls (POLL_MS, 100 ms) and their round trips.
  await new Promise((r) => setTimeout(r, 250));
  return done;
}

const signal = () => new AbortController().signal;

const prefixOf = (limits: RedisLimits) => (limits as unknown as { options: RedisLimitsOptions }).options.prefix;

/** What Redis holds for all replicas under a prefix: queued calls and running slots (all on SERVER here). */
const totals = (prefix: string) => sharedTotals(TEST_REDIS, prefix);

/** Asks `limits` for a slot of SERVER (or every slot, alone), never cancelled unless told; its number. */
function slot(limits: RedisLimits, options: { alone?: boolean; signal?: AbortSignal } = {}): Promise<number> {
  return limits.acquire({ server: SERVER, alone: options.alone ?? false, signal: options.signal ?? signal() });
}

const beat = (limits: RedisLimits) => (limits as unknown as { beat(): Promise<void> }).beat();

/** The slot numbers Redis holds as pinned on SERVER. */
const pins = async (prefix: string) =>
  (await sharedPins(TEST_REDIS, prefix)).map((field) => Number(field.slice(SERVER.length + 1)));

afterEach(async () => {
  await Promise.all(opened.map((l) => l.close()));
  opened = [];
});

describe("RedisLimits", () => {
  it("two replicas reserving at once never admit more than MAX_QUEUE between them", async () => {
    const [a, b] = await replicas(2, { maxQueue: 10 });
    if (a === undefined || b === undefined) throw new Error("two replicas");
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b).reserve(1)));
    expect(answers.filter((x) => x.ok)).toHaveLength(10);
    // A refused one is told how much is ahead: the ten queued.
    expect(answers.find((x) => !x.ok)).toStrictEqual({ ok: false, ahead: 10 });
    // Handing calls back makes room again, for either replica.
    a.unreserve(5);
    expect(await b.reserve(5)).toStrictEqual({ ok: true, slot: undefined });
    expect((await a.reserve(1)).ok).toBe(false);
  });

  it("a reservation may take its slot in the same step, numbered apart from every slot held across replicas", async () => {
    const [a, b] = await replicas(2, { maxInflight: 2, maxQueue: 10 });
    if (a === undefined || b === undefined) throw new Error("two replicas");
    expect(await slot(a)).toBe(0);
    // One slot of two is taken by A: B's reservation of three calls takes the other, numbered 1.
    expect(await b.reserve(3, { server: SERVER })).toStrictEqual({ ok: true, slot: 1 });
    expect(await totals(prefixOf(a))).toStrictEqual({ queued: 3, running: 2 });
    expect(await pins(prefixOf(a))).toStrictEqual([0, 1]);
    // Without a free slot none is taken, and a reservation that overflows the queue takes none either.
    expect(await a.reserve(1, { server: SERVER })).toStrictEqual({ ok: true, slot: undefined });
    expect(await a.reserve(7, { server: SERVER })).toStrictEqual({ ok: false, ahead: 6 });
    // What each holds survives a heartbeat: Redis is set to the same counts and pins.
    await Promise.all([a, b].map(beat));
    expect(await totals(prefixOf(a))).toStrictEqual({ queued: 4, running: 2 });
    expect(await pins(prefixOf(a))).toStrictEqual([0, 1]);
    // A request's last slot hands its queued calls back in the same step.
    a.release(SERVER, 0, 1);
    b.release(SERVER, 1, 3);
    await Promise.all([a, b].map(beat));
    expect(await totals(prefixOf(a))).toStrictEqual({ queued: 0, running: 0 });
    expect(await pins(prefixOf(a))).toStrictEqual([]);
  });

  it("a heartbeat sent while an ask for a slot is unanswered leaves no slot held by nobody once the ask is refused", async () => {
    const [a, b] = await replicas(2, { maxInflight: 1, maxQueue: 10 });
    if (a === undefined || b === undefined) throw new Error("two replicas");
    await slot(a);
    const controller = new AbortController();
    const waiting = slot(b, { signal: controller.signal });
    // Sent right behind the ask, so Redis runs it after the refusal, with the ask counted as taken.
    await beat(b);
    let held = await totals(prefixOf(a));
    for (let i = 0; i < 100 && held.running !== 1; i++) {
      await new Promise((r) => setTimeout(r, 10));
      held = await totals(prefixOf(a));
    }
    expect(held).toStrictEqual({ queued: 0, running: 1 });
    // The waiting ask still gets the slot once A frees it, with the number A had.
    a.release(SERVER, 0, 0);
    expect(await waiting).toBe(0);
    expect(await totals(prefixOf(a))).toStrictEqual({ queued: 0, running: 1 });
    b.release(SERVER, 0, 0);
    controller.abort();
  });

  it("a pin of this replica that Redis still holds but the replica does not (its release was lost) goes at the next heartbeat; one being taken stays", async () => {
    const [a] = await replicas(1, { maxInflight: 2, maxQueue: 10 });
    if (a === undefined) throw new Error("one replica");
    expect(await slot(a)).toBe(0);
    // The release never reaches Redis (as when it was down): Redis still holds the pin and the slot.
    (a as unknown as { pins: Map<string, Set<number>> }).pins.get(SERVER)?.delete(0);
    (a as unknown as { running: Map<string, number> }).running.set(SERVER, 0);
    expect(await pins(prefixOf(a))).toStrictEqual([0]);
    // A slot asked for right now is pinned by a command the heartbeat sees as unanswered: it stays.
    const taking = slot(a);
    await beat(a);
    expect(await taking).toBe(1);
    expect(await pins(prefixOf(a))).toStrictEqual([1]);
    expect(await totals(prefixOf(a))).toStrictEqual({ queued: 0, running: 1 });
    a.release(SERVER, 1, 0);
  });

  it("a slot freed on one replica goes to the call waiting on another", async () => {
    const [a, b] = await replicas(2, { maxInflight: 1 });
    if (a === undefined || b === undefined) throw new Error("two replicas");
    await slot(a);
    const waiting = slot(b);
    expect(await settled(waiting)).toBe(false);
    a.release(SERVER, 0, 0);
    expect(await waiting).toBe(0);
    const third = slot(a);
    expect(await settled(third)).toBe(false);
    b.release(SERVER, 0, 0);
    await third;
  });

  it("a lone hold waiting on one replica holds off new holds on the others until it has run", async () => {
    const [a, b] = await replicas(2, { maxInflight: 2 });
    if (a === undefined || b === undefined) throw new Error("two replicas");
    await slot(a);
    const lone = slot(b, { alone: true });
    expect(await settled(lone)).toBe(false);
    // One slot is free, but the lone hold claimed the server: A's next hold waits behind it.
    const next = slot(a);
    expect(await settled(next)).toBe(false);
    a.release(SERVER, 0, 0);
    expect(await lone).toBe(0);
    expect(await settled(next)).toBe(false);
    b.release(SERVER, "alone", 0);
    await next;
  });

  it("a cancelled wait gives up its claim at once", async () => {
    const [a, b] = await replicas(2, { maxInflight: 1 });
    if (a === undefined || b === undefined) throw new Error("two replicas");
    await slot(a);
    const controller = new AbortController();
    const lone = slot(b, { alone: true, signal: controller.signal });
    expect(await settled(lone)).toBe(false);
    controller.abort();
    await expect(lone).rejects.toThrow("The request was cancelled");
    a.release(SERVER, 0, 0);
    // Nothing holds the server any more: A's next hold runs.
    await slot(a);
  });

  it("a replica closed while its lone hold waits leaves no entry and no claim: the other replica's holds run, and its entries stay", async () => {
    const [a, b] = await replicas(2, { maxInflight: 1, leaseMs: 60_000 });
    if (a === undefined || b === undefined) throw new Error("two replicas");
    const prefix = prefixOf(a);
    expect(await a.reserve(2)).toStrictEqual({ ok: true, slot: undefined });
    await slot(a);
    const lone = slot(b, { alone: true });
    expect(await settled(lone)).toBe(false);
    const redis = new Redis(TEST_REDIS, { maxRetriesPerRequest: 1 });
    try {
      expect(await redis.exists(`${prefix}alone:${SERVER}`)).toBe(1);
      await b.close();
      await expect(lone).rejects.toThrow(LimiterUnavailableError);
      // Nothing of B: no claim (with a lease of a minute it would hold A off that long), no lease, no count.
      expect(await redis.exists(`${prefix}alone:${SERVER}`)).toBe(0);
      expect(await redis.zcard(`${prefix}leases`)).toBe(1);
      expect(await redis.hlen(`${prefix}queued`)).toBe(1);
      expect(await totals(prefix)).toStrictEqual({ queued: 2, running: 1 });
      a.release(SERVER, 0, 0);
      expect(await slot(a)).toBe(0);
      a.release(SERVER, 0, 2);
      await a.close();
      expect((await redis.keys(`${prefix}*`)).sort()).toStrictEqual([]);
    } finally {
      redis.disconnect();
    }
  });

  it("a hand-back after close (a request still running when the decider shut down) neither throws nor rejects unhandled", async () => {
    const [a] = await replicas(1, { maxInflight: 2 });
    if (a === undefined) throw new Error("one replica");
    const slot0 = await slot(a);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      await a.close();
      // The request in flight finishes after the close and hands its slot and its calls back.
      a.release(SERVER, slot0, 3);
      a.unreserve(1);
      await new Promise((r) => setTimeout(r, 50));
      expect(unhandled).toStrictEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("an admitted request waiting for a slot keeps waiting through a Redis slower than the command timeout, and gets its slot", async () => {
    const own = new OwnRedis(await freePort());
    await own.start();
    const limits = new RedisLimits({
      url: own.url,
      prefix: testPrefix(),
      maxInflight: 1,
      maxQueue: 10,
      leaseMs: 15_000,
      logger,
    });
    opened.push(limits);
    const pauser = new Redis(own.url);
    try {
      for (let i = 0; (await limits.unavailable()) !== undefined; i++) {
        if (i === 200) throw new Error("the test's Redis does not answer");
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(await limits.reserve(2, { server: SERVER })).toStrictEqual({ ok: true, slot: 0 });
      const waiting = slot(limits);
      expect(await settled(waiting)).toBe(false);
      // Redis answers nobody for 2.5 s: longer than a command may take (2 s); the holder hands its slot back meanwhile.
      await pauser.call("CLIENT", "PAUSE", "2500");
      limits.release(SERVER, 0, 1);
      expect(await waiting).toBe(0);
      limits.release(SERVER, 0, 1);
    } finally {
      pauser.disconnect();
      await own.stop();
    }
  }, 20_000);

  it("with Redis unreachable, admits nothing and says why; an admitted request's ask for a slot waits until its deadline", async () => {
    const port = await freePort();
    const limits = new RedisLimits({
      url: `redis://127.0.0.1:${port}`,
      prefix: testPrefix(),
      maxInflight: 2,
      maxQueue: 10,
      leaseMs: 5000,
      logger,
    });
    opened.push(limits);
    expect(await limits.unavailable()).toStrictEqual({
      message: "the shared limits' Redis is unreachable",
      detail: expect.stringMatching(`^the shared limits' Redis at redis://127.0.0.1:${port} is unreachable`),
    });
    await expect(limits.reserve(1)).rejects.toThrow(LimiterUnavailableError);
    // An admitted request asking for its slot waits for Redis until its own deadline ends the wait.
    const deadline = new AbortController();
    const waiting = slot(limits, { signal: deadline.signal });
    expect(await settled(waiting)).toBe(false);
    deadline.abort();
    await expect(waiting).rejects.toThrow(AbortedError);
  });
});
