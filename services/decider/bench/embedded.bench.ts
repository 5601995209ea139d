/**
 * The decider on its embedded engine (no model server) with the tiny generated model, two processes on
 * this machine: the decider (its own main.js, LOCALDECIDER_UPSTREAM unset) and this client. It measures the
 * time from spawn to listening and to the first ready /ready, requests per second at 1 and 16 questions
 * (sequential, and with CLIENTS requests in flight), and the decider's memory (VmRSS once ready, VmHWM at
 * the end, from /proc).
 * Run: pnpm --filter @localdecider/decider bench:embedded
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { ANSWER_MODEL } from "../test/engine/answer-model";
import { freePort, stopProcess } from "../test/engine/backends";
import { tinyModelPath } from "../test/engine/tiny-model";
import { decisionBody, median } from "./workload";

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 40);
const CLIENTS = 4;
/** LOCALDECIDER_THREADS for the decider: BENCH_THREADS, else 1. */
const THREADS = process.env.BENCH_THREADS ?? "1";
const WARMUP: Record<number, number> = { 1: 100, 16: 10 };

function memoryMiB(pid: number, field: "VmRSS" | "VmHWM"): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1]);
  return kb / 1024;
}

async function post(base: string, body: string): Promise<void> {
  const res = await fetch(`${base}/v1/systemone`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`status ${res.status}: ${text}`);
}

/** Requests per second with `clients` requests in flight until `count` are answered. */
async function throughput(base: string, body: string, count: number, clients: number): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < count) {
        next += 1;
        await post(base, body);
      }
    }),
  );
  return (count / (performance.now() - started)) * 1000;
}

async function main(): Promise<void> {
  const model = tinyModelPath(ANSWER_MODEL);
  const port = await freePort();
  const spawnedAt = performance.now();
  const decider: ChildProcess = spawn(process.execPath, [path.join(__dirname, "..", "src", "main.js")], {
    stdio: ["ignore", "pipe", "inherit"],
    env: {
      PATH: process.env.PATH,
      LOCALDECIDER_PORT: String(port),
      LOCALDECIDER_MODEL: model,
      LOCALDECIDER_GPU: "cpu",
      // One thread per evaluation by default: for a model this small more threads only wait on each other.
      LOCALDECIDER_THREADS: THREADS,
      LOG_LEVEL: "info",
    },
  });
  try {
    const lines = createInterface({ input: decider.stdout as NodeJS.ReadableStream });
    const listening = new Promise<number>((resolve) => {
      lines.on("line", (line) => {
        if (line.includes('"decider listening"')) resolve(performance.now() - spawnedAt);
      });
    });
    const base = `http://127.0.0.1:${port}`;
    const listenMs = await listening;
    for (;;) {
      const ok = await fetch(`${base}/ready`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const readyMs = performance.now() - spawnedAt;
    const rssReady = memoryMiB(decider.pid as number, "VmRSS");
    const rows: string[] = [];
    for (const n of [1, 16]) {
      const body = decisionBody(n);
      for (let i = 0; i < (WARMUP[n] ?? 5); i++) await post(base, body);
      const latencies: number[] = [];
      for (let i = 0; i < REQUESTS; i++) {
        const from = performance.now();
        await post(base, body);
        latencies.push(performance.now() - from);
      }
      const sequential = 1000 / median(latencies);
      const parallel = await throughput(base, body, REQUESTS, CLIENTS);
      rows.push(
        `| ${n} | ${median(latencies).toFixed(1)} | ${sequential.toFixed(1)} | ${parallel.toFixed(1)} | ${(parallel * n).toFixed(0)} |`,
      );
    }
    const peak = memoryMiB(decider.pid as number, "VmHWM");
    process.stdout.write(
      `decider on its embedded engine (tiny generated model, ${path.basename(model)}, F16, 58.6 MB), MAX_INFLIGHT 2, LOCALDECIDER_THREADS=${THREADS}\n\n` +
        `start: listening after ${listenMs.toFixed(0)} ms, first ready /ready after ${readyMs.toFixed(0)} ms\n` +
        `memory: ${rssReady.toFixed(0)} MiB resident once ready, ${peak.toFixed(0)} MiB peak after the runs\n\n` +
        `| questions | median ms (sequential) | requests/s sequential | requests/s, ${CLIENTS} clients | questions/s, ${CLIENTS} clients |\n` +
        "|---:|---:|---:|---:|---:|\n" +
        `${rows.join("\n")}\n`,
    );
  } finally {
    await stopProcess(decider);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
