/**
 * Scale-out: the aggregate throughput of 1, 2 and 3 decider replicas in front of two model servers, against
 * the servers' capacity. Processes on this machine: two fake model servers whose every call takes
 * UPSTREAM_MS (bench/fake-upstream.main.ts, which report their calls and peak concurrency over IPC), one
 * decider with its limits in its own process, three sharing theirs through the machine's Redis (a key prefix
 * of this run's own), all with both servers in LOCALDECIDER_UPSTREAM and MAX_INFLIGHT 4, and this client.
 * Capacity = 2 servers × 4 slots / UPSTREAM_MS. The client keeps IN_FLIGHT one-question requests (one call
 * each) in flight, sent round-robin over a row's replicas, for WARMUP_S + SECONDS; a row counts the requests
 * answered within the SECONDS window. Each round runs every row once, in an order rotated per round, so
 * that the machine's other load falls on all rows alike; the table holds the medians over ROUNDS.
 * Run: pnpm --filter @localdecider/decider bench:replicas (the machine's Redis at 127.0.0.1:6379).
 */
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { loadavg } from "node:os";
import Redis from "ioredis";
import { stopProcess } from "../test/engine/backends";
import { cpuMs, type Decider, deciderOnFake, type FakeUpstreamProcess, startFakeUpstream } from "./processes";
import { decisionBody, median, quantile } from "./workload";

const UPSTREAM_MS = Number(process.env.BENCH_UPSTREAM_MS ?? 50);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const WARMUP_S = 1;
/** Three times the servers' 8 slots: every replica has calls waiting whenever a slot frees. */
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? 24);
const REDIS = process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379";
const MAX_INFLIGHT = 4;
/** Far above IN_FLIGHT: a steady load is never refused (a 429 would show in the table). */
const MAX_QUEUE = 1000;
const SERVERS = 2;
const CAPACITY = (SERVERS * MAX_INFLIGHT * 1000) / UPSTREAM_MS;

const body = decisionBody(1);

interface Row {
  name: string;
  replicas: Decider[];
  /** The shared limits' key prefix, for rows through Redis. */
  prefix?: string;
}

/** One run of one row. */
interface Sample {
  rate: number;
  p50: number;
  p99: number;
  refused: number;
  errors: number;
  peaks: number[];
  calls: number[];
  /** CPU ms per answered request: the row's deciders, the fake servers, Redis (all its clients), this client. */
  cpu: { deciders: number; fakes: number; redis: number; client: number };
  /** This client's CPU over the row's wall time: near 1 would make it the bottleneck. */
  clientCore: number;
  /** Mean ms of an upstream call as the row's deciders timed it (the client's request to its answer). */
  callMs: number;
  /**
   * Through Redis: the most running slots Redis counted on each server (sampled), and how many it still
   * counted once the row had drained (held by no call).
   */
  redis?: { peaks: number[]; after: number };
}

/** Running slots the shared limits count in Redis on each of `servers` (its `running` hash, all replicas). */
async function redisRunning(redis: Redis, prefix: string, servers: string[]): Promise<number[]> {
  const running = await redis.hgetall(`${prefix}running`);
  const counts = servers.map(() => 0);
  for (const [field, value] of Object.entries(running)) {
    // Fields are `<replica id> <server>`, the server's address as the deciders name it.
    const server = field.slice(field.indexOf(" ") + 1).replace(/\/$/, "");
    const i = servers.indexOf(server);
    if (i >= 0) counts[i] = (counts[i] ?? 0) + Number(value);
  }
  return counts;
}

/** Samples `redisRunning` every 50 ms until `done` settles; the most seen per server. */
async function sampleRunning(redis: Redis, prefix: string, servers: string[], done: Promise<unknown>) {
  const peaks = servers.map(() => 0);
  let finished = false;
  void done.finally(() => {
    finished = true;
  });
  while (!finished) {
    const counts = await redisRunning(redis, prefix, servers);
    counts.forEach((c, i) => {
      peaks[i] = Math.max(peaks[i] ?? 0, c);
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return peaks;
}

/** The row's upstream calls as its deciders timed them (their /metrics): how many, and their seconds. */
async function callTimes(row: Row): Promise<{ count: number; seconds: number }> {
  let count = 0;
  let seconds = 0;
  for (const replica of row.replicas) {
    const text = await fetch(`${replica.url}/metrics`).then((r) => r.text());
    for (const line of text.split("\n")) {
      const value = Number(line.slice(line.lastIndexOf(" ") + 1));
      if (line.startsWith("decider_upstream_call_duration_seconds_sum")) seconds += value;
      if (line.startsWith("decider_upstream_call_duration_seconds_count")) count += value;
    }
  }
  return { count, seconds };
}

/** Redis's own CPU seconds (user + system) from INFO: the server is shared, so other clients count too. */
async function redisCpuMs(redis: Redis): Promise<number> {
  const info = await redis.info("cpu");
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, "m").exec(info)?.[1] ?? 0);
  return (field("used_cpu_user") + field("used_cpu_sys")) * 1000;
}

/** Requests, IN_FLIGHT at a time, round-robin over the row's replicas, for WARMUP_S then `seconds`. */
async function drive(row: Row, seconds: number) {
  const urls = row.replicas.map((r) => r.url);
  const from = performance.now() + WARMUP_S * 1000;
  const to = from + seconds * 1000;
  const latencies: number[] = [];
  let sent = 0;
  let answered = 0;
  let refused = 0;
  let errors = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (performance.now() < to) {
        const url = urls[sent % urls.length] as string;
        sent += 1;
        const started = performance.now();
        // Node's fetch keeps its connections alive (undici's global pool), so no request pays a handshake.
        const status = await fetch(`${url}/v1/systemone`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        }).then(
          async (res) => {
            await res.arrayBuffer();
            return res.status;
          },
          () => 0,
        );
        const ended = performance.now();
        if (status !== 200) {
          if (status === 429) refused += 1;
          else errors += 1;
          continue;
        }
        answered += 1;
        if (ended >= from && ended <= to) latencies.push(ended - started);
      }
    }),
  );
  return { latencies, answered, refused, errors };
}

async function measure(row: Row, fakes: FakeUpstreamProcess[], redis: Redis): Promise<Sample> {
  await Promise.all(fakes.map((f) => f.reset()));
  const pids = (children: { child: ChildProcess }[]) => children.map((c) => c.child.pid as number);
  const cpuOf = (list: number[]) => list.reduce((sum, pid) => sum + cpuMs(pid), 0);
  const before = {
    deciders: cpuOf(pids(row.replicas)),
    fakes: cpuOf(pids(fakes)),
    redis: await redisCpuMs(redis),
    client: process.cpuUsage(),
    calls: await callTimes(row),
    wall: performance.now(),
  };
  const driving = drive(row, SECONDS);
  const servers = fakes.map((f) => f.url);
  const [run, redisPeaks] = await Promise.all([
    driving,
    row.prefix === undefined ? undefined : sampleRunning(redis, row.prefix, servers, driving),
  ]);
  const wall = performance.now() - before.wall;
  const clientMs = (({ user, system }) => (user + system) / 1000)(process.cpuUsage(before.client));
  const per = (ms: number) => ms / Math.max(1, run.answered);
  const stats = await Promise.all(fakes.map((f) => f.stats()));
  const calls = await callTimes(row);
  return {
    rate: run.latencies.length / SECONDS,
    p50: quantile(run.latencies, 0.5),
    p99: quantile(run.latencies, 0.99),
    refused: run.refused,
    errors: run.errors,
    peaks: stats.map((s) => s.peak),
    calls: stats.map((s) => s.calls),
    cpu: {
      deciders: per(cpuOf(pids(row.replicas)) - before.deciders),
      fakes: per(cpuOf(pids(fakes)) - before.fakes),
      redis: per((await redisCpuMs(redis)) - before.redis),
      client: per(clientMs),
    },
    clientCore: clientMs / wall,
    callMs: ((calls.seconds - before.calls.seconds) * 1000) / Math.max(1, calls.count - before.calls.count),
    // Every request has been answered by now: whatever Redis still counts is held by no call.
    redis:
      row.prefix === undefined || redisPeaks === undefined
        ? undefined
        : {
            peaks: redisPeaks,
            after: (await redisRunning(redis, row.prefix, servers)).reduce((a, b) => a + b, 0),
          },
  };
}

function report(row: Row, samples: Sample[]): string {
  const m = (pick: (s: Sample) => number) => median(samples.map(pick));
  const calls = fakesTotals(samples, (s) => s.calls);
  const total = calls.reduce((a, b) => a + b, 0);
  const peaks = samples[0]?.peaks.map((_, i) => Math.max(...samples.map((s) => s.peaks[i] as number))) ?? [];
  const refused = samples.reduce((sum, s) => sum + s.refused, 0);
  const errors = samples.reduce((sum, s) => sum + s.errors, 0);
  const cpu = [m((s) => s.cpu.deciders), m((s) => s.cpu.fakes), m((s) => s.cpu.redis), m((s) => s.cpu.client)];
  return [
    row.name,
    m((s) => s.rate).toFixed(1),
    samples.map((s) => s.rate.toFixed(0)).join(" / "),
    `${((m((s) => s.rate) / CAPACITY) * 100).toFixed(1)} %`,
    m((s) => s.p50).toFixed(1),
    m((s) => s.p99).toFixed(1),
    `${refused} / ${errors}`,
    peaks.join(" / "),
    redisCounts(samples),
    calls.map((c) => `${((c / Math.max(1, total)) * 100).toFixed(1)} %`).join(" / "),
    // Each slot serves one call per cycle: the part of the cycle outside the call is the hand-over.
    `${m((s) => s.callMs).toFixed(1)} / ${((SERVERS * MAX_INFLIGHT * 1000) / m((s) => s.rate)).toFixed(1)}`,
    cpu.map((c) => c.toFixed(2)).join(" / "),
    `${(m((s) => s.clientCore) * 100).toFixed(0)} %`,
  ].join(" | ");
}

/** The most Redis counted on each server over the rounds, and what it still counted after each round's row. */
function redisCounts(samples: Sample[]): string {
  const counted = samples.flatMap((s) => (s.redis === undefined ? [] : [s.redis]));
  if (counted.length === 0) return "–";
  const peaks = counted[0]?.peaks.map((_, i) => Math.max(...counted.map((c) => c.peaks[i] ?? 0))) ?? [];
  return `${peaks.join(" / ")} · ${counted.map((c) => c.after).join(", ")}`;
}

function fakesTotals(samples: Sample[], pick: (s: Sample) => number[]): number[] {
  return (samples[0] ? pick(samples[0]) : []).map((_, i) => samples.reduce((sum, s) => sum + (pick(s)[i] ?? 0), 0));
}

async function main(): Promise<void> {
  const started: { child: ChildProcess }[] = [];
  const stopAll = () => Promise.all(started.map((s) => stopProcess(s.child)));
  process.once("SIGINT", () => void stopAll().then(() => process.exit(130)));
  const redis = new Redis(REDIS, { maxRetriesPerRequest: 1 });
  try {
    const load = loadavg().map((l) => l.toFixed(2));
    const fakes = await Promise.all(Array.from({ length: SERVERS }, () => startFakeUpstream(UPSTREAM_MS)));
    started.push(...fakes);
    const upstream = fakes.map((f) => f.url).join(",");
    const queue = { LOCALDECIDER_MAX_QUEUE: String(MAX_QUEUE) };
    const shared = {
      ...queue,
      LOCALDECIDER_REDIS_URL: REDIS,
      LOCALDECIDER_REDIS_PREFIX: `localdecider-bench:${randomUUID()}:`,
    };
    const deciders = await Promise.all([
      deciderOnFake(upstream, queue),
      ...Array.from({ length: 3 }, () => deciderOnFake(upstream, shared)),
    ]);
    started.push(...deciders);
    const [local, ...replicas] = deciders as [Decider, ...Decider[]];
    const rows: Row[] = [
      { name: "1 | in process", replicas: [local] },
      ...[1, 2, 3].map((n) => ({
        name: `${n} | through Redis`,
        replicas: replicas.slice(0, n),
        prefix: shared.LOCALDECIDER_REDIS_PREFIX,
      })),
    ];
    // Every replica warm (V8 has optimised its hot paths, connections are open) before anything counts.
    for (const row of rows) await drive(row, 1);
    const samples = new Map<Row, Sample[]>(rows.map((r) => [r, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const row of [...rows.slice(round % rows.length), ...rows.slice(0, round % rows.length)]) {
        samples.get(row)?.push(await measure(row, fakes, redis));
      }
    }
    console.log(
      `two fake model servers, ${UPSTREAM_MS} ms per call, MAX_INFLIGHT ${MAX_INFLIGHT} each: capacity ${CAPACITY.toFixed(0)} calls/s; ` +
        `${IN_FLIGHT} one-question requests in flight, round-robin over the replicas; ${ROUNDS} rounds of ` +
        `${WARMUP_S} + ${SECONDS} s per row, medians (429s, errors: sums; peaks: the highest)`,
    );
    console.log(
      `load average before: ${load.join(" ")}; after: ${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")}`,
    );
    console.log(
      "| replicas | limits | req/s | req/s by round | of capacity | p50 ms | p99 ms | 429s / errors | peak in flight A / B | Redis counted: peak A / B · after the row | calls A / B | call / slot cycle ms | CPU ms per request: deciders / fakes / Redis / client | client, % of a core |",
    );
    console.log("| -: | - | -: | -: | -: | -: | -: | -: | -: | -: | -: | -: | -: | -: |");
    for (const row of rows) console.log(`| ${report(row, samples.get(row) ?? [])} |`);
  } finally {
    redis.disconnect();
    await stopAll();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
