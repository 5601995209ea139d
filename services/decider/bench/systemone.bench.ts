import type { Question as SystemOneQuestion } from "@localdecider/contracts/decider";
/**
 * The decider's own time in front of a native System One server: a fake that answers at once (bench/
 * fake-systemone.main.ts, its own process), the decider (its own main.js) in front of it, and this client. Per
 * size (1, 16 and 100 mixed questions), rounds alternate between a request through the decider and the same
 * `POST /v1/systemone` calls sent by this client straight to the fake: the bodies the decider sends (its plan:
 * at most QUESTIONS_PER_CALL questions and OUTCOMES_PER_CALL outcomes each), one after another as the decider
 * sends them in its slot. "Added" = p50 through the decider − p50 of the direct calls; a straight line through
 * the sizes splits it into a part per request and a part per upstream call.
 * This client sends both sides with the decider's own HTTP client (node:http, kept-alive connections).
 * Run: pnpm --filter @localdecider/decider bench:systemone (BENCH_REQUESTS per size, default 1600).
 */

import { spawn } from "node:child_process";
import path from "node:path";
import type { Question } from "@localdecider/contracts/decider";
import { nativeQuestionOf } from "../src/decide/native";
import { type Limits, planRequest as planTask } from "../src/decide/plan";
import { systemOneQuestions } from "../src/routes/systemone-dialect";
import { createHttpTransport } from "../src/upstream/http-fetch";
import { documentedOptionLimit, wireBody } from "../src/upstream/systemone-upstream";
import { stopProcess } from "../test/engine/backends";
import { firstLine, startDecider } from "./processes";
import { lineThrough, quantile, questions } from "./workload";

/** The plan of System One questions, through the edge's translation into the internal form. */
const planRequest = (questions: Record<string, SystemOneQuestion>, limits: Limits) =>
  planTask(systemOneQuestions(questions), limits);

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 1600);
const SIZES = [1, 16, 100];
const STATE = { diff: "--- a/x\n+++ b/x\n-a\n+b\n" };
const MODEL = "test-model";

/**
 * This client's HTTP, for both sides: node:http over kept-alive connections, the decider's own (upstream/
 * http-fetch.ts), so that each exchange costs the client the same and the direct calls are the floor.
 */
const send = createHttpTransport().request;

async function post(url: string, body: string): Promise<void> {
  const res = await send(new URL(url), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  });
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
}

/** The native call bodies the decider sends for a request of `n` questions, in order (the default limits). */
function callsOf(n: number): string[] {
  const plan = planRequest(questions(n) as Record<string, Question>, {
    questionsPerCall: 16,
    outcomesPerCall: 128,
    outcomesPerPart: documentedOptionLimit(MODEL),
    onePartPerQuestion: true,
  });
  return plan.firstRound.map((parts) =>
    JSON.stringify(wireBody({ model: MODEL, state: STATE, questions: parts.map(nativeQuestionOf) }, "llama.cpp")),
  );
}

async function main(): Promise<void> {
  const fakeChild = spawn(process.execPath, [path.join(__dirname, "fake-systemone.main.js")], {
    stdio: ["ignore", "pipe", "inherit", "ipc"],
  });
  const fake = await firstLine(fakeChild);
  const decider = await startDecider({
    LOCALDECIDER_UPSTREAM: fake,
    LOCALDECIDER_UPSTREAM_MODEL: MODEL,
    LOCALDECIDER_MAX_INFLIGHT: "2",
  });
  const rows: string[] = [];
  const points: { calls: number; added: number }[] = [];
  try {
    const ready = (await (await fetch(`${decider.url}/ready`)).json()) as { protocol?: string };
    if (ready.protocol !== "systemone") throw new Error(`the decider found protocol ${ready.protocol}`);
    for (const n of SIZES) {
      const body = JSON.stringify({ model: "localdecider", state: STATE, questions: questions(n) });
      const calls = callsOf(n);
      const direct = async () => {
        for (const call of calls) await post(`${fake}/v1/systemone`, call);
      };
      const through = () => post(`${decider.url}/v1/systemone`, body);
      const times = { through: [] as number[], direct: [] as number[] };
      const warmup = n === 1 ? 300 : n === 16 ? 60 : 20;
      const count = Math.max(20, Math.round(REQUESTS / Math.sqrt(n)));
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
      points.push({ calls: calls.length, added: p50 - direct50 });
      const goal = 2 + 0.15 * calls.length;
      rows.push(
        `| ${n} | ${calls.length} | ${count} | ${p50.toFixed(2)} | ${direct50.toFixed(2)} | ${(p50 - direct50).toFixed(2)} | ${goal.toFixed(2)} |`,
      );
      process.stderr.write(`${rows[rows.length - 1]}\n`);
    }
  } finally {
    decider.child.kill("SIGTERM");
    await stopProcess(fakeChild);
  }
  const { perRequest, perCall } = lineThrough(points);
  process.stdout.write(
    "the decider's own time in front of a native System One server, p50 over sequential requests (1 client), fake answering at once in its own process\n\n" +
      "| questions | upstream calls | requests | through the decider ms | the same calls direct ms | added ms | goal ms (2 + 0.15 per call) |\n" +
      "|---:|---:|---:|---:|---:|---:|---:|\n" +
      `${rows.join("\n")}\n\nfit: ${perRequest.toFixed(2)} ms per request + ${perCall.toFixed(3)} ms per upstream call\n`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
