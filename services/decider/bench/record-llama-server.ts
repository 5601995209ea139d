/**
 * Records what a real llama-server answers the decider as it is now (its prompt version, its probes) into
 * test/fixtures/llama-server-b10573/exchanges/: every HTTP exchange between a decider process and the server
 * passes a recording proxy and is written as `<scenario>-NN.json`, `{ method, url, request, status, response }`
 * (request and response as raw strings). The old exchanges are removed first; probes/ (hand-written calls) stay.
 *
 * Scenarios, on the engine tests' tiny answering model (random weights, the real Qwen2.5 tokenizer):
 * - `check-chat`, `check-packed`: each decider's start-up check (kind, slots, the template's seam);
 * - `mixed`: 3 questions (yes/no with criteria, a choice of 3, a score 0-3), one chat call each;
 * - `nouls`: 16 yes/no questions, one chat call each;
 * - `chunks`: a 30-label choice: two chunks of at most 20 labels, then the final round;
 * - `mixed-packed`: the 3 questions as the decider sends them by default (/apply-template, /tokenize, one
 *   /completion with the three probes);
 * - `too-long`: a state longer than the slot's context (HTTP 400);
 * - `overflow`: two requests at once whose prompts each fit a slot but not the shared context together
 *   (`--kv-unified`: HTTP 500 "Context size has been exceeded.", when the server answers so).
 *
 * Needs LLAMA_SERVER_BIN (never part of the repository).
 * Run: LLAMA_SERVER_BIN=… pnpm --filter @localdecider/decider record:llama-server
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { PROMPT_VERSION } from "../src/decide/prompt";
import { ANSWER_MODEL } from "../test/engine/answer-model";
import { llamaServerBackend, stopProcess } from "../test/engine/backends";
import { tinyModelPath } from "../test/engine/tiny-model";
import { startDecider } from "./processes";

const BIN = process.env.LLAMA_SERVER_BIN;
const OUT = path.resolve(__dirname, "../../../test/fixtures/llama-server-b10573/exchanges");

let scenario = "check-chat";
const counts = new Map<string, number>();

/** A proxy to `target` that writes every exchange under the current scenario's name. */
async function recordingProxy(target: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const request = Buffer.concat(chunks).toString("utf8");
    const name = scenario;
    const upstream = await fetch(`${target}${req.url}`, {
      method: req.method,
      headers: { "content-type": req.headers["content-type"] ?? "application/json" },
      ...(req.method === "GET" || req.method === "HEAD" ? {} : { body: request }),
    });
    const response = await upstream.text();
    const n = (counts.get(name) ?? 0) + 1;
    counts.set(name, n);
    const file = path.join(OUT, `${name}-${String(n).padStart(2, "0")}.json`);
    const exchange = { method: req.method, url: req.url, request, status: upstream.status, response };
    writeFileSync(file, `${JSON.stringify(exchange, null, 2)}\n`);
    res.writeHead(upstream.status, { "content-type": upstream.headers.get("content-type") ?? "application/json" });
    res.end(response);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const MIXED = {
  bug: {
    type: "noul",
    instructions: "Is this a bug fix?",
    criteria: { true: "it fixes a defect", false: "anything else" },
  },
  area: { type: "choice", instructions: "Which area?", criteria: { api: "handlers", db: "storage", docs: null } },
  risk: { type: "score", instructions: "How risky?", criteria: ["trivial", "low", "medium", "high"] },
};
const STATE = { diff: "--- a/src/handler.ts\n+++ b/src/handler.ts\n-  if (user) {\n+  if (user !== null) {" };

async function decide(url: string, state: unknown, questions: Record<string, unknown>): Promise<number> {
  const res = await fetch(`${url}/v1/systemone`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "localdecider", state, questions }),
  });
  await res.text();
  return res.status;
}

/** A diff of about `tokens` tokens (12 a line). */
const longDiff = (seed: number, tokens: number) => ({
  diff: Array.from(
    { length: Math.ceil(tokens / 12) },
    (_, i) => `+  const v${i} = f(${(seed * 7 + i) % 97}, "s${seed}");`,
  ).join("\n"),
});

async function main(): Promise<void> {
  if (BIN === undefined) throw new Error("set LLAMA_SERVER_BIN to a llama-server binary");
  mkdirSync(OUT, { recursive: true });
  for (const file of readdirSync(OUT)) rmSync(path.join(OUT, file));
  const model = tinyModelPath(ANSWER_MODEL);
  const statuses: Record<string, number[]> = {};

  const one = await llamaServerBackend(BIN, model, ["--parallel", "1", "-c", "4096"]);
  const proxy = await recordingProxy(one.url);
  try {
    const env = {
      LOCALDECIDER_UPSTREAM: proxy.url,
      LOCALDECIDER_UPSTREAM_MODEL: one.model,
      LOCALDECIDER_MAX_INFLIGHT: "1",
    };
    scenario = "check-chat";
    const chat = await startDecider({ ...env, LOCALDECIDER_PACK_PROMPTS: "false" });
    try {
      scenario = "mixed";
      statuses.mixed = [await decide(chat.url, STATE, MIXED)];
      scenario = "nouls";
      const nouls = Object.fromEntries(
        Array.from({ length: 16 }, (_, i) => [`line${i}`, { type: "noul", instructions: `Is line ${i} changed?` }]),
      );
      statuses.nouls = [await decide(chat.url, STATE, nouls)];
      scenario = "chunks";
      const labels = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`label${i}`, `the ${i}th area`]));
      statuses.chunks = [
        await decide(chat.url, STATE, { big: { type: "choice", instructions: "Which area?", criteria: labels } }),
      ];
      scenario = "too-long";
      statuses["too-long"] = [await decide(chat.url, longDiff(1, 6000), { bug: MIXED.bug })];
    } finally {
      await stopProcess(chat.child);
    }
    scenario = "check-packed";
    const packed = await startDecider(env);
    try {
      scenario = "mixed-packed";
      statuses["mixed-packed"] = [await decide(packed.url, STATE, MIXED)];
    } finally {
      await stopProcess(packed.child);
    }
  } finally {
    await proxy.close();
    await one.stop();
  }

  const two = await llamaServerBackend(BIN, model, ["--parallel", "2", "-c", "4096", "--kv-unified"]);
  const proxy2 = await recordingProxy(two.url);
  try {
    scenario = "check-overflow";
    const env = {
      LOCALDECIDER_UPSTREAM: proxy2.url,
      LOCALDECIDER_UPSTREAM_MODEL: two.model,
      LOCALDECIDER_MAX_INFLIGHT: "2",
      LOCALDECIDER_PACK_PROMPTS: "false",
    };
    const d = await startDecider(env);
    try {
      scenario = "overflow";
      statuses.overflow = await Promise.all([
        decide(d.url, longDiff(2, 2600), { bug: MIXED.bug }),
        decide(d.url, longDiff(3, 2600), { bug: MIXED.bug }),
      ]);
    } finally {
      await stopProcess(d.child);
    }
  } finally {
    await proxy2.close();
    await two.stop();
  }
  process.stdout.write(
    `recorded ${[...counts.values()].reduce((a, b) => a + b, 0)} exchanges (prompt version ${PROMPT_VERSION}) into ${OUT}\n` +
      `${[...counts.entries()].map(([name, n]) => `  ${name}: ${n}`).join("\n")}\n` +
      `decider statuses: ${JSON.stringify(statuses)}\n`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
