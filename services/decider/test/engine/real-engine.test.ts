import type { TextQuestion } from "@localdecider/contracts/decider";
import request from "supertest";
import { argmax } from "../../src/decide/math";
import { type DeciderUnderTest, deciderFor, sum } from "../helpers";
import { ANSWER_MODEL } from "./answer-model";
import { type AnswerBackend, engineBackend, llamaServerBackend } from "./backends";
import { openEngine, type TinyEngine } from "./engine";
import { chooser, expected, outcomeOf, probedName, QUESTIONS, RecordingUpstream, STATE } from "./expectations";
import { tinyModelPath } from "./tiny-model";

/**
 * The decider against a real llama.cpp engine: by default node-llama-cpp behind the llama.cpp-shaped test
 * upstream; with LLAMA_SERVER_BIN (`pnpm test:llama-server`), a real llama-server binary. Either way the
 * expected answers come from the engine itself: its full next-token distribution at the prompt the
 * server evaluated.
 */

// Loading the engine and reading the whole vocabulary's distribution take seconds, not milliseconds.
jest.setTimeout(60_000);

/**
 * How closely an answer follows the documented rule applied to the engine's own numbers. The test
 * upstream reports the engine's float64 logprobs (bit-identical on repeat); llama-server reports float32
 * ones and batches the calls of its slots together, which moves answers by ~2e-8.
 */
const SAME = process.env.LLAMA_SERVER_BIN ? 1e-6 : 1e-12;

describe(`the decider against a real llama.cpp engine (${process.env.LLAMA_SERVER_BIN ? "llama-server" : "node-llama-cpp"})`, () => {
  let engine: TinyEngine;
  let backend: AnswerBackend;
  let recorder: RecordingUpstream;
  let d: DeciderUnderTest;

  beforeAll(async () => {
    const model = tinyModelPath(ANSWER_MODEL);
    engine = await openEngine(model);
    backend = process.env.LLAMA_SERVER_BIN
      ? // Flash attention off and no prompt cache: the server then evaluates each prompt in one batch as the
        // engine does, so the two agree to float precision (the describe below runs it as deployed).
        await llamaServerBackend(process.env.LLAMA_SERVER_BIN, model, ["-fa", "off", "--no-cache-prompt"])
      : await engineBackend(engine);
    d = deciderFor(backend.url, {
      upstreamModel: backend.model,
      maxInflight: 2,
      wrapUpstream: (u) => (recorder = new RecordingUpstream(u)),
    });
  }, 120_000);

  afterAll(async () => {
    await d?.close();
    await backend?.stop();
    await engine?.close();
  });

  const decide = (questions: Record<string, TextQuestion>, state: unknown = STATE) =>
    request(d.app).post("/v1/systemone").send({ model: "localdecider", state, questions });

  /** Each answer's distribution as the decider reported it, in outcome order. */
  const distributionOf = (question: TextQuestion, answer: Record<string, unknown>): number[] => {
    if (question.type === "noul") return [answer.noul as number, 1 - (answer.noul as number)];
    const probabilities = answer.probabilities as Record<string, number>;
    const keys =
      question.type === "score" ? question.criteria.map((_, i) => String(i)) : Object.keys(question.criteria);
    return keys.map((k) => probabilities[k] as number);
  };

  it("answers every question type with the engine's exact distribution at the value's position, within 1e-6", async () => {
    recorder.probes = [];
    const res = await decide(QUESTIONS);
    expect(res.status).toBe(200);
    expect(recorder.probes).toHaveLength(Object.keys(QUESTIONS).length);
    let agreed = 0;
    for (const probe of recorder.probes) {
      const name = probedName(probe);
      const question = QUESTIONS[name] as TextQuestion;
      const want = await expected(engine, await backend.promptOf(probe.messages), probe.reading);
      const got = distributionOf(question, res.body.answers[name]);
      // The designed bias puts every token that can begin these outcomes in the top 20.
      expect(want.absent).toBe(0);
      for (const [i, p] of got.entries()) {
        expect(Math.abs(p - (want.exact[i] as number))).toBeLessThan(1e-6);
        expect(Math.abs(p - (want.reported[i] as number))).toBeLessThan(SAME);
      }
      // Where the token the server itself wrote there begins an outcome, that outcome is the answer's
      // most probable one (the old read-out disagreed in 48 of 146 answers).
      const written = outcomeOf(recorder.emitted.get(probe) ?? "", probe.reading);
      if (written !== undefined) expect(argmax(got)).toBe(written);
      if (written !== undefined) agreed += 1;
    }
    // At both yes/no positions the greedy token is a boolean (biased highest everywhere, so at the other
    // positions it is one too, which begins none of their outcomes).
    expect(agreed).toBe(2);
    // One decoded token per question.
    expect(res.body.usage.output_tokens).toBe(Object.keys(QUESTIONS).length);
    // A real llama-server gets the prompt's probes in one /completion call (its template's seam found and
    // checked at start-up); the test upstream, which has no /apply-template, one chat call each.
    expect(recorder.packed).toStrictEqual(process.env.LLAMA_SERVER_BIN ? [Object.keys(QUESTIONS).length] : []);
  });

  it("estimates outcomes that fall outside the top 20 by the documented rule, and never answers 0 or 1", async () => {
    const labels = Array.from({ length: 12 }, (_, i) => `label${i}`);
    const questions = { wide: chooser(labels), bug: QUESTIONS.bug as TextQuestion };
    recorder.probes = [];
    const res = await decide(questions);
    expect(res.status).toBe(200);
    for (const probe of recorder.probes) {
      const name = probedName(probe);
      const want = await expected(engine, await backend.promptOf(probe.messages), probe.reading);
      const got = distributionOf(questions[name as keyof typeof questions], res.body.answers[name]);
      for (const [i, p] of got.entries()) {
        expect(Math.abs(p - (want.reported[i] as number))).toBeLessThan(SAME);
        expect(p).toBeGreaterThan(0);
        expect(p).toBeLessThan(1);
      }
    }
    // Letters past the biased ones rank below the 20th token: they are estimated, not zero.
    expect(d.observer.absent).toBeGreaterThan(0);
  });

  it("keeps questions independent: no probe holds another answer, so a repeated request answers the same", async () => {
    const first = await decide(QUESTIONS);
    // The same prompt, so the same prefix; the other questions' outcomes are never in a probe's context.
    const again = await decide(QUESTIONS);
    for (const [name, question] of Object.entries(QUESTIONS)) {
      const a = distributionOf(question, first.body.answers[name]);
      const b = distributionOf(question, again.body.answers[name]);
      for (const [i, p] of a.entries()) expect(Math.abs(p - (b[i] as number))).toBeLessThan(SAME);
    }
    for (const probe of recorder.probes) {
      const assistant = probe.messages.filter((m) => m.role === "assistant");
      expect(assistant).toHaveLength(1);
      expect(assistant[0]?.content).toMatch(/^\{"q\d+":( "| )?$/);
    }
  });

  it("answers a 255-label choice: 13 chunks and a final round, one distribution over every label", async () => {
    const labels = Array.from({ length: 255 }, (_, i) => `l${i}`);
    const res = await decide({ big: chooser(labels) });
    expect(res.status).toBe(200);
    const probabilities = Object.values(res.body.answers.big.probabilities) as number[];
    expect(probabilities).toHaveLength(255);
    expect(sum(probabilities)).toBeCloseTo(1, 9);
    for (const p of probabilities) expect(p).toBeGreaterThan(0);
  });
});
