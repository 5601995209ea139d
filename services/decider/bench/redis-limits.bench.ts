/**
 * What sharing the limits through Redis adds to a request, against the limits in the decider's own process.
 * Four processes on this machine: a fake model server whose every call takes UPSTREAM_MS
 * (bench/fake-upstream.main.ts), two deciders (their own main.js, the same settings) in front of it, one
 * with LOCALDECIDER_REDIS_URL (the machine's Redis, a key prefix of this run's own) and one without, and
 * this client. Requests of one yes/no question (one upstream call: its reservation and slot in one script
 * run, one hand-back), sent in rounds that alternate between the two deciders so that the machine's other
 * load falls on both alike; sequentially, then with 4 in flight (MAX_INFLIGHT 4: no request waits for a slot).
 * Then the Redis path alone, in this process (no HTTP, no model server): what one one-call request asks of
 * the shared limits (admitted with its slot in one step, and for comparison reserved then given its slot in
 * two; the hand-back is not waited for), sequentially, so the machine's other load shows less than in the
 * end-to-end numbers.
 * Run: pnpm --filter @localdecider/decider bench:redis (the machine's Redis at 127.0.0.1:6379).
 */
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createLogger } from "@localdecider/service-kit";
import { RedisLimits } from "../src/limits/redis-limits";
import { stopProcess } from "../test/engine/backends";
import { deciderOnFake, startFakeUpstream } from "./processes";
import { decisionBody, quantile } from "./workload";

const UPSTREAM_MS = Number(process.env.BENCH_UPSTREAM_MS ?? 20);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const PER_ROUND = Number(process.env.BENCH_REQUESTS ?? 100);
const WARMUP = 200;
const REDIS = process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379";

const body = decisionBody(1);

async function one(url: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${url}/v1/systemone`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
  return performance.now() - started;
}

/** `count` requests, `clients` at a time; each request's milliseconds. */
async function load(url: string, count: number, clients: number): Promise<number[]> {
  const times: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < count) {
        next += 1;
        times.push(await one(url));
      }
    }),
  );
  return times;
}

/** Milliseconds of each request's asks of the shared limits: reserve(1), then its slot. */
/**
 * Milliseconds of each one-call request's asks of the shared limits, sequentially: `admit` reserves the call
 * and takes its slot in one script run, as the decider does when the server has a slot free here; `two steps`
 * reserves, then asks for the slot, as every call that waited in this process's queue does.
 */
async function redisPathAlone(count: number, path: "admit" | "two steps"): Promise<number[]> {
  const limits = new RedisLimits({
    url: REDIS,
    prefix: `localdecider-bench:${randomUUID()}:`,
    maxInflight: 4,
    maxQueue: 256,
    leaseMs: 15_000,
    logger: createLogger({ service: "bench", level: "silent" }),
  });
  try {
    while ((await limits.unavailable()) !== undefined) await new Promise((r) => setTimeout(r, 10));
    const signal = new AbortController().signal;
    const times: number[] = [];
    for (let i = 0; i < count; i++) {
      const started = performance.now();
      const answer = await limits.reserve(1, path === "admit" ? { server: "bench" } : undefined);
      if (!answer.ok) throw new Error("refused");
      const slot = answer.slot ?? (await limits.acquire({ server: "bench", alone: false, signal }));
      times.push(performance.now() - started);
      limits.release("bench", slot, 1);
    }
    return times;
  } finally {
    await limits.close();
  }
}

async function main(): Promise<void> {
  const fake = await startFakeUpstream(UPSTREAM_MS);
  const upstream = fake.url;
  const children: ChildProcess[] = [fake.child];
  try {
    const local = await deciderOnFake(upstream, {});
    children.push(local.child);
    const shared = await deciderOnFake(upstream, {
      LOCALDECIDER_REDIS_URL: REDIS,
      LOCALDECIDER_REDIS_PREFIX: `localdecider-bench:${randomUUID()}:`,
    });
    children.push(shared.child);
    const modes = [
      ["in this process", local.url],
      ["shared through Redis", shared.url],
    ] as const;
    for (const [, url] of modes) await load(url, WARMUP, 4);
    console.log(`fake upstream: ${UPSTREAM_MS} ms per call; ${ROUNDS} alternating rounds of ${PER_ROUND} requests`);
    console.log("| clients | limits | p50 ms | p90 ms | p99 ms | requests/s |");
    console.log("| ------: | ------ | -----: | -----: | -----: | ---------: |");
    for (const clients of [1, 4]) {
      const times = new Map<string, number[]>(modes.map(([name]) => [name, []]));
      const spent = new Map<string, number>(modes.map(([name]) => [name, 0]));
      for (let round = 0; round < ROUNDS; round++) {
        for (const [name, url] of round % 2 === 0 ? modes : [...modes].reverse()) {
          const started = performance.now();
          times.get(name)?.push(...(await load(url, PER_ROUND, clients)));
          spent.set(name, (spent.get(name) ?? 0) + performance.now() - started);
        }
      }
      const p50 = new Map<string, number>();
      for (const [name] of modes) {
        const t = times.get(name) ?? [];
        p50.set(name, quantile(t, 0.5));
        const rate = (t.length / (spent.get(name) ?? 1)) * 1000;
        console.log(
          `| ${clients} | ${name} | ${quantile(t, 0.5).toFixed(2)} | ${quantile(t, 0.9).toFixed(2)} | ${quantile(t, 0.99).toFixed(2)} | ${rate.toFixed(1)} |`,
        );
      }
      const added = (p50.get("shared through Redis") ?? 0) - (p50.get("in this process") ?? 0);
      console.log(`| ${clients} | Redis added, p50 | ${added.toFixed(2)} | | | |`);
    }
    for (const path of ["admit", "two steps"] as const) {
      await redisPathAlone(500, path);
      const alone = await redisPathAlone(ROUNDS * PER_ROUND * 4, path);
      console.log(
        `Redis path alone (${path}), ${alone.length} sequential: p50 ${quantile(alone, 0.5).toFixed(3)} ms, p90 ${quantile(alone, 0.9).toFixed(3)} ms, p99 ${quantile(alone, 0.99).toFixed(3)} ms`,
      );
    }
  } finally {
    for (const child of children.reverse()) await stopProcess(child);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
