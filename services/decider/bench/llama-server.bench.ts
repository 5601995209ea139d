/**
 * The decider against a real llama-server, beside the floor, in the same run: for `--parallel` 1, 4 and 16
 * and requests of 1, 16 and 100 mixed questions, what one request costs the server (prompt tokens it
 * evaluated, from its own /metrics) and the client (end-to-end time), next to the floor: one chat call
 * holding the same state and every question, `max_tokens: 1`, which reads the prompt once (the least
 * work any design must do). Every request, the decider's and the floor's, brings a state of its own (a
 * unified diff of about 1,600 tokens), so none finds another's prompt cached. Then throughput: 8 clients
 * sending 16-question requests at once against `--parallel 4`, beside one client.
 *
 * Needs LLAMA_SERVER_BIN (a llama-server binary; never part of the repository). LLAMA_BENCH_MODEL: a GGUF
 * (default: the engine tests' tiny answering model, where times mean little but token counts are exact);
 * LLAMA_BENCH_FLAGS: more server flags (default: those docker-compose.yml runs the model server with);
 * BENCH_PARALLEL, BENCH_QUESTIONS: comma lists; BENCH_REQUESTS: requests per row (default 3, after a warm-up).
 * Run: LLAMA_SERVER_BIN=… pnpm --filter @localdecider/decider bench:llama-server
 */
import type { ChildProcess } from "node:child_process";
import type { TextQuestion } from "@localdecider/contracts/decider";
import { packPrompts, partsOf } from "../src/decide/plan";
import { renderPrompt } from "../src/decide/prompt";
import { ANSWER_MODEL } from "../test/engine/answer-model";
import { llamaServerBackend, type ProcessBackend, stopProcess } from "../test/engine/backends";
import { tinyModelPath } from "../test/engine/tiny-model";
import { startDecider } from "./processes";
import { median, questions } from "./workload";

const BIN = process.env.LLAMA_SERVER_BIN;
const list = (value: string | undefined, fallback: number[]) =>
  value === undefined ? fallback : value.split(",").map((v) => Number(v.trim()));
const PARALLEL = list(process.env.BENCH_PARALLEL, [1, 4, 16]);
const SIZES = list(process.env.BENCH_QUESTIONS, [1, 16, 100]);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 3);
/** The flags docker-compose.yml gives the model server (see its comments), unless told otherwise. */
const FLAGS = (process.env.LLAMA_BENCH_FLAGS ?? "--cache-ram 0").split(" ").filter((f) => f !== "");
/** Tokens of context per slot: the floor's prompt at 100 questions (about 8,500 here), with room to spare. */
const SLOT_CONTEXT = 12288;

/** A unified diff of about 1,600 tokens, different from the first line on for every seed. */
export function diffState(seed: number): { diff: string } {
  const lines = [`diff --git a/src/module_${seed}.ts b/src/module_${seed}.ts`, `--- a/src/module_${seed}.ts`];
  lines.push(`+++ b/src/module_${seed}.ts`, `@@ -1,120 +1,124 @@ export class Service${seed} {`);
  let x = seed * 2654435761;
  const next = () => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return x;
  };
  const words = ["value", "count", "total", "user", "order", "item", "limit", "cache", "retry", "state"];
  for (let i = 0; i < 120; i++) {
    const a = words[next() % words.length];
    const b = words[next() % words.length];
    const sign = i % 7 === 0 ? "-" : i % 5 === 0 ? "+" : " ";
    lines.push(`${sign}  const ${a}_${i} = ${b}.compute(${next() % 1000}, "${a}-${seed}");`);
  }
  return { diff: lines.join("\n") };
}

/** The prometheus counter of prompt tokens the server evaluated (not taken from its cache). */
async function promptTokens(server: string): Promise<number> {
  const text = await (await fetch(`${server}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("llamacpp:prompt_tokens_total"));
  if (line === undefined) throw new Error("llama-server's /metrics has no llamacpp:prompt_tokens_total (--metrics)");
  return Number(line.split(" ")[1]);
}

/** The floor's one call: the same state and every question in one prompt, one token. */
function floorBody(model: string, state: unknown, n: number): string {
  const parts = Object.entries(questions(n) as Record<string, TextQuestion>).flatMap(([name, q]) => partsOf(name, q));
  const [all] = packPrompts(parts, {
    questionsPerCall: Number.POSITIVE_INFINITY,
    outcomesPerCall: Number.POSITIVE_INFINITY,
  });
  return JSON.stringify({ model, messages: renderPrompt(state, all ?? []), max_tokens: 1, temperature: 0 });
}

async function timed(url: string, body: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${text.slice(0, 500)}`);
  return performance.now() - started;
}

interface Measured {
  ms: number;
  tokens: number;
}

/** Runs `send` for one new state at a time and measures its time and the prompt tokens the server read. */
async function measure(server: string, seeds: number[], send: (seed: number) => Promise<number>): Promise<Measured[]> {
  const out: Measured[] = [];
  for (const seed of seeds) {
    const before = await promptTokens(server);
    const ms = await send(seed);
    out.push({ ms, tokens: (await promptTokens(server)) - before });
  }
  return out;
}

let seedCounter = 1000;
const freshSeeds = (count: number) => Array.from({ length: count }, () => seedCounter++);

async function main(): Promise<void> {
  if (BIN === undefined) throw new Error("set LLAMA_SERVER_BIN to a llama-server binary");
  // The engine tests' answering model (every outcome of the workload in its top 20), stating a training
  // context that holds the floor's prompt at 100 questions.
  const modelFile =
    process.env.LLAMA_BENCH_MODEL ?? tinyModelPath({ ...ANSWER_MODEL, contextLength: SLOT_CONTEXT * 2 });
  const rows: string[] = [];
  let throughput = "";
  for (const parallel of PARALLEL) {
    const args = ["--parallel", String(parallel), "-c", String(parallel * SLOT_CONTEXT), "--metrics", ...FLAGS];
    const server: ProcessBackend = await llamaServerBackend(BIN, modelFile, args);
    let decider: ChildProcess | undefined;
    try {
      const spawned = await startDecider({
        LOCALDECIDER_UPSTREAM: server.url,
        LOCALDECIDER_UPSTREAM_MODEL: server.model,
        LOCALDECIDER_MAX_INFLIGHT: String(parallel),
        LOCALDECIDER_TIMEOUT: "600",
      });
      decider = spawned.child;
      const chat = `${server.url}/v1/chat/completions`;
      const decide = (n: number) => (seed: number) =>
        timed(
          `${spawned.url}/v1/systemone`,
          JSON.stringify({ model: "localdecider", state: diffState(seed), questions: questions(n) }),
        );
      for (const n of SIZES) {
        // Warm-up: one of each, on states of their own.
        await measure(server.url, freshSeeds(1), decide(n));
        await measure(server.url, freshSeeds(1), (seed) => timed(chat, floorBody(server.model, diffState(seed), n)));
        const ours = await measure(server.url, freshSeeds(REQUESTS), decide(n));
        const floor = await measure(server.url, freshSeeds(REQUESTS), (seed) =>
          timed(chat, floorBody(server.model, diffState(seed), n)),
        );
        const [ms, floorMs] = [median(ours.map((m) => m.ms)), median(floor.map((m) => m.ms))];
        const [tokens, floorTokens] = [median(ours.map((m) => m.tokens)), median(floor.map((m) => m.tokens))];
        rows.push(
          `| ${parallel} | ${n} | ${ms.toFixed(0)} | ${floorMs.toFixed(0)} | ${(ms / floorMs).toFixed(2)}× | ${tokens} / ${floorTokens} (${(tokens / floorTokens).toFixed(2)}×) |`,
        );
        process.stderr.write(`${rows[rows.length - 1]}\n`);
      }
      if (parallel === 4 && SIZES.includes(16)) {
        const one = performance.now();
        for (const seed of freshSeeds(8)) await decide(16)(seed);
        const oneRate = (8 * 16) / ((performance.now() - one) / 1000);
        const eight = performance.now();
        await Promise.all(freshSeeds(8).map((seed) => decide(16)(seed)));
        const eightRate = (8 * 16) / ((performance.now() - eight) / 1000);
        throughput = `8 × 16 questions on --parallel 4: one client ${oneRate.toFixed(1)} questions/s, 8 clients at once ${eightRate.toFixed(1)} questions/s (${(eightRate / oneRate).toFixed(2)}×)`;
      }
    } finally {
      if (decider !== undefined) await stopProcess(decider);
      await server.stop();
    }
  }
  process.stdout.write(
    `decider against llama-server (${modelFile.split("/").pop()}, flags: ${FLAGS.join(" ") || "none"}), ${REQUESTS} requests per row after a warm-up, medians; floor = one call with the same state and every question, max_tokens 1\n\n` +
      "| --parallel | questions | decider ms | floor ms | decider / floor | prompt tokens evaluated, decider / floor |\n" +
      "|---:|---:|---:|---:|---:|---:|\n" +
      `${rows.join("\n")}\n\n${throughput}\n`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
