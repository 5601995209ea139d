import Redis from "ioredis";
import { FakeUpstream } from "../fake-upstream/server";
import { waitFor } from "../helpers";
import { allReady, DeciderProcess, decide, env, TEST_REDIS, testPrefix } from "./processes";

/**
 * A replica stopped cleanly (SIGTERM) leaves nothing of its own in Redis, and takes nothing of the others':
 * built deciders (dist/main.js) sharing the machine's Redis under a prefix of the test's own. The lease is a
 * minute, so that nothing here can go by expiry: whatever is gone was removed by the stop.
 */

jest.setTimeout(60_000);

const LONG_LEASE = "60000";

describe("a replica stopped with SIGTERM", () => {
  let fake: FakeUpstream;
  let upstream: string;
  let redis: Redis;
  let deciders: DeciderProcess[] = [];
  beforeAll(() => {
    redis = new Redis(TEST_REDIS, { maxRetriesPerRequest: 1 });
  });
  afterAll(() => {
    redis.disconnect();
  });
  beforeEach(async () => {
    fake = new FakeUpstream({ flavour: "llama" });
    upstream = await fake.start();
  });
  afterEach(async () => {
    fake.release();
    await Promise.all(deciders.map((d) => d.stop()));
    deciders = [];
    await fake.stop();
  });

  /** Every key under `prefix`, with what each holds (fields of hashes, members of the sorted set). */
  async function keysUnder(prefix: string): Promise<Record<string, string[]>> {
    const keys = (await redis.keys(`${prefix}*`)).sort();
    const held: Record<string, string[]> = {};
    for (const key of keys) {
      const type = await redis.type(key);
      held[key.slice(prefix.length)] =
        type === "hash"
          ? (await redis.hkeys(key)).sort()
          : type === "zset"
            ? (await redis.zrange(key, "0", "-1")).sort()
            : [type];
    }
    return held;
  }

  it("removes its lease, counts and pins and leaves the other replica's; the last one out leaves no key", async () => {
    const prefix = testPrefix();
    const replicaEnv = { ...env(upstream, TEST_REDIS, prefix, { inflight: 2, queue: 8 }) };
    replicaEnv.LOCALDECIDER_REDIS_LEASE_MS = LONG_LEASE;
    deciders = await allReady(
      await Promise.all([new DeciderProcess(replicaEnv).start(), new DeciderProcess(replicaEnv).start()]),
    );
    const [a, b] = deciders as [DeciderProcess, DeciderProcess];
    // Each has served (so each has counts of its own), and B holds a slot while A stops.
    expect((await decide(a.url, "a")).status).toBe(200);
    expect((await decide(b.url, "b")).status).toBe(200);
    fake.holding = true;
    const holding = decide(b.url, "b-running");
    await waitFor(() => fake.inflight === 1, "B's call running");
    const before = await keysUnder(prefix);
    expect(before.leases).toHaveLength(2);
    expect(before.queued).toHaveLength(2);
    const [bId] = before.running?.map((field) => field.split(" ")[0]) ?? [];
    expect(before.running).toStrictEqual([`${bId} ${upstream}`]);
    expect(before.pins).toStrictEqual([`${upstream} 0`]);

    await a.stop();
    // A's lease and its queued count are gone; B's entries, its running slot and its pin, stay.
    expect(await keysUnder(prefix)).toStrictEqual({
      leases: [bId],
      queued: [bId],
      running: [`${bId} ${upstream}`],
      pins: [`${upstream} 0`],
    });
    fake.release();
    expect((await holding).status).toBe(200);
    expect((await decide(b.url, "b-after")).status).toBe(200);

    await b.stop();
    expect(await keysUnder(prefix)).toStrictEqual({});
  });
});
