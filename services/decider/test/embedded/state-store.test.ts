import os from "node:os";
import path from "node:path";
import type { TextQuestion } from "@localdecider/contracts/decider";
import request from "supertest";
import { embeddedBackend } from "../../src/backend";
import { partsOf } from "../../src/decide/plan";
import { probeOf } from "../../src/decide/probe";
import { renderPrompt } from "../../src/decide/prompt";
import { EmbeddedUpstream } from "../../src/engine/embedded-upstream";
import { keptStatesFor, MAX_KEPT_STATES } from "../../src/engine/llama-engine";
import { systemOneQuestion } from "../../src/routes/systemone-dialect";
import type { ProbeRequest } from "../../src/upstream/types";
import { ANSWER_MODEL } from "../engine/answer-model";
import { openEngine, type TinyEngine } from "../engine/engine";
import { probedName, RecordingUpstream } from "../engine/expectations";
import { tinyModelPath } from "../engine/tiny-model";
import { capturingLogger, type DeciderUnderTest, deciderOver } from "../helpers";
import { distributionOf, exactDistribution } from "./exact";

/**
 * The embedded engine's store of recent states (LOCALDECIDER_STATE_CACHE_MIB): more sequences than slots,
 * each keeping what it evaluated last, lent by longest prefix and else least recently used. Counted in
 * evaluated tokens (usage.input_tokens), never in time.
 */

jest.setTimeout(180_000);

const CONTEXT = 4096;
/** The tiny model's KV cache per token: 2 layers x 2 KV heads x (16 + 16) F16 values. */
const KV_BYTES_PER_TOKEN = 2 * 2 * (16 + 16) * 2;

/** A diff of about 1,300 tokens, different from its first line on for every seed. */
function diff(seed: number): { diff: string } {
  const lines = [`--- a/src/module_${seed}.ts`, `+++ b/src/module_${seed}.ts`, "@@ -1,80 +1,80 @@"];
  for (let i = 0; i < 80; i++) {
    lines.push(
      `${i % 3 === 0 ? "-" : "+"}  const value_${i} = item.compute(${(seed * 31 + i * 7) % 997}, "k-${seed}");`,
    );
  }
  return { diff: lines.join("\n") };
}

/** 16 yes/no questions, their wording told apart by `tag`. */
const sixteen = (tag: string): Record<string, TextQuestion> =>
  Object.fromEntries(
    Array.from({ length: 16 }, (_, i) => [
      `${tag}${i}`,
      { type: "noul", instructions: `Does hunk ${i} change ${tag}?`, criteria: { true: "yes", false: "no" } },
    ]),
  );

describe("the embedded engine's store of recent states", () => {
  let engine: TinyEngine;
  let embedded: EmbeddedUpstream;
  let recorder: RecordingUpstream;
  let d: DeciderUnderTest;
  const modelFile = tinyModelPath(ANSWER_MODEL);

  beforeAll(async () => {
    engine = await openEngine(modelFile, { contextSize: CONTEXT });
    embedded = new EmbeddedUpstream({
      source: { kind: "file", path: modelFile },
      modelsDir: path.join(os.tmpdir(), "unused"),
      sha256: undefined,
      // 4 MiB: four states of 4,096 tokens of 256 bytes, beside the two slots' own sequences.
      engine: { gpu: "cpu", sequences: 2, contextSize: CONTEXT, threads: 1, stateCacheMiB: 4 },
      logger: capturingLogger().logger,
    });
    await embedded.start();
    recorder = new RecordingUpstream(embedded);
    d = deciderOver(embeddedBackend(embedded, modelFile, capturingLogger().logger, recorder), { maxInflight: 2 });
  }, 120_000);

  afterAll(async () => {
    await d?.close();
    await embedded?.close();
    await engine?.close();
  });

  const decide = (seed: number, questions: Record<string, TextQuestion>) =>
    request(d.app)
      .post("/v1/systemone")
      .send({ model: "localdecider", state: diff(seed), questions });
  const stateTokens = (seed: number) => engine.tokenize(diff(seed).diff).length;

  it("keeps as many states as the cap buys, each a whole sequence's KV cache, at most MAX_KEPT_STATES", () => {
    expect(embedded.info).toMatchObject({
      sequences: 2,
      keptStates: 4,
      keptStatesBytes: 4 * CONTEXT * KV_BYTES_PER_TOKEN,
    });
    expect(keptStatesFor(4, CONTEXT, KV_BYTES_PER_TOKEN)).toBe(4);
    expect(keptStatesFor(3.99, CONTEXT, KV_BYTES_PER_TOKEN)).toBe(3);
    expect(keptStatesFor(0, CONTEXT, KV_BYTES_PER_TOKEN)).toBe(0);
    expect(keptStatesFor(4, CONTEXT, undefined)).toBe(0);
    expect(keptStatesFor(1_000_000, CONTEXT, KV_BYTES_PER_TOKEN)).toBe(MAX_KEPT_STATES);
  });

  it("a state asked again after four others re-reads at most 10 % of it, answers exactly, and says what it reused", async () => {
    const first = await decide(1, sixteen("alpha"));
    expect(first.status).toBe(200);
    for (const seed of [2, 3, 4, 5]) expect((await decide(seed, sixteen(`other${seed}`))).status).toBe(200);
    recorder.probes = [];
    // 16 new questions about the first state: only they (and the probes' own tokens) are evaluated.
    const again = await decide(1, sixteen("beta"));
    expect(again.status).toBe(200);
    const state = stateTokens(1);
    expect(state).toBeGreaterThan(1000);
    // Both requests evaluate 16 questions of the same shape; the first also the state, the second at most 10 % of it.
    expect(first.body.usage.input_tokens - again.body.usage.input_tokens).toBeGreaterThanOrEqual(0.9 * state);
    // Every probe read the state from the sequence: 16 times its tokens at least, reported in the header.
    expect(Number(again.headers["x-cached-tokens"])).toBeGreaterThanOrEqual(16 * state);
    expect(Number(first.headers["x-cached-tokens"])).toBeLessThan(Number(again.headers["x-cached-tokens"]));
    // The answers are still the engine's exact distribution.
    for (const probe of recorder.probes) {
      const name = probedName(probe);
      const got = distributionOf(sixteen("beta")[name] as TextQuestion, again.body.answers[name]);
      const want = await exactDistribution(engine, probe);
      for (const [i, p] of want.entries()) expect(Math.abs((got[i] as number) - p)).toBeLessThan(1e-6);
    }
  });

  it("forgets the least recently used state: after six others (two slots and four kept) it is read whole again", async () => {
    expect((await decide(10, sixteen("alpha"))).status).toBe(200);
    for (const seed of [11, 12, 13, 14, 15, 16]) expect((await decide(seed, sixteen(`other${seed}`))).status).toBe(200);
    const again = await decide(10, sixteen("beta"));
    expect(again.status).toBe(200);
    expect(again.body.usage.input_tokens).toBeGreaterThan(stateTokens(10));
  });

  it("with a cache key, reuses only a state kept under the same key, and answers the same either way", async () => {
    const parts = Object.entries(sixteen("gamma")).flatMap(([name, q]) => partsOf(systemOneQuestion(name, q)));
    const shared = renderPrompt(diff(20), parts);
    const probes: ProbeRequest[] = parts.map((part, i) => probeOf(shared, part, i));
    const ask = (cacheKey: string | undefined) =>
      embedded.probeMany(probes, { signal: new AbortController().signal, slot: 0, cacheKey });
    const state = stateTokens(20);
    const alice = await ask("alice");
    expect(alice[0]?.usage.input).toBeGreaterThan(state);
    // Another key, the very same prompt: nothing of alice's is reused.
    const bob = await ask("bob");
    expect(bob[0]?.usage).toMatchObject({ input: alice[0]?.usage.input, cached: 0 });
    // No key: not alice's either (at most the system message, kept by the requests without a key before).
    const none = await ask(undefined);
    expect(none[0]?.usage.input).toBeGreaterThan(state);
    // alice again: her state is found, at most 10 % of it read again.
    const again = await ask("alice");
    expect(again[0]?.usage.input).toBeLessThanOrEqual(0.1 * state);
    expect(again[0]?.usage.cached).toBeGreaterThanOrEqual(state);
    // Bit for bit the same scores whatever was reused.
    const scores = (results: typeof alice) => results.map((r) => (r as { scores: number[] }).scores);
    expect(scores(bob)).toStrictEqual(scores(alice));
    expect(scores(none)).toStrictEqual(scores(alice));
    expect(scores(again)).toStrictEqual(scores(alice));
  });
});
