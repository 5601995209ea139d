/**
 * The decider's own time per request: a fake model server that answers at once (bench/fake-upstream.main.ts,
 * its own process), the decider (its own main.js) in front of it, and this client. Per size (1, 16 and 100
 * mixed questions), rounds alternate between a request through the decider and the same calls sent by
 * this client straight to the fake, in the same order and with the same concurrency as the decider sends
 * them, their bodies written beforehand: on a llama.cpp server, a prompt's `/apply-template`, `/tokenize` and
 * one `/completion` (llama-packed.ts; a prompt of one question is one chat call), or with
 * LOCALDECIDER_PACK_PROMPTS=false one chat call per question, one at a time; on a vLLM one, a prompt's first
 * chat call, then the rest together (decide/schedule.ts). "Added" = p50 through the decider − p50 of the direct
 * calls; a straight line through the sizes splits it into a part per request and a part per upstream call.
 * Run: pnpm --filter @localdecider/decider bench:overhead (BENCH_REQUESTS per size, default 200).
 */
import type { Question as SystemOneQuestion, TextQuestion } from "@localdecider/contracts/decider";
import { type Limits, planRequest as planTask } from "../src/decide/plan";
import { probeOf } from "../src/decide/probe";
import { renderPrompt } from "../src/decide/prompt";
import { runInOrder } from "../src/decide/schedule";
import { systemOneQuestions } from "../src/routes/systemone-dialect";
import { completionBody } from "../src/upstream/llama-packed";
import { OpenAIUpstream } from "../src/upstream/openai-upstream";
import { detectServer } from "../src/upstream/server-profile";
import { cpuNs, startDecider, startFakeUpstream } from "./processes";
import { lineThrough, quantile, questions } from "./workload";

/** The plan of System One questions, through the edge's translation into the internal form. */
const planRequest = (questions: Record<string, SystemOneQuestion>, limits: Limits) =>
  planTask(systemOneQuestions(questions), limits);

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200);
const SIZES = [1, 16, 100];
const STATE = { diff: "--- a/x\n+++ b/x\n-a\n+b\n" };

type Flavour = "llama packed" | "llama chat" | "vllm";

interface Call {
  path: string;
  body: string;
}

async function post(url: string, body: string): Promise<string> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
  return text;
}

/** The calls the decider sends for a request of `n` questions, prompt by prompt (each prompt's in order). */
async function callsOf(upstream: string, flavour: Flavour, n: number): Promise<Call[][]> {
  const baseURL = `${upstream}/v1`;
  const adapter = new OpenAIUpstream({ baseURL, model: "test-model", authorization: undefined, timeoutMs: 10_000 });
  adapter.profile = await detectServer({ baseURL, authorization: undefined, timeoutMs: 10_000 });
  const plan = planRequest(questions(n) as Record<string, TextQuestion>, {
    questionsPerCall: 16,
    outcomesPerCall: 128,
  });
  const chat = (messages: Parameters<OpenAIUpstream["body"]>[0]) => ({
    path: "/v1/chat/completions",
    body: JSON.stringify(adapter.body(messages, { slot: 0 })),
  });
  const prompts: Call[][] = [];
  for (const parts of plan.firstRound) {
    const shared = renderPrompt(STATE, parts);
    const probes = parts.map((part, i) => probeOf(shared, part, i));
    if (flavour !== "llama packed" || probes.length === 1) {
      prompts.push(probes.map((p) => chat(p.messages)));
      continue;
    }
    // What llama-packed.ts sends, written here once: the template, the shared part's tokens, the call.
    const template = JSON.stringify({
      messages: probes[0]?.messages,
      chat_template_kwargs: { enable_thinking: false },
    });
    const rendered = (JSON.parse(await post(`${upstream}/apply-template`, template)) as { prompt: string }).prompt;
    const tail = "assistant\n";
    const head = rendered.slice(0, rendered.length - tail.length - (probes[0]?.messages.at(-1)?.content.length ?? 0));
    const tokenize = JSON.stringify({ content: head, add_special: true, parse_special: true });
    const ids = (JSON.parse(await post(`${upstream}/tokenize`, tokenize)) as { tokens: number[] }).tokens;
    const suffixes = probes.map((p) => tail + (p.messages.at(-1)?.content ?? ""));
    prompts.push([
      { path: "/apply-template", body: template },
      { path: "/tokenize", body: tokenize },
      { path: "/completion", body: completionBody(ids.join(","), suffixes, 0).toString("utf8") },
    ]);
  }
  return prompts;
}

async function measure(flavour: Flavour): Promise<string> {
  const fake = await startFakeUpstream(0, flavour === "vllm" ? "vllm" : "llama");
  const decider = await startDecider({
    LOCALDECIDER_UPSTREAM: fake.url,
    LOCALDECIDER_UPSTREAM_MODEL: "test-model",
    LOCALDECIDER_MAX_INFLIGHT: "2",
    LOCALDECIDER_PACK_PROMPTS: String(flavour === "llama packed"),
  });
  const rows: string[] = [];
  const points: { calls: number; added: number; cpu: number }[] = [];
  try {
    // A vLLM prompt's first call alone, then the rest together; a llama.cpp prompt's calls one at a time.
    const prefixCache = flavour === "vllm" ? "shared" : "slot";
    for (const n of SIZES) {
      const body = JSON.stringify({ model: "localdecider", state: STATE, questions: questions(n) });
      const calls = await callsOf(fake.url, flavour, n);
      const direct = () =>
        runInOrder(calls, prefixCache, async (call) => {
          await post(`${fake.url}${call.path}`, call.body);
        });
      const through = () => post(`${decider.url}/v1/systemone`, body);
      const times = { through: [] as number[], direct: [] as number[] };
      // The decider's own CPU per request (all its threads): steadier than times on a machine shared with other work.
      const cpu: number[] = [];
      const warmup = n === 1 ? 300 : n === 16 ? 40 : 6;
      const count = Math.max(10, Math.round(REQUESTS / Math.sqrt(n)));
      for (let i = 0; i < warmup + count; i++) {
        for (const [side, run] of [
          ["through", through],
          ["direct", direct],
        ] as const) {
          const cpuBefore = side === "through" ? cpuNs(decider.child.pid) : 0;
          const started = performance.now();
          await run();
          if (i >= warmup) times[side].push(performance.now() - started);
          if (i >= warmup && side === "through") cpu.push((cpuNs(decider.child.pid) - cpuBefore) / 1e6);
        }
      }
      const [p50, direct50] = [quantile(times.through, 0.5), quantile(times.direct, 0.5)];
      const callCount = calls.flat().length;
      const cpu50 = quantile(cpu, 0.5);
      points.push({ calls: callCount, added: p50 - direct50, cpu: cpu50 });
      rows.push(
        `| ${flavour} | ${n} | ${callCount} | ${p50.toFixed(2)} | ${direct50.toFixed(2)} | ${(p50 - direct50).toFixed(2)} | ${((p50 - direct50) / callCount).toFixed(3)} | ${cpu50.toFixed(2)} |`,
      );
      process.stderr.write(`${rows[rows.length - 1]}\n`);
    }
  } finally {
    decider.child.kill("SIGTERM");
    await fake.stop();
  }
  const { perRequest, perCall } = lineThrough(points);
  const cpuFit = lineThrough(points.map((p) => ({ calls: p.calls, added: p.cpu })));
  rows.push(
    `| ${flavour} | fit | | | | ${perRequest.toFixed(2)} per request | ${perCall.toFixed(3)} per call | ${cpuFit.perRequest.toFixed(2)} + ${cpuFit.perCall.toFixed(3)} per call |`,
  );
  return rows.join("\n");
}

async function main(): Promise<void> {
  const only = process.env.BENCH_FLAVOURS?.split(",") as Flavour[] | undefined;
  const tables: string[] = [];
  for (const flavour of only ?? (["llama packed", "llama chat", "vllm"] as const)) tables.push(await measure(flavour));
  process.stdout.write(
    `the decider's own time, p50 over sequential requests (1 client), fake model server answering at once in its own process\n\n` +
      "| server | questions | upstream calls | through the decider ms | the same calls direct ms | added ms | added per call ms | decider CPU ms |\n" +
      "|---|---:|---:|---:|---:|---:|---:|---:|\n" +
      `${tables.join("\n")}\n`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
