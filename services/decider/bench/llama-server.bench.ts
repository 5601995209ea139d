/**
 * The decider against a real llama-server, beside the floor, in the same run: for `--parallel` 1, 4 and 16
 * and requests of 1, 16 and 100 mixed questions, what one request costs the server (prompt tokens it
 * evaluated, from its own /metrics; its CPU time, from /proc) and the client (end-to-end time), four ways:
 *
 * - floor: one chat call holding the same state and every question, `max_tokens: 1`: it reads the prompt once
 *   and answers nothing (the least work any design must do);
 * - chat: the decider with LOCALDECIDER_PACK_PROMPTS=false, one chat call per question (the path before);
 * - packed: the decider as deployed, a prompt's questions in one `/completion` call;
 * - direct: the packed path's calls sent by this process itself (the decider's own modules, no HTTP hop
 *   to a decider): what the packed decider costs without its own time.
 *
 * The workload is issue 33's code review (workload.ts): a diff of about 2,000 tokens, yes/no questions with
 * criteria, choices of four described labels, scores of five named levels (BENCH_WORKLOAD=mixed: the short
 * mixed questions and 1,600-token diff of before). The floor's prompt is the plain numbered list of the same
 * texts (floorMessages). Every request brings a state of its own, so none finds another's
 * prompt cached; each round runs the four in a rotated order, so load from elsewhere falls on all of them.
 * With BENCH_THROUGHPUT=1, then throughput: 8 clients sending 16-question requests at once against
 * `--parallel 4`, beside one client.
 *
 * Needs LLAMA_SERVER_BIN (a llama-server binary; never part of the repository). LLAMA_BENCH_MODEL: a GGUF
 * (default: the engine tests' tiny answering model, where times mean little but token counts are exact);
 * LLAMA_BENCH_FLAGS: more server flags (default: those docker-compose.yml runs the model server with);
 * BENCH_PARALLEL, BENCH_QUESTIONS: comma lists; BENCH_REQUESTS: requests per row and way (default 5, after a
 * warm-up); BENCH_READY_S: seconds a server may take to load its model (default 60); BENCH_LOG_DIR: a folder
 * that gets each server's and each decider's whole log (the deciders at LOG_LEVEL=info: their start-up
 * check's lines, no line per request). The start-up check's lines of this process go to stderr.
 * Run: LLAMA_SERVER_BIN=… pnpm --filter @localdecider/decider bench:llama-server
 */
import type { ChildProcess } from "node:child_process";
import path from "node:path";
import type { Question as SystemOneQuestion, TextQuestion } from "@localdecider/contracts/decider";
import { createLogger } from "@localdecider/service-kit";
import { type Limits, packPrompts, planRequest as planTask, partsOf as taskParts } from "../src/decide/plan";
import { probeOf } from "../src/decide/probe";
import { promptOf, renderPrompt, stateBlock } from "../src/decide/prompt";
import { systemOneQuestion, systemOneQuestions } from "../src/routes/systemone-dialect";
import { OpenAIUpstream } from "../src/upstream/openai-upstream";
import { ModelListProbe } from "../src/upstream/readiness";
import { ServerCheck } from "../src/upstream/server-check";
import { ANSWER_MODEL } from "../test/engine/answer-model";
import { llamaServerBackend, type ProcessBackend, stopProcess } from "../test/engine/backends";
import { tinyModelPath } from "../test/engine/tiny-model";
import { cpuNs, type Decider, startDecider } from "./processes";
import { diffState, floorMessages, median, questions, reviewQuestions, reviewState } from "./workload";

const MIXED = process.env.BENCH_WORKLOAD === "mixed";
/** The questions and the state of a request of `n` questions, on the workload chosen. */
const questionsOf = (n: number) => (MIXED ? questions(n) : reviewQuestions(n));
const stateOf = (seed: number) => (MIXED ? diffState(seed) : reviewState(seed));

/** The parts of one System One question, through the edge's translation into the internal form. */
const partsOf = (name: string, question: SystemOneQuestion, size?: number) =>
  taskParts(systemOneQuestion(name, question), size);

/** The plan of System One questions, through the edge's translation into the internal form. */
const planRequest = (questions: Record<string, SystemOneQuestion>, limits: Limits) =>
  planTask(systemOneQuestions(questions), limits);

const BIN = process.env.LLAMA_SERVER_BIN;
const list = (value: string | undefined, fallback: number[]) =>
  value === undefined ? fallback : value.split(",").map((v) => Number(v.trim()));
const PARALLEL = list(process.env.BENCH_PARALLEL, [1, 4, 16]);
const SIZES = list(process.env.BENCH_QUESTIONS, [1, 16, 100]);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 5);
const READY_MS = Number(process.env.BENCH_READY_S ?? 60) * 1000;
const THROUGHPUT = process.env.BENCH_THROUGHPUT === "1";
const LOG_DIR = process.env.BENCH_LOG_DIR;
const logFile = (name: string) => (LOG_DIR === undefined ? undefined : path.join(LOG_DIR, name));
/** The flags docker-compose.yml gives the model server (see its comments), unless told otherwise. */
const FLAGS = (process.env.LLAMA_BENCH_FLAGS ?? "--cache-ram 0").split(" ").filter((f) => f !== "");
/** Tokens of context per slot: the floor's prompt at 100 questions (about 8,500 here), with room to spare. */
const SLOT_CONTEXT = 12288;

/** The prometheus counter of prompt tokens the server evaluated (not taken from its cache). */
async function promptTokens(server: string): Promise<number> {
  const text = await (await fetch(`${server}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("llamacpp:prompt_tokens_total"));
  if (line === undefined) throw new Error("llama-server's /metrics has no llamacpp:prompt_tokens_total (--metrics)");
  return Number(line.split(" ")[1]);
}

/** The floor's one call: the same state and every question in one prompt, one token. */
function floorBody(model: string, state: { diff: string }, n: number): string {
  if (!MIXED) {
    const messages = floorMessages(state, questionsOf(n));
    return JSON.stringify({ model, messages, max_tokens: 1, temperature: 0 });
  }
  const parts = Object.entries(questions(n) as Record<string, TextQuestion>).flatMap(([name, q]) => partsOf(name, q));
  const [all] = packPrompts(parts, {
    questionsPerCall: Number.POSITIVE_INFINITY,
    outcomesPerCall: Number.POSITIVE_INFINITY,
  });
  return JSON.stringify({ model, messages: renderPrompt(state, all ?? []), max_tokens: 1, temperature: 0 });
}

async function post(url: string, body: string): Promise<void> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${text.slice(0, 500)}`);
}

/**
 * The packed decider's calls for a request of `n` questions, sent from here: the decider's plan, prompts and
 * probes, through its own adapter (checked like the decider's, so it packs where the decider does), one
 * prompt after another in slot 0.
 */
async function directPacked(upstream: OpenAIUpstream, state: unknown, n: number): Promise<void> {
  const plan = planRequest(questionsOf(n) as Record<string, TextQuestion>, {
    questionsPerCall: 16,
    outcomesPerCall: 128,
  });
  const block = stateBlock(state);
  const options = { signal: new AbortController().signal, slot: 0 };
  for (const parts of plan.firstRound) {
    const shared = promptOf(block, parts);
    const probes = parts.map((part, i) => probeOf(shared, part, i));
    const many = upstream.probeMany;
    if (probes.length > 1 && many !== undefined) await many(probes, options);
    else for (const probe of probes) await upstream.probe(probe, options);
  }
}

interface Way {
  name: "floor" | "chat" | "packed" | "direct";
  send: (seed: number) => Promise<void>;
  /** The process whose CPU counts as the decider's (none for the floor and the direct calls). */
  decider?: ChildProcess;
}

interface Measured {
  ms: number;
  tokens: number;
  serverCpuMs: number;
  deciderCpuMs: number;
}

let seedCounter = 1000;

/** One request of `way` on a new state: its time, the prompt tokens the server read, the CPU it took. */
async function measure(server: ProcessBackend, way: Way): Promise<Measured> {
  const seed = seedCounter++;
  const before = {
    tokens: await promptTokens(server.url),
    server: cpuNs(server.pid),
    decider: cpuNs(way.decider?.pid),
  };
  const started = performance.now();
  await way.send(seed);
  const ms = performance.now() - started;
  return {
    ms,
    tokens: (await promptTokens(server.url)) - before.tokens,
    serverCpuMs: (cpuNs(server.pid) - before.server) / 1e6,
    deciderCpuMs: (cpuNs(way.decider?.pid) - before.decider) / 1e6,
  };
}

/** An adapter of this process over the server, checked as the decider's are (kind, slots, the seam). */
async function checkedUpstream(server: ProcessBackend, parallel: number): Promise<OpenAIUpstream> {
  const baseURL = `${server.url}/v1`;
  const options = { baseURL, model: server.model, authorization: undefined, timeoutMs: 600_000 };
  const upstream = new OpenAIUpstream(options);
  // The check's lines (the server's kind and slots, whether prompts are packed and why) on stderr.
  const logger = createLogger({ service: "bench", level: "info" });
  for (const t of logger.transports) t.silent = true;
  let notPacked: unknown;
  logger.on("data", (info: { message: string; reason?: unknown }) => {
    process.stderr.write(`${JSON.stringify(info)}\n`);
    if (info.message.startsWith("llama.cpp prompts not packed")) notPacked = info.reason;
  });
  const check = new ServerCheck(new ModelListProbe({ ...options, timeoutMs: 10_000 }), upstream, {
    ...options,
    timeoutMs: 60_000,
    maxInflight: parallel,
    allowNoLogprobs: false,
    packPrompts: true,
    // A chat model's server: its chat path is what this benchmark measures.
    protocol: "chat",
    logger,
  });
  const ready = await check.check();
  if (!ready.ready) throw new Error(`the server failed the decider's start-up check: ${JSON.stringify(ready)}`);
  if (upstream.profile.packing === undefined) {
    // Measured all the same (the packed decider then asks chat calls too), and said in the output.
    process.stderr.write(
      `warning: this server's prompts cannot be packed; packed and direct are chat calls (${String(notPacked)})\n`,
    );
  }
  return upstream;
}

const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}×`;

async function main(): Promise<void> {
  if (BIN === undefined) throw new Error("set LLAMA_SERVER_BIN to a llama-server binary");
  // The engine tests' answering model (every outcome of the workload in its top 20), stating a training
  // context that holds the floor's prompt at 100 questions.
  const modelFile =
    process.env.LLAMA_BENCH_MODEL ?? tinyModelPath({ ...ANSWER_MODEL, contextLength: SLOT_CONTEXT * 2 });
  const rows: string[] = [];
  const throughput: string[] = [];
  for (const parallel of PARALLEL) {
    const args = ["--parallel", String(parallel), "-c", String(parallel * SLOT_CONTEXT), "--metrics", ...FLAGS];
    const server = await llamaServerBackend(BIN, modelFile, args, READY_MS, logFile(`llama-server-p${parallel}.log`));
    const deciders: Decider[] = [];
    try {
      const decider = async (packed: boolean) => {
        const started = await startDecider(
          {
            LOCALDECIDER_UPSTREAM: server.url,
            LOCALDECIDER_UPSTREAM_MODEL: server.model,
            LOCALDECIDER_MAX_INFLIGHT: String(parallel),
            LOCALDECIDER_TIMEOUT: "600",
            LOCALDECIDER_PACK_PROMPTS: String(packed),
            ...(LOG_DIR === undefined ? {} : { LOG_LEVEL: "info" }),
          },
          logFile(`decider-${packed ? "packed" : "chat"}-p${parallel}.log`),
        );
        deciders.push(started);
        return started;
      };
      const [chat, packed] = [await decider(false), await decider(true)];
      const upstream = await checkedUpstream(server, parallel);
      const chatURL = `${server.url}/v1/chat/completions`;
      const decide = (d: Decider, n: number) => (seed: number) =>
        post(
          `${d.url}/v1/systemone`,
          JSON.stringify({ model: "localdecider", state: stateOf(seed), questions: questionsOf(n) }),
        );
      for (const n of SIZES) {
        const ways: Way[] = [
          { name: "floor", send: (seed) => post(chatURL, floorBody(server.model, stateOf(seed), n)) },
          { name: "chat", send: decide(chat, n), decider: chat.child },
          { name: "packed", send: decide(packed, n), decider: packed.child },
          { name: "direct", send: (seed) => directPacked(upstream, stateOf(seed), n) },
        ];
        const got = new Map<Way["name"], Measured[]>(ways.map((w) => [w.name, []]));
        for (let round = 0; round <= REQUESTS; round++) {
          for (let k = 0; k < ways.length; k++) {
            const way = ways[(round + k) % ways.length] as Way;
            const m = await measure(server, way);
            // Round 0 warms each way up.
            if (round > 0) got.get(way.name)?.push(m);
          }
        }
        const med = (name: Way["name"], key: keyof Measured) => median((got.get(name) ?? []).map((m) => m[key]));
        const floor = med("floor", "ms");
        const cell = (name: Way["name"]) => `${med(name, "ms").toFixed(0)} (${ratio(med(name, "ms"), floor)})`;
        const floorTokens = med("floor", "tokens");
        const tokens = (name: Way["name"]) => `${med(name, "tokens")} (${ratio(med(name, "tokens"), floorTokens)})`;
        const cpu = (name: Way["name"], key: "serverCpuMs" | "deciderCpuMs") => med(name, key).toFixed(0);
        rows.push(
          `| ${parallel} | ${n} | ${floor.toFixed(0)} | ${cell("chat")} | ${cell("packed")} | ${cell("direct")} | ` +
            `${floorTokens} / ${tokens("chat")} / ${tokens("packed")} | ` +
            `${cpu("floor", "serverCpuMs")} / ${cpu("chat", "serverCpuMs")} / ${cpu("packed", "serverCpuMs")} | ` +
            `${cpu("chat", "deciderCpuMs")} / ${cpu("packed", "deciderCpuMs")} |`,
        );
        process.stderr.write(`${rows[rows.length - 1]}\n`);
      }
      if (THROUGHPUT && parallel === 4 && SIZES.includes(16)) {
        for (const [name, d] of [
          ["chat", chat],
          ["packed", packed],
        ] as const) {
          const seeds = (count: number) => Array.from({ length: count }, () => seedCounter++);
          const one = performance.now();
          for (const seed of seeds(8)) await decide(d, 16)(seed);
          const oneRate = (8 * 16) / ((performance.now() - one) / 1000);
          const eight = performance.now();
          await Promise.all(seeds(8).map((seed) => decide(d, 16)(seed)));
          const eightRate = (8 * 16) / ((performance.now() - eight) / 1000);
          throughput.push(
            `${name}: 8 × 16 questions on --parallel 4: one client ${oneRate.toFixed(1)} questions/s, 8 clients at once ${eightRate.toFixed(1)} questions/s (${(eightRate / oneRate).toFixed(2)}×)`,
          );
        }
      }
    } finally {
      for (const d of deciders) await stopProcess(d.child);
      await server.stop();
    }
  }
  process.stdout.write(
    `decider against llama-server (${modelFile.split("/").pop()}, flags: ${FLAGS.join(" ") || "none"}), ${REQUESTS} requests per row and way after a warm-up, medians, the ways in a rotated order each round; floor = one chat call with the same state and every question, max_tokens 1; chat = the decider with LOCALDECIDER_PACK_PROMPTS=false; packed = the decider as deployed; direct = the packed decider's calls sent by the benchmark itself\n\n` +
      "| --parallel | questions | floor ms | chat ms (× floor) | packed ms (× floor) | direct ms (× floor) | prompt tokens: floor / chat / packed | server CPU ms: floor / chat / packed | decider CPU ms: chat / packed |\n" +
      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n" +
      `${rows.join("\n")}\n\n${throughput.join("\n")}\n`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
