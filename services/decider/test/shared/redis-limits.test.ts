import { createLogger } from "@localdecider/service-kit";
import { LimiterUnavailableError } from "../../src/limiter";
import { RedisLimits, type RedisLimitsOptions } from "../../src/redis-limits";
import { MACHINE_REDIS } from "../helpers";
import { freePort, sharedTotals, testPrefix } from "./processes";

/** RedisLimits of two "replicas" in one process, against the machine's Redis, each test under its own prefix. */

const SERVER = "http://model:8081";
const logger = createLogger({ service: "decider-test", level: "silent" });
let opened: RedisLimits[] = [];

async function replicas(count: number, options: Partial<RedisLimitsOptions>): Promise<RedisLimits[]> {
  const prefix = testPrefix();
  const made = Array.from(
    { length: count },
    () =>
      new RedisLimits({
        url: MACHINE_REDIS,
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
      if (i === 200) throw new Error("the machine's Redis does not answer");
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
const totals = (prefix: string) => sharedTotals(MACHINE_REDIS, prefix);

/** Asks `limits` for slots of SERVER: one, outside the queue, not alone, never cancelled, unless told. */
function slot(
  limits: RedisLimits,
  options: { weight?: number; fromQueue?: boolean; alone?: boolean; signal?: AbortSignal } = {},
): Promise<void> {
  const { weight = 1, fromQueue = false, alone = false } = options;
  return limits.acquire(weight, { server: SERVER, fromQueue, alone, signal: options.signal ?? signal() });
}

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
    expect(await b.reserve(5)).toStrictEqual({ ok: true, started: 0 });
    expect((await a.reserve(1)).ok).toBe(false);
  });

  it("a reservation may start its first calls in the same step, with only the slots free across replicas", async () => {
    const [a, b] = await replicas(2, { maxInflight: 2, maxQueue: 10 });
    if (a === undefined || b === undefined) throw new Error("two replicas");
    await slot(a);
    // One slot of two is taken by A: B's reservation of three calls starts one and queues two.
    expect(await b.reserve(3, { server: SERVER, slots: 2 })).toStrictEqual({ ok: true, started: 1 });
    expect(await totals(prefixOf(a))).toStrictEqual({ queued: 2, running: 2 });
    // Without a free slot nothing starts, and a reservation that overflows the queue starts nothing either.
    expect(await a.reserve(1, { server: SERVER, slots: 1 })).toStrictEqual({ ok: true, started: 0 });
    expect(await a.reserve(8, { server: SERVER, slots: 2 })).toStrictEqual({ ok: false, ahead: 5 });
    // What each holds survives a heartbeat: Redis is set to the same counts.
    await Promise.all([a, b].map((l) => (l as unknown as { beat(): Promise<void> }).beat()));
    expect(await totals(prefixOf(a))).toStrictEqual({ queued: 3, running: 2 });
    a.release(SERVER, 1);
    b.release(SERVER, 1);
    a.unreserve(1);
    b.unreserve(2);
    await Promise.all([a, b].map((l) => (l as unknown as { beat(): Promise<void> }).beat()));
    expect(await totals(prefixOf(a))).toStrictEqual({ queued: 0, running: 0 });
  });

  it("a heartbeat sent while an ask for a slot is unanswered leaves no slot held by nobody once the ask is refused", async () => {
    const [a, b] = await replicas(2, { maxInflight: 1, maxQueue: 10 });
    if (a === undefined || b === undefined) throw new Error("two replicas");
    await slot(a);
    const controller = new AbortController();
    const waiting = slot(b, { signal: controller.signal });
    // Sent right behind the ask, so Redis runs it after the refusal, with the ask counted as taken.
    await (b as unknown as { beat(): Promise<void> }).beat();
    let held = await totals(prefixOf(a));
    for (let i = 0; i < 100 && held.running !== 1; i++) {
      await new Promise((r) => setTimeout(r, 10));
      held = await totals(prefixOf(a));
    }
    expect(held).toStrictEqual({ queued: 0, running: 1 });
    // The waiting ask still gets the slot once A frees it.
    a.release(SERVER, 1);
    await waiting;
    expect(await totals(prefixOf(a))).toStrictEqual({ queued: 0, running: 1 });
    b.release(SERVER, 1);
    controller.abort();
  });

  it("a call moves from the queue to a running slot in one step, and Redis holds what each replica counts", async () => {
    const [a, b] = await replicas(2, { maxInflight: 1, maxQueue: 3 });
    if (a === undefined || b === undefined) throw new Error("two replicas");
    expect(await a.reserve(2)).toStrictEqual({ ok: true, started: 0 });
    expect(await b.reserve(1)).toStrictEqual({ ok: true, started: 0 });
    await slot(a, { fromQueue: true });
    // One of A's calls runs, so two wait: the queue (3) has room for one more, and the slot is taken.
    const waiting = slot(b, { fromQueue: true });
    expect(await settled(waiting)).toBe(false);
    expect(await a.reserve(2)).toStrictEqual({ ok: false, ahead: 3 });
    a.release(SERVER, 1);
    await waiting;
    // A's other call starts from the queue too, once B's is done. Redis then holds that one running call
    // and nothing queued, also after a heartbeat has set it to what each replica counts.
    b.release(SERVER, 1);
    await slot(a, { fromQueue: true });
    expect(await totals(prefixOf(a))).toStrictEqual({ queued: 0, running: 1 });
    await Promise.all([a, b].map((l) => (l as unknown as { beat(): Promise<void> }).beat()));
    expect(await totals(prefixOf(a))).toStrictEqual({ queued: 0, running: 1 });
    a.release(SERVER, 1);
    await Promise.all([a, b].map((l) => (l as unknown as { beat(): Promise<void> }).beat()));
    expect(await totals(prefixOf(a))).toStrictEqual({ queued: 0, running: 0 });
  });

  it("a slot freed on one replica goes to the call waiting on another", async () => {
    const [a, b] = await replicas(2, { maxInflight: 1 });
    if (a === undefined || b === undefined) throw new Error("two replicas");
    await slot(a);
    const waiting = slot(b);
    expect(await settled(waiting)).toBe(false);
    a.release(SERVER, 1);
    await waiting;
    const third = slot(a);
    expect(await settled(third)).toBe(false);
    b.release(SERVER, 1);
    await third;
  });

  it("a lone call waiting on one replica holds off new calls on the others until it has run", async () => {
    const [a, b] = await replicas(2, { maxInflight: 2 });
    if (a === undefined || b === undefined) throw new Error("two replicas");
    await slot(a);
    const lone = slot(b, { weight: 2, alone: true });
    expect(await settled(lone)).toBe(false);
    // One slot is free, but the lone call claimed the server: A's next call waits behind it.
    const next = slot(a);
    expect(await settled(next)).toBe(false);
    a.release(SERVER, 1);
    await lone;
    expect(await settled(next)).toBe(false);
    b.release(SERVER, 2);
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
    a.release(SERVER, 1);
    // Nothing holds the server any more: A's next call runs.
    await slot(a);
  });

  it("with Redis unreachable, admits nothing and says why", async () => {
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
    expect(await limits.unavailable()).toMatch(`the shared limits' Redis at redis://127.0.0.1:${port} is unreachable`);
    await expect(limits.reserve(1)).rejects.toThrow(LimiterUnavailableError);
    await expect(slot(limits)).rejects.toThrow(`the shared limits' Redis at redis://127.0.0.1:${port} is unreachable`);
  });
});
