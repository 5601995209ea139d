/**
 * The decider's own added latency: a fake upstream answering instantly in this process, 200 sequential
 * requests each of 1, 16 and 100 mixed questions over real loopback HTTP. Added latency = end-to-end time
 * minus the time the fake spent answering (the union of its busy intervals during the request).
 * Run: pnpm --filter @localdecider/decider bench
 */
import { createLogger, serve } from "@localdecider/service-kit";
import { createApp } from "../src/app";
import { upstreamBaseURL } from "../src/config";
import { UpstreamLimiter } from "../src/limiter";
import { OpenAIUpstream } from "../src/upstream/openai-upstream";
import { ModelListProbe } from "../src/upstream/readiness";
import { FakeUpstream } from "../test/fake-upstream/server";

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200);
const WARMUP = 20;

function questions(n: number): Record<string, unknown> {
  return Object.fromEntries(
    Array.from({ length: n }, (_, i) => {
      const kind = i % 3;
      if (kind === 0) return [`noul_${i}`, { type: "noul", instructions: `Is statement ${i} true of the diff?` }];
      if (kind === 1) {
        return [
          `choice_${i}`,
          {
            type: "choice",
            instructions: "Which area?",
            criteria: { api: "HTTP layer", db: "storage", docs: null, tests: null },
          },
        ];
      }
      return [
        `score_${i}`,
        { type: "score", instructions: "Risk?", criteria: ["none", "low", "medium", "high", "critical"] },
      ];
    }),
  );
}

function union(intervals: [number, number][]): number {
  const sorted = [...intervals].sort((a, b) => a[0] - b[0]);
  let total = 0;
  let end = -Infinity;
  for (const [s, e] of sorted) {
    if (e <= end) continue;
    total += e - Math.max(s, end);
    end = e;
  }
  return total;
}

const pct = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
};

async function main(): Promise<void> {
  const fake = new FakeUpstream({ flavour: "llama", models: ["bench-model"] });
  const upstream = await fake.start();
  const logger = createLogger({ service: "decider-bench", level: "silent" });
  const limiter = new UpstreamLimiter(2, 256);
  const baseURL = upstreamBaseURL(upstream);
  const { app } = createApp({
    upstream: new OpenAIUpstream({
      baseURL,
      model: "bench-model",
      apiKey: undefined,
      timeoutMs: 30_000,
    }),
    probe: new ModelListProbe({ baseURL, model: "bench-model", apiKey: undefined, timeoutMs: 5000 }),
    limiter,
    logger,
    upstreamAddress: upstream,
    upstreamModel: "bench-model",
    apiKey: undefined,
    limits: { questionsPerCall: 16, outcomesPerCall: 128 },
    malformedRetries: 2,
    timeoutSeconds: 30,
    allowNoLogprobs: false,
    bodyLimit: "1mb",
  });
  const running = await serve(app, { host: "127.0.0.1", port: 0, logger });
  const url = `http://127.0.0.1:${running.port}/v1/systemone`;
  const rows: string[] = [];
  for (const n of [1, 16, 100]) {
    const body = JSON.stringify({
      model: "localdecider",
      state: { diff: "--- a/x\n+++ b/x\n-a\n+b\n" },
      questions: questions(n),
    });
    const e2e: number[] = [];
    const added: number[] = [];
    const upstreamMs: number[] = [];
    for (let i = 0; i < WARMUP + REQUESTS; i++) {
      fake.busy = [];
      const start = performance.now();
      const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
      await res.json();
      const total = performance.now() - start;
      if (res.status !== 200) throw new Error(`status ${res.status}`);
      if (i < WARMUP) continue;
      const busy = union(fake.busy);
      e2e.push(total);
      upstreamMs.push(busy);
      added.push(total - busy);
    }
    const calls = fake.busy.length;
    rows.push(
      `| ${n} | ${calls} | ${pct(e2e, 50).toFixed(2)} | ${pct(e2e, 99).toFixed(2)} | ${pct(upstreamMs, 50).toFixed(2)} | ${pct(added, 50).toFixed(2)} | ${pct(added, 99).toFixed(2)} |`,
    );
  }
  process.stdout.write(
    `decider added latency, ${REQUESTS} sequential requests per size (+${WARMUP} warm-up), fake llama.cpp-shaped upstream in-process\n\n` +
      "| questions | upstream calls | end-to-end p50 ms | end-to-end p99 ms | fake upstream p50 ms | added p50 ms | added p99 ms |\n" +
      "|---|---|---|---|---|---|---|\n" +
      `${rows.join("\n")}\n`,
  );
  await running.close();
  await limiter.stop();
  await fake.stop();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
