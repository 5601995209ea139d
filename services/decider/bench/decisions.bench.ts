/**
 * What OpenAI's dialect adds: `POST /v1/decisions` against `POST /v1/systemone` for the same work. One decider
 * (its own main.js) in front of a fake model server that answers at once (bench/fake-upstream.main.ts, its own
 * process); per size (1, 16 and 100 mixed questions: yes/no, a choice of 3, a score of 4), rounds alternate
 * the two dialects (which goes first alternates too), each asking the same questions under the same names
 * about the same state, so the prompts and the upstream calls are the same (checked: the fake counts them).
 * "Added" = p50 of /v1/decisions − p50 of /v1/systemone; the goal is at most 0.3 ms. On a shared machine that
 * difference is within the noise of one HTTP round trip, so the edge itself is also timed in this process: what
 * differs between the dialects (the body's schema, the translation into the task and the answers back), per
 * request, each side from the parsed JSON body to the response object, alternating, median of rounds.
 * Run: pnpm --filter @localdecider/decider bench:decisions (BENCH_REQUESTS per size, default 200).
 */
import { DecisionCreateRequest, SystemOneRequest } from "@localdecider/contracts/decider";
import type { TaskResult } from "../src/decide/task";
import { decisionsResponse, decisionsTask } from "../src/routes/decisions-dialect";
import { systemOneResponse, systemOneTask } from "../src/routes/systemone-dialect";
import { deciderOnFake, startFakeUpstream } from "./processes";
import { quantile, questions } from "./workload";

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200);
const WARMUP = 20;
const SIZES = [1, 16, 100];
const GOAL_MS = 0.3;
const STATE = "--- a/x\n+++ b/x\n-a\n+b\n";

type SystemOneQuestion =
  | { type: "noul"; instructions: string }
  | { type: "choice"; instructions: string; criteria: Record<string, string | null> }
  | { type: "score"; instructions: string; criteria: string[] };

/** The same questions in both dialects: a noul as a predicate, criteria as choices' descriptions, levels as labels. */
function bodies(n: number): { systemone: string; decisions: string } {
  const named = Object.entries(questions(n) as Record<string, SystemOneQuestion>);
  const decisions = named.map(([name, q]) => {
    if (q.type === "noul") return { type: "predicate", name, instructions: q.instructions };
    if (q.type === "choice") {
      const choices = Object.entries(q.criteria).map(([value, d]) =>
        d === null ? { value } : { value, description: d },
      );
      return { type: "choice", name, instructions: q.instructions, choices };
    }
    return { type: "score", name, instructions: q.instructions, levels: q.criteria.map((label) => ({ label })) };
  });
  return {
    systemone: JSON.stringify({ model: "localdecider", state: STATE, questions: Object.fromEntries(named) }),
    decisions: JSON.stringify({ model: "localdecider", input: STATE, questions: decisions }),
  };
}

async function timed(url: string, body: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
  await res.arrayBuffer();
  const elapsed = performance.now() - started;
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
  return elapsed;
}

/** Microseconds per request of each dialect's edge (schema, task, answers), the rest being the same. */
function edgeMicros(n: number): { so: number; de: number } {
  const { systemone, decisions } = bodies(n);
  const soBody = JSON.parse(systemone) as unknown;
  const deBody = JSON.parse(decisions) as unknown;
  const accepts = { images: false, runs: "bench" };
  const task = systemOneTask(SystemOneRequest.parse(soBody));
  const result: TaskResult = {
    model: "m",
    outcomes: task.questions.map((q) => ({ distribution: q.options.map(() => 1 / q.options.length) })),
    usage: { input: 100, cached: 0, output: 1 },
  };
  const so = () => {
    const body = SystemOneRequest.parse(soBody);
    systemOneTask(body);
    return systemOneResponse(body, result);
  };
  const de = () => {
    const body = DecisionCreateRequest.parse(deBody);
    const { names } = decisionsTask(body, accepts);
    return decisionsResponse(body, names, result);
  };
  const rounds = { so: [] as number[], de: [] as number[] };
  const per = Math.max(20, Math.floor(4000 / n));
  for (let r = 0; r < 21; r++) {
    for (const [name, fn] of r % 2 === 0
      ? ([
          ["so", so],
          ["de", de],
        ] as const)
      : ([
          ["de", de],
          ["so", so],
        ] as const)) {
      const started = performance.now();
      for (let i = 0; i < per; i++) fn();
      rounds[name].push(((performance.now() - started) * 1000) / per);
    }
  }
  return { so: quantile(rounds.so, 0.5), de: quantile(rounds.de, 0.5) };
}

async function main(): Promise<void> {
  console.log("the edge alone, in this process: microseconds per request (median of 21 rounds)");
  console.log("| questions | /v1/systemone edge | /v1/decisions edge | added |");
  console.log("|---|---|---|---|");
  let worstEdge = Number.NEGATIVE_INFINITY;
  for (const n of SIZES) {
    const { so, de } = edgeMicros(n);
    worstEdge = Math.max(worstEdge, de - so);
    console.log(`| ${n} | ${so.toFixed(1)} | ${de.toFixed(1)} | ${(de - so).toFixed(1)} |`);
  }
  const met = worstEdge / 1000 <= GOAL_MS;
  console.log(
    `worst added by the edge: ${(worstEdge / 1000).toFixed(4)} ms (goal: at most ${GOAL_MS} ms) -> ${met ? "met" : "NOT met"}\n`,
  );
  const fake = await startFakeUpstream(0, "vllm");
  const decider = await deciderOnFake(fake.url);
  const rows: string[] = [];
  let worst = Number.NEGATIVE_INFINITY;
  try {
    for (const n of SIZES) {
      const { systemone, decisions } = bodies(n);
      const so = `${decider.url}/v1/systemone`;
      const de = `${decider.url}/v1/decisions`;
      // The same upstream work: as many calls for one request in either dialect.
      await fake.reset();
      await timed(so, systemone);
      const soCalls = (await fake.stats()).calls;
      await fake.reset();
      await timed(de, decisions);
      const deCalls = (await fake.stats()).calls;
      if (soCalls !== deCalls)
        throw new Error(`n=${n}: ${soCalls} upstream calls for /v1/systemone, ${deCalls} for /v1/decisions`);
      for (let i = 0; i < WARMUP; i++) {
        await timed(so, systemone);
        await timed(de, decisions);
      }
      const times = { so: [] as number[], de: [] as number[] };
      for (let i = 0; i < REQUESTS; i++) {
        if (i % 2 === 0) {
          times.so.push(await timed(so, systemone));
          times.de.push(await timed(de, decisions));
        } else {
          times.de.push(await timed(de, decisions));
          times.so.push(await timed(so, systemone));
        }
      }
      const p50so = quantile(times.so, 0.5);
      const p50de = quantile(times.de, 0.5);
      const added = p50de - p50so;
      worst = Math.max(worst, added);
      rows.push(
        `| ${n} | ${soCalls} | ${p50so.toFixed(3)} | ${p50de.toFixed(3)} | ${added.toFixed(3)} | ${(p50de / p50so).toFixed(3)} |`,
      );
    }
  } finally {
    decider.child.kill();
    await fake.stop();
  }
  console.log(`/v1/decisions vs /v1/systemone, ${REQUESTS} requests per size per dialect, p50 in ms`);
  console.log("| questions | upstream calls | /v1/systemone | /v1/decisions | added | ratio |");
  console.log("|---|---|---|---|---|---|");
  for (const row of rows) console.log(row);
  // Over HTTP both dialects wait on the same sockets and processes: on a loaded machine their p50s differ by more
  // than the edge costs, either way, so the goal is judged on the edge above, the only code that differs.
  console.log(`largest p50 difference over HTTP: ${worst.toFixed(3)} ms (the noise of the machine included)`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
