/**
 * The decider on its embedded engine against node-llama-cpp's own decisions (LlamaDecisionContext), on the
 * same GGUF, threads, context size and batch size, each in a process of its own on this machine, called over
 * loopback HTTP by this client: our decider (its own main.js, LOCALDECIDER_UPSTREAM unset) and
 * bench/decision-context.main.ts. Each request brings a new document (a diff of BENCH_DOC_LINES lines), so
 * neither side finds it evaluated; each side gets the same document and equivalent questions (noul, a choice
 * of 3, a score of 4, in turn), each in its own format. Per size: one warm-up request each, then BENCH_REPS
 * requests each, the two sides alternating (and which goes first alternating too), so the machine's other
 * load falls on both alike; the medians, and the tokens each side evaluated (its own count).
 * Run: pnpm --filter @localdecider/decider bench:decision-context
 */
import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { stopProcess } from "../test/engine/backends";
import { firstLine, startDecider } from "./processes";
import { type ModelShape, shapedModelPath } from "./shaped-model";
import { median, questions, reviewQuestions } from "./workload";

/**
 * The default shape: Qwen2.5's vocabulary (151,936 tokens) and attention layout (grouped-query,
 * head size 64, 2 KV heads), at a width and depth that keep the bench to minutes on 2 cores: 12 layers of
 * width 384 (26 M parameters in the layers, 58 M in the embeddings). A token costs a real model's share of
 * attention and feed-forward work, and each read-out a full output row over the vocabulary.
 */
const DEFAULT_SHAPE: ModelShape = {
  embedding: 384,
  layers: 12,
  heads: 6,
  kvHeads: 2,
  feedForward: 1536,
  contextLength: 32768,
};
const SHAPE: ModelShape = process.env.BENCH_SHAPE === undefined ? DEFAULT_SHAPE : JSON.parse(process.env.BENCH_SHAPE);
const THREADS = Number(process.env.BENCH_THREADS ?? 1);
const CONTEXT = Number(process.env.BENCH_CONTEXT ?? 4096);
const BATCH = 512;
const REPS = Number(process.env.BENCH_REPS ?? 5);
const DOC_LINES = Number(process.env.BENCH_DOC_LINES ?? 24);
const SIZES = (process.env.BENCH_QUESTIONS ?? "1,16,100").split(",").map(Number);
/**
 * BENCH_WORKLOAD: `review` (default: the code-review questions of issue 33, yes/no with criteria, choices of
 * four described labels, scores of five named levels) or `mixed` (the short mixed questions of before).
 */
const WORKLOAD = (n: number) => (process.env.BENCH_WORKLOAD === "mixed" ? questions(n) : reviewQuestions(n));
/** BENCH_FLASH_AUTO=1 adds LlamaDecisionContext with flash attention `auto` (its default) as a third side. */
const FLASH_AUTO = process.env.BENCH_FLASH_AUTO === "1";
/** LlamaDecisionContext's default. */
const PARALLEL = Number(process.env.BENCH_PARALLEL ?? 4);

/** A new diff per request: `id` makes its first line (and so everything after it) differ from every other's. */
function document(id: number): string {
  const lines = [`--- a/src/service_${id}.ts`, `+++ b/src/service_${id}.ts`, `@@ -1,${DOC_LINES} +1,${DOC_LINES} @@`];
  for (let i = 0; i < DOC_LINES; i++) {
    const sign = i % 3 === 0 ? "-" : i % 3 === 1 ? "+" : " ";
    lines.push(`${sign}  const value${i} = compute(input.field${(i * 7) % 13}, "key-${id}-${i}"); // step ${i}`);
  }
  return lines.join("\n");
}

/** The same questions in LlamaDecisionContext's format (`instruction`; a choice's null keeps its key). */
function decisionQuestions(n: number): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(WORKLOAD(n)).map(([key, q]) => {
      const { instructions, ...rest } = q as { instructions: string };
      return [key, { ...rest, instruction: instructions }];
    }),
  );
}

interface Timed {
  ms: number;
  tokens: number;
}

async function post(url: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

async function ours(base: string, id: number, n: number): Promise<Timed> {
  const from = performance.now();
  const { status, json } = await post(`${base}/v1/systemone`, {
    model: "localdecider",
    state: { diff: document(id) },
    questions: WORKLOAD(n),
  });
  const ms = performance.now() - from;
  if (status !== 200) throw new Error(`decider: ${status} ${JSON.stringify(json)}`);
  return { ms, tokens: (json.usage as { input_tokens: number }).input_tokens };
}

async function theirs(base: string, id: number, n: number): Promise<Timed> {
  const from = performance.now();
  const { status, json } = await post(`${base}/decide`, { document: document(id), questions: decisionQuestions(n) });
  const ms = performance.now() - from;
  if (status !== 200) throw new Error(`LlamaDecisionContext: ${status} ${JSON.stringify(json)}`);
  return { ms, tokens: (json.tokenUsage as { input: number }).input };
}

/** node-llama-cpp's decisions in a process of its own, with flash attention `auto` (its default) or `off`. */
async function startPeer(model: string, flash: "auto" | "off"): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    [
      path.join(__dirname, "decision-context.main.js"),
      model,
      String(CONTEXT),
      String(BATCH),
      String(THREADS),
      String(PARALLEL),
      flash,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const line = await firstLine(child);
  return { url: line.split(" ")[0] as string, child };
}

interface Side {
  name: string;
  ask: (id: number, n: number) => Promise<Timed>;
}

async function main(): Promise<void> {
  const began = performance.now();
  const model = shapedModelPath(SHAPE);
  const children: ChildProcess[] = [];
  try {
    const decider = await startDecider({
      LOCALDECIDER_MODEL: model,
      LOCALDECIDER_GPU: "cpu",
      LOCALDECIDER_THREADS: String(THREADS),
      LOCALDECIDER_CONTEXT_SIZE: String(CONTEXT),
      LOCALDECIDER_MAX_QUEUE: "1000",
    });
    children.push(decider.child);
    const off = await startPeer(model, "off");
    children.push(off.child);
    const sides: Side[] = [
      { name: "ours", ask: (id, n) => ours(decider.url, id, n) },
      { name: "LlamaDecisionContext, flash attention off", ask: (id, n) => theirs(off.url, id, n) },
    ];
    if (FLASH_AUTO) {
      const auto = await startPeer(model, "auto");
      children.push(auto.child);
      sides.push({ name: "LlamaDecisionContext", ask: (id, n) => theirs(auto.url, id, n) });
    }
    let id = 0;
    const rows: string[] = [];
    for (const n of SIZES) {
      for (const side of sides) await side.ask(id++, n);
      const timed: Timed[][] = sides.map(() => []);
      for (let r = 0; r < REPS; r++) {
        const doc = id++;
        // Each side in turn on the same document, starting with another side each round.
        for (let k = 0; k < sides.length; k++) {
          const s = (r + k) % sides.length;
          (timed[s] as Timed[]).push(await (sides[s] as Side).ask(doc, n));
        }
      }
      const ms = timed.map((t) => median(t.map((x) => x.ms)));
      const tokens = timed.map((t) => median(t.map((x) => x.tokens)));
      const [o, f, a] = ms as [number, number, number | undefined];
      const auto = a === undefined ? "" : ` ${a.toFixed(0)} | **${(o / a).toFixed(2)}×** |`;
      rows.push(
        `| ${n} | ${o.toFixed(0)} | ${f.toFixed(0)} | **${(o / f).toFixed(2)}×** |${auto} ${tokens.join(" / ")} |`,
      );
      process.stderr.write(
        `${n} questions: ${sides.map((side, s) => `${side.name} ${(timed[s] as Timed[]).map((t) => t.ms.toFixed(0)).join(" ")}`).join("; ")}\n`,
      );
    }
    process.stdout.write(
      `random-weight qwen2 ${JSON.stringify(SHAPE)}, F16 (${path.basename(model)}); threads ${THREADS}, context ${CONTEXT} per sequence, batch ${BATCH}; ` +
        `LlamaDecisionContext parallelQuestions ${PARALLEL}; a new ${DOC_LINES}-line diff per request; ${process.env.BENCH_WORKLOAD === "mixed" ? "mixed" : "code-review"} questions; ${REPS} requests per side and size, medians; ` +
        `${((performance.now() - began) / 1000).toFixed(0)} s in all\n\n` +
        `| questions | ours ms | LlamaDecisionContext ms (flash attention off) | ours / off |${FLASH_AUTO ? " LlamaDecisionContext ms (flash attention auto) | ours / auto |" : ""} tokens evaluated: ours / off${FLASH_AUTO ? " / auto" : ""} |\n` +
        `|---:|---:|---:|---:|${FLASH_AUTO ? "---:|---:|" : ""}---:|\n` +
        `${rows.join("\n")}\n`,
    );
  } finally {
    for (const child of children) await stopProcess(child);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
