/**
 * The decider against a real llama.cpp engine with the tiny generated model, three processes on this
 * machine: the engine upstream (bench/engine-upstream.main.ts), the decider (its own main.js) and this
 * client. Sequential requests of 1, 16 and 100 mixed questions; per size the median of REQUESTS runs
 * after a warm-up. "Decider added" = end to end − the union of the intervals in which the upstream was
 * serving a call of that request (absolute clocks, same machine).
 * Run: pnpm --filter @localdecider/decider bench
 */
import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { ANSWER_MODEL } from "../test/engine/answer-model";
import { llamaServerBackend, stopProcess } from "../test/engine/backends";
import { tinyModelPath } from "../test/engine/tiny-model";
import { firstLine, startDecider } from "./processes";
import { decisionBody, median } from "./workload";

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 21);

/**
 * Warm-up requests per size: V8 optimises the decider's hot paths only after some hundreds of calls, and a
 * running service is warm; 1-question requests are cheap, so they get the most.
 */
const WARMUP: Record<number, number> = { 1: 200, 16: 20, 100: 3 };

function union(intervals: [number, number][], from: number, to: number): number {
  const sorted = intervals
    .map(([s, e]): [number, number] => [Math.max(s, from), Math.min(e, to)])
    .filter(([s, e]) => e > s)
    .sort((a, b) => a[0] - b[0]);
  let total = 0;
  let end = Number.NEGATIVE_INFINITY;
  for (const [s, e] of sorted) {
    if (e <= end) continue;
    total += e - Math.max(s, end);
    end = e;
  }
  return total;
}

interface Upstream {
  url: string;
  model: string;
  stop: () => Promise<void>;
  /** Whether it reports when it was busy (GET /bench/busy). */
  observable: boolean;
  name: string;
}

/**
 * The model server: by default node-llama-cpp behind the test upstream, in its own process (it reports
 * when it was busy); with LLAMA_SERVER_BIN, a real llama-server as the engine suites start it (2 slots,
 * 8192 context, prompt cache on), whose busy time is not observable from here: "decider added" is left out.
 */
async function startUpstream(modelFile: string): Promise<Upstream> {
  const bin = process.env.LLAMA_SERVER_BIN;
  if (bin !== undefined) {
    const backend = await llamaServerBackend(bin, modelFile);
    return { ...backend, observable: false, name: "llama-server" };
  }
  const child = spawn(process.execPath, [path.join(__dirname, "engine-upstream.main.js"), modelFile], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  return {
    url: await firstLine(child),
    model: "tiny.gguf",
    stop: () => stopProcess(child),
    observable: true,
    name: "node-llama-cpp",
  };
}

async function main(): Promise<void> {
  const model = tinyModelPath(ANSWER_MODEL);
  const started = await startUpstream(model);
  let decider: ChildProcess | undefined;
  try {
    const upstream = started.url;
    const spawned = await startDecider({ LOCALDECIDER_UPSTREAM: upstream, LOCALDECIDER_UPSTREAM_MODEL: started.model });
    decider = spawned.child;
    const base = spawned.url;
    const rows: string[] = [];
    const e2eBySize = new Map<number, number>();
    for (const n of [1, 16, 100]) {
      const body = decisionBody(n);
      const e2e: number[] = [];
      const added: number[] = [];
      const upstreamMs: number[] = [];
      let outputTokens = 0;
      let counted = 0;
      const warmup = WARMUP[n] ?? 3;
      for (let i = 0; i < warmup + REQUESTS; i++) {
        if (started.observable) await fetch(`${upstream}/bench/busy`).then((r) => r.json());
        const from = performance.timeOrigin + performance.now();
        const res = await fetch(`${base}/v1/systemone`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        });
        const answer = (await res.json()) as { usage: { output_tokens: number } };
        const to = performance.timeOrigin + performance.now();
        if (res.status !== 200) throw new Error(`status ${res.status}: ${JSON.stringify(answer)}`);
        const busy: [number, number][] = started.observable
          ? ((await fetch(`${upstream}/bench/busy`).then((r) => r.json())) as [number, number][])
          : [];
        if (i < warmup) continue;
        const inUpstream = union(busy, from, to);
        e2e.push(to - from);
        upstreamMs.push(inUpstream);
        added.push(to - from - inUpstream);
        outputTokens += answer.usage.output_tokens;
        counted += n;
      }
      e2eBySize.set(n, median(e2e));
      const ratio = (median(e2e) / (e2eBySize.get(1) as number)).toFixed(2);
      const observed = started.observable
        ? `${median(upstreamMs).toFixed(1)} | ${median(added).toFixed(2)}`
        : "n/a | n/a";
      rows.push(
        `| ${n} | ${median(e2e).toFixed(1)} | ${ratio}× | ${(outputTokens / counted).toFixed(2)} | ${observed} |`,
      );
    }
    process.stdout.write(
      `decider against ${started.name} (tiny generated model), 3 processes, ${REQUESTS} sequential requests per size after a warm-up (200, 20, 3), medians\n\n` +
        "| questions | end to end ms | × time of 1 | decoded tokens per question | upstream busy ms | decider added ms |\n" +
        "|---:|---:|---:|---:|---:|---:|\n" +
        `${rows.join("\n")}\n`,
    );
  } finally {
    if (decider !== undefined) await stopProcess(decider);
    await started.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
