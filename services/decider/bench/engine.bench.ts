/**
 * The decider against a real llama.cpp engine with the tiny generated model, three processes on this
 * machine: the engine upstream (bench/engine-upstream.main.ts), the decider (its own main.js) and this
 * client. Sequential requests of 1, 16 and 100 mixed questions; per size the median of REQUESTS runs
 * after a warm-up. "Decider added" = end to end − the union of the intervals in which the upstream was
 * serving a call of that request (absolute clocks, same machine).
 * Run: pnpm --filter @localdecider/decider bench
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import path from "node:path";
import { createInterface } from "node:readline";
import { ANSWER_MODEL } from "../test/engine/answer-model";
import { tinyModelPath } from "../test/engine/tiny-model";

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 21);
/** LOCALDECIDER_MAX_INFLIGHT, and llama-server's slots to match. */
const inflight = Number(process.env.LOCALDECIDER_MAX_INFLIGHT ?? 2);
/**
 * Warm-up requests per size: V8 optimises the decider's hot paths only after some hundreds of calls, and a
 * running service is warm; 1-question requests are cheap, so they get the most.
 */
const WARMUP: Record<number, number> = { 1: 200, 16: 20, 100: 3 };

function questions(n: number): Record<string, unknown> {
  return Object.fromEntries(
    Array.from({ length: n }, (_, i) => {
      const kind = i % 3;
      if (kind === 0) return [`noul_${i}`, { type: "noul", instructions: `Is statement ${i} true of the diff?` }];
      if (kind === 1) {
        return [
          `choice_${i}`,
          { type: "choice", instructions: "Which area?", criteria: { api: "HTTP layer", db: "storage", docs: null } },
        ];
      }
      return [`score_${i}`, { type: "score", instructions: "Risk?", criteria: ["none", "low", "medium", "high"] }];
    }),
  );
}

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

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
};

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`exited with ${code} before it was ready`)));
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).once("line", resolve);
  });
}

async function until(url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (
      await fetch(url).then(
        (r) => r.ok,
        () => false,
      )
    )
      return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not answer 200 within 30 s`);
}

/**
 * The model server: by default node-llama-cpp behind the test upstream (which reports when it was busy);
 * with LLAMA_SERVER_BIN, a real llama-server (2 slots, 8192 context, prompt cache on, as the README
 * recommends), whose busy time is not observable from here: that table leaves "decider added" out.
 */
async function startUpstream(
  model: string,
): Promise<{ url: string; child: ChildProcess; observable: boolean; name: string }> {
  const bin = process.env.LLAMA_SERVER_BIN;
  if (bin === undefined) {
    const child = spawn(process.execPath, [path.join(__dirname, "engine-upstream.main.js"), model], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    return { url: await firstLine(child), child, observable: true, name: "node-llama-cpp" };
  }
  const port = await freePort();
  const threads = process.env.LLAMA_THREADS ?? "1";
  const child = spawn(
    bin,
    [
      "-m",
      model,
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "-c",
      "8192",
      "--parallel",
      "2",
      "--no-webui",
      "-t",
      threads,
      "--alias",
      "tiny.gguf",
    ],
    { stdio: ["ignore", "ignore", "ignore"] },
  );
  const url = `http://127.0.0.1:${port}`;
  await until(`${url}/health`);
  return { url, child, observable: false, name: `llama-server (${threads} thread${threads === "1" ? "" : "s"})` };
}

async function main(): Promise<void> {
  const model = tinyModelPath(ANSWER_MODEL);
  const started = await startUpstream(model);
  const upstreamProcess = started.child;
  const children: ChildProcess[] = [upstreamProcess];
  try {
    const upstream = started.url;
    const port = await freePort();
    const decider = spawn(process.execPath, [path.join(__dirname, "..", "src", "main.js")], {
      stdio: ["ignore", "ignore", "inherit"],
      env: {
        ...process.env,
        LOCALDECIDER_PORT: String(port),
        LOCALDECIDER_UPSTREAM: upstream,
        LOCALDECIDER_UPSTREAM_MODEL: "tiny.gguf",
        LOG_LEVEL: "error",
      },
    });
    children.push(decider);
    const base = `http://127.0.0.1:${port}`;
    await until(`${base}/ready`);
    const rows: string[] = [];
    const e2eBySize = new Map<number, number>();
    for (const n of [1, 16, 100]) {
      const body = JSON.stringify({
        model: "localdecider",
        state: { diff: "--- a/x\n+++ b/x\n-a\n+b\n" },
        questions: questions(n),
      });
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
    for (const child of children.reverse()) {
      if (child.exitCode === null) {
        const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
        child.kill("SIGTERM");
        await exited;
      }
    }
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
