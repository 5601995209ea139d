import type { Question } from "@localdecider/contracts";
import request from "supertest";
import { deciderFor } from "../helpers";
import { ANSWER_MODEL } from "./answer-model";
import { llamaServerBackend } from "./backends";
import { openEngine, type TinyEngine } from "./engine";
import { expected, probedName, QUESTIONS, RecordingUpstream, STATE } from "./expectations";
import { tinyModelPath } from "./tiny-model";

/**
 * Only in `pnpm test:llama-server` (the default jest config leaves *.llama-server.test.ts out): a real
 * llama-server binary from LLAMA_SERVER_BIN, run as the README deploys it, and its failure modes.
 */
jest.setTimeout(120_000);

const bin = process.env.LLAMA_SERVER_BIN;
if (bin === undefined) throw new Error("set LLAMA_SERVER_BIN to a llama-server binary to run this suite");

describe("a real llama-server as deployed", () => {
  let engine: TinyEngine;
  let model: string;

  beforeAll(async () => {
    model = tinyModelPath(ANSWER_MODEL);
    engine = await openEngine(model);
  });
  afterAll(async () => {
    await engine?.close();
  });

  it("with its prompt cache and flash attention on, answers within 1e-3 of the engine's distribution", async () => {
    const backend = await llamaServerBackend(bin as string, model);
    let recorder: RecordingUpstream | undefined;
    const d = deciderFor(backend.url, {
      upstreamModel: backend.model,
      wrapUpstream: (u) => {
        recorder = new RecordingUpstream(u);
        return recorder;
      },
    });
    try {
      const res = await request(d.app)
        .post("/v1/systemone")
        .send({ model: "localdecider", state: STATE, questions: QUESTIONS });
      expect(res.status).toBe(200);
      for (const probe of recorder?.probes ?? []) {
        const name = probedName(probe);
        const want = await expected(engine, await backend.promptOf(probe.messages), probe.reading);
        const answer = res.body.answers[name];
        const question = QUESTIONS[name] as Question;
        const got =
          question.type === "noul"
            ? [answer.noul, 1 - answer.noul]
            : Object.values(answer.probabilities as Record<string, number>);
        for (const [i, p] of got.entries()) expect(Math.abs(p - (want.exact[i] as number))).toBeLessThan(1e-3);
      }
      // The server reports the shared prefix as cached after the prompt's first call.
      expect(res.body.usage.input_tokens).toBeLessThan(5 * 300);
    } finally {
      await d.close();
      await backend.stop();
    }
  });

  it("a model name the server does not list makes /ready and decisions 503 'inference backend returned HTTP 404…'", async () => {
    const backend = await llamaServerBackend(bin as string, model);
    const d = deciderFor(backend.url, { upstreamModel: "qwen2.5-1.5b-instruct" });
    try {
      const ready = await request(d.app).get("/ready");
      expect(ready.status).toBe(503);
      expect(ready.body.error).toBe(
        `inference backend returned HTTP 404: it does not serve model "qwen2.5-1.5b-instruct"; it lists: ${backend.model}`,
      );
      const res = await request(d.app)
        .post("/v1/systemone")
        .send({ model: "localdecider", state: STATE, questions: { bug: QUESTIONS.bug } });
      expect(res.status).toBe(503);
      expect(res.body).toStrictEqual({ error: ready.body.error, code: "model_unavailable" });
    } finally {
      await d.close();
      await backend.stop();
    }
  });

  it("a prompt longer than the context is a 400 context_too_long", async () => {
    const backend = await llamaServerBackend(bin as string, model, ["-c", "512", "--parallel", "1"]);
    const d = deciderFor(backend.url, { upstreamModel: backend.model });
    try {
      const res = await request(d.app)
        .post("/v1/systemone")
        .send({ model: "localdecider", state: "word ".repeat(2000), questions: { bug: QUESTIONS.bug } });
      expect(res.status).toBe(400);
      expect(res.body).toStrictEqual({
        error:
          "the request does not fit the model's context: send a shorter state, or fewer questions per prompt (LOCALDECIDER_QUESTIONS_PER_CALL), or give the model a larger context (the embedded engine: LOCALDECIDER_CONTEXT_SIZE)",
        code: "context_too_long",
      });
    } finally {
      await d.close();
      await backend.stop();
    }
  });
});
