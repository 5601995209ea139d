import os from "node:os";
import path from "node:path";
import type { TextQuestion } from "@localdecider/contracts/decider";
import OpenAI from "openai7";
import request from "supertest";
import { embeddedBackend } from "../../src/backend";
import { EmbeddedUpstream } from "../../src/engine/embedded-upstream";
import { ANSWER_MODEL } from "../engine/answer-model";
import { RecordingUpstream } from "../engine/expectations";
import { tinyModelPath } from "../engine/tiny-model";
import { capturingLogger, type DeciderUnderTest, deciderOver, listen } from "../helpers";

jest.setTimeout(120_000);

/**
 * `POST /v1/decisions` through openai@7.59.0 on the embedded engine (a real tiny GGUF in node-llama-cpp): the
 * same questions asked in both dialects render the same prompts, so the engine's exact distributions come back
 * the same, as typed answers in order.
 */
describe("POST /v1/decisions on the embedded engine", () => {
  let embedded: EmbeddedUpstream;
  let recorder: RecordingUpstream;
  let d: DeciderUnderTest;
  let server: { url: string; close: () => Promise<void> };
  const modelFile = tinyModelPath(ANSWER_MODEL);

  beforeAll(async () => {
    embedded = new EmbeddedUpstream({
      source: { kind: "file", path: modelFile },
      modelsDir: path.join(os.tmpdir(), "unused"),
      sha256: undefined,
      engine: { gpu: "cpu", sequences: 2, contextSize: 4096, threads: 1 },
      logger: capturingLogger().logger,
    });
    await embedded.start();
    recorder = new RecordingUpstream(embedded);
    d = deciderOver(embeddedBackend(embedded, modelFile, capturingLogger().logger, recorder), { maxInflight: 2 });
    server = await listen(d);
  }, 120_000);

  afterAll(async () => {
    await server?.close();
    await d?.close();
    await embedded?.close();
  });

  const STATE = "--- a/src/handler.ts\n+++ b/src/handler.ts\n-  if (user) {\n+  if (user !== null) {";

  it("answers as /v1/systemone does for the same questions: the engine's distributions, typed and in order", async () => {
    const client = new OpenAI({ apiKey: "k", baseURL: `${server.url}/v1`, maxRetries: 0 });
    const decision = await client.decisions.create({
      model: "localdecider",
      input: STATE,
      questions: [
        { type: "predicate", name: "breaking", instructions: "Does it break the API?" },
        {
          type: "choice",
          name: "area",
          instructions: "Which area?",
          choices: [{ value: "api", description: "the API" }, { value: "db" }, { value: "docs" }],
        },
        {
          type: "score",
          name: "risk",
          instructions: "How risky?",
          levels: ["none", "low", "medium", "high"].map((label) => ({ label })),
        },
      ],
    });
    const questions: Record<string, TextQuestion> = {
      breaking: { type: "noul", instructions: "Does it break the API?" },
      area: { type: "choice", instructions: "Which area?", criteria: { api: "the API", db: null, docs: null } },
      risk: { type: "score", instructions: "How risky?", criteria: ["none", "low", "medium", "high"] },
    };
    const res = await request(d.app).post("/v1/systemone").send({ model: "localdecider", state: STATE, questions });
    expect(res.status).toBe(200);
    const { breaking, area, risk } = res.body.answers;
    const [p, c, s] = decision.answers;
    if (p?.type !== "predicate" || c?.type !== "choice" || s?.type !== "score") throw new Error("types");
    expect(p.probability).toBeCloseTo(breaking.noul, 9);
    expect(c.probabilities.map((x) => x.value)).toStrictEqual(["api", "db", "docs"]);
    for (const x of c.probabilities) expect(x.probability).toBeCloseTo(area.probabilities[x.value as string], 9);
    expect(c.choice).toBe(area.choice);
    expect(c.confidence).toBeCloseTo(area.confidence, 9);
    for (const x of s.probabilities) expect(x.probability).toBeCloseTo(risk.probabilities[String(x.value)], 9);
    expect(s.score).toBeCloseTo(risk.score, 9);
    // The engine reads the outcomes' probabilities and counts their tokens as input; it generates none.
    expect(decision.usage.output_tokens).toBe(0);
    expect(decision.usage.input_tokens).toBeGreaterThan(0);
  });

  it("refuses an image part: the embedded engine takes text only", async () => {
    const res = await request(d.app)
      .post("/v1/decisions")
      .send({
        model: "localdecider",
        input: [{ role: "user", content: [{ type: "input_image", image_url: "data:image/png;base64,iVBORw0KGgo=" }] }],
        questions: [{ type: "predicate", instructions: "?" }],
      });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ param: "input[0].content[0]", type: "invalid_request_error" });
    expect(res.body.error.message).toMatch(/embedded engine/);
  });
});
