import { FakeUpstream } from "../fake-upstream/server";
import { waitFor } from "../helpers";
import {
  allReady,
  burst,
  DeciderProcess,
  decide,
  env,
  MACHINE_REDIS,
  readyOf,
  sharedTotals,
  testPrefix,
  track,
} from "./processes";

/**
 * Three built deciders (separate processes) sharing their limits through the machine's Redis, in front of
 * two fake model servers that record their peak concurrency: LOCALDECIDER_UPSTREAM lists both.
 */

jest.setTimeout(60_000);

let fakes: FakeUpstream[] = [];
let deciders: DeciderProcess[] = [];

afterEach(async () => {
  for (const fake of fakes) fake.release();
  await Promise.all(deciders.map((d) => d.stop()));
  await Promise.all(fakes.map((f) => f.stop().catch(() => undefined)));
  deciders = [];
  fakes = [];
});

it("each server's peak stays at MAX_INFLIGHT and admissions at MAX_QUEUE + the servers' slots; a server that dies mid-burst hands its requests to the other, and serves again once back", async () => {
  fakes = [new FakeUpstream(), new FakeUpstream()];
  const [a, b] = fakes as [FakeUpstream, FakeUpstream];
  const urls = await Promise.all(fakes.map((f) => f.start()));
  const limits = { inflight: 2, queue: 6 };
  const prefix = testPrefix();
  deciders = await allReady(
    await Promise.all(
      [0, 1, 2].map(() => new DeciderProcess(env(urls.join(","), MACHINE_REDIS, prefix, limits)).start()),
    ),
  );
  a.holding = true;
  b.holding = true;
  const total = 30;
  const replies = burst(
    deciders.map((d) => d.url),
    total,
    "burst",
  );
  const answered = track(replies);
  await waitFor(() => a.inflight === limits.inflight && b.inflight === limits.inflight, "both servers' slots taken");
  const slots = limits.inflight * fakes.length;
  await waitFor(() => total - answered.length <= limits.queue + slots, "the refusals");
  expect(answered.map((r) => r.body.code)).toStrictEqual(answered.map(() => "queue_full"));
  const admitted = total - answered.length;
  // Every call queued or running is one admitted request: at most MAX_QUEUE wait, at most 2 x MAX_INFLIGHT run.
  expect(admitted).toBeGreaterThanOrEqual(limits.queue);
  expect(admitted).toBeLessThanOrEqual(limits.queue + slots);

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
  let held = await sharedTotals(MACHINE_REDIS, prefix);
  for (let i = 0; i < 100 && (held.queued !== 0 || held.running !== 0); i++) {
    await new Promise((r) => setTimeout(r, 20));
    held = await sharedTotals(MACHINE_REDIS, prefix);
  }
  expect(held).toStrictEqual({ queued: 0, running: 0 });
  for (const d of deciders) {
    const ready = await readyOf(d.url);
    expect(ready.status).toBe(200);
    expect(ready.body.servers).toStrictEqual([
      { server: urls[0], state: "out", reason: "inference backend unreachable" },
      { server: urls[1], state: "ready" },
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
