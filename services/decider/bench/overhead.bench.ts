/**
 * The decider's own time per request: a fake model server that answers at once (bench/fake-upstream.main.ts,
 * its own process), the decider (its own main.js) in front of it, and this client. Per size (1, 16 and 100
 * mixed questions), rounds alternate between a request through the decider and the same calls sent by
 * this client straight to the fake, in the same order and with the same concurrency as the decider sends
 * them (decide/schedule.ts: one at a time on a llama.cpp server, first-then-together on a vLLM one). "Added"
 * = p50 through the decider − p50 of the direct calls; a straight line through the sizes splits it into a
 * part per request and a part per upstream call.
 * Run: pnpm --filter @localdecider/decider bench:overhead (BENCH_REQUESTS per size, default 200).
 */
import type { TextQuestion } from "@localdecider/contracts/decider";
import { planRequest } from "../src/decide/plan";
import { probeOf } from "../src/decide/probe";
import { renderPrompt } from "../src/decide/prompt";
import { runInOrder } from "../src/decide/schedule";
import { OpenAIUpstream } from "../src/upstream/openai-upstream";
import { detectServer } from "../src/upstream/server-profile";
import { startDecider, startFakeUpstream } from "./processes";
import { quantile, questions } from "./workload";

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200);
const SIZES = [1, 16, 100];
const STATE = { diff: "--- a/x\n+++ b/x\n-a\n+b\n" };

async function post(url: string, body: string): Promise<void> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
}

/** The chat bodies the decider sends for a request of `n` questions, prompt by prompt. */
async function callsOf(upstream: string, n: number): Promise<string[][]> {
  const baseURL = `${upstream}/v1`;
  const adapter = new OpenAIUpstream({ baseURL, model: "test-model", authorization: undefined, timeoutMs: 10_000 });
  adapter.profile = await detectServer({ baseURL, authorization: undefined, timeoutMs: 10_000 });
  const plan = planRequest(questions(n) as Record<string, TextQuestion>, {
    questionsPerCall: 16,
    outcomesPerCall: 128,
  });
  return plan.firstRound.map((parts) => {
    const shared = renderPrompt(STATE, parts);
    return parts.map((part, i) => JSON.stringify(adapter.body(probeOf(shared, part, i).messages, { slot: 0 })));
  });
}

/** p50 and the slope fit of added milliseconds over upstream calls. */
function lineThrough(points: { calls: number; added: number }[]): { perRequest: number; perCall: number } {
  const n = points.length;
  const mx = points.reduce((s, p) => s + p.calls, 0) / n;
  const my = points.reduce((s, p) => s + p.added, 0) / n;
  const sxy = points.reduce((s, p) => s + (p.calls - mx) * (p.added - my), 0);
  const sxx = points.reduce((s, p) => s + (p.calls - mx) ** 2, 0);
  const perCall = sxy / sxx;
  return { perRequest: my - perCall * mx, perCall };
}

async function measure(flavour: "llama" | "vllm"): Promise<string> {
  const fake = await startFakeUpstream(0, flavour);
  const decider = await startDecider({
    LOCALDECIDER_UPSTREAM: fake.url,
    LOCALDECIDER_UPSTREAM_MODEL: "test-model",
    LOCALDECIDER_MAX_INFLIGHT: "2",
  });
  const rows: string[] = [];
  const points: { calls: number; added: number }[] = [];
  try {
    const prefixCache = flavour === "llama" ? "slot" : "shared";
    for (const n of SIZES) {
      const body = JSON.stringify({ model: "localdecider", state: STATE, questions: questions(n) });
      const calls = await callsOf(fake.url, n);
      const direct = () => runInOrder(calls, prefixCache, (call) => post(`${fake.url}/v1/chat/completions`, call));
      const through = () => post(`${decider.url}/v1/systemone`, body);
      const times = { through: [] as number[], direct: [] as number[] };
      const warmup = n === 1 ? 300 : n === 16 ? 40 : 6;
      const count = Math.max(10, Math.round(REQUESTS / Math.sqrt(n)));
      for (let i = 0; i < warmup + count; i++) {
        for (const [side, run] of [
          ["through", through],
          ["direct", direct],
        ] as const) {
          const started = performance.now();
          await run();
          if (i >= warmup) times[side].push(performance.now() - started);
        }
      }
      const [p50, direct50] = [quantile(times.through, 0.5), quantile(times.direct, 0.5)];
      const callCount = calls.flat().length;
      points.push({ calls: callCount, added: p50 - direct50 });
      rows.push(
        `| ${flavour} | ${n} | ${callCount} | ${p50.toFixed(2)} | ${direct50.toFixed(2)} | ${(p50 - direct50).toFixed(2)} | ${((p50 - direct50) / callCount).toFixed(3)} |`,
      );
      process.stderr.write(`${rows[rows.length - 1]}\n`);
    }
  } finally {
    decider.child.kill("SIGTERM");
    await fake.stop();
  }
  const { perRequest, perCall } = lineThrough(points);
  rows.push(`| ${flavour} | fit | | | | ${perRequest.toFixed(2)} per request | ${perCall.toFixed(3)} per call |`);
  return rows.join("\n");
}

async function main(): Promise<void> {
  const tables = [await measure("llama"), await measure("vllm")];
  process.stdout.write(
    `the decider's own time, p50 over sequential requests (1 client), fake model server answering at once in its own process\n\n` +
      "| server | questions | upstream calls | through the decider ms | the same calls direct ms | added ms | added per call ms |\n" +
      "|---|---:|---:|---:|---:|---:|---:|\n" +
      `${tables.join("\n")}\n`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
