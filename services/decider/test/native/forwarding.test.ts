import { applyTemperature, type CalibrationFile, DECIDER_ERROR_STATUS } from "@localdecider/contracts/decider";
import { choice, noul, score, TypeSafeClient } from "@typesafe-ai/sdk";
import request from "supertest";
import { Calibration } from "../../src/calibration/calibration";
import { choiceConfidence, scoreStats } from "../../src/decide/math";
import { recombineChunks } from "../../src/decide/recombine";
import { listen } from "../helpers";
import { mixedQuestions, type NativeHarness, nativeHarness, questionsOfCalls, wideChoice } from "./harness";

/**
 * The decider in front of a server that answers System One itself (test/fake-systemone, llama.cpp's published
 * contract): questions forwarded in calls of the plan's size under the client's names, the server's
 * probabilities returned as they are, big choices split and recombined, answers and usage merged.
 */
describe("forwarding to a native System One server", () => {
  let h: NativeHarness;
  afterEach(async () => {
    await h.close();
  });

  const post = (body: Record<string, unknown>) =>
    request(h.app)
      .post("/v1/systemone")
      .send({ model: "localdecider", state: "A ticket.", ...body });

  it("through the official SDK, answers with exactly the server's probabilities (calibration off), in one call", async () => {
    h = await nativeHarness();
    const server = await listen(h);
    try {
      h.fake.script = (q): Record<string, number> =>
        q.key === "billing"
          ? { true: 0.37, false: 0.63 }
          : q.key === "tone"
            ? { calm: 0.1, angry: 0.7, sad: 0.2 }
            : { "0": 0.05, "1": 0.15, "2": 0.5, "3": 0.3 };
      const client = new TypeSafeClient({
        apiKey: "k",
        baseURL: server.url,
        retry: { maxRetries: 0 },
        logLevel: "off",
      });
      const result = await client.systemOne({
        state: "I was charged twice. Please help!",
        questions: {
          billing: noul("Is this about billing?"),
          tone: choice("What is the tone?", { calm: null, angry: "shouting", sad: null }),
          urgency: score("How urgent?", ["not", "somewhat", "very", "now"]),
        },
      });
      const reported = Object.fromEntries(h.fake.reported.map((r) => [r.key, r.probabilities]));
      expect(result.model).toBe("localdecider-0.1.0/test-model");
      expect(result.answers.billing.noul).toBe(reported.billing?.true);
      expect(result.answers.tone.probabilities).toStrictEqual(reported.tone);
      expect(result.answers.urgency.probabilities).toStrictEqual(reported.urgency);
      // Derived by the decider from those probabilities, by the published formulas.
      expect(result.answers.tone.choice).toBe("angry");
      expect(result.answers.tone.confidence).toBe(choiceConfidence(Object.values(reported.tone as object)));
      const stats = scoreStats(Object.values(reported.urgency as Record<string, number>));
      expect(result.answers.urgency.score).toBe(stats.score);
      expect(result.answers.urgency.confidence).toBe(stats.confidence);
      expect(result.answers.urgency.legend).toStrictEqual({ "0": "not", "1": "somewhat", "2": "very", "3": "now" });
      // One call: the state as the client sent it, each question under its own name, the configured model.
      expect(h.fake.requests).toHaveLength(1);
      const sent = h.fake.requests[0] as Record<string, unknown>;
      expect(sent.model).toBe("test-model");
      expect(sent.state).toBe("I was charged twice. Please help!");
      expect(Object.keys(sent.questions as object)).toStrictEqual(["billing", "tone", "urgency"]);
      expect((sent.questions as Record<string, unknown>).tone).toStrictEqual({
        type: "choice",
        instructions: "What is the tone?",
        criteria: { calm: null, angry: "shouting", sad: null },
      });
      // llama.cpp reports output_tokens 0; the usage is the server's.
      expect(result.usage.output_tokens).toBe(0);
      expect(result.usage.input_tokens).toBeGreaterThan(0);
    } finally {
      await server.close();
    }
  });

  it("sends calls of at most QUESTIONS_PER_CALL questions and OUTCOMES_PER_CALL outcomes, and merges answers and usage", async () => {
    h = await nativeHarness({ questionsPerCall: 16, outcomesPerCall: 40 });
    const questions = mixedQuestions(40);
    const res = await post({ questions });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body.answers)).toStrictEqual(Object.keys(questions));
    const calls = questionsOfCalls(h.fake);
    // noul 2, choice 3, score 4 outcomes: 9 per three questions, so 40 outcomes hold 13 questions.
    expect(calls.map((c) => Object.keys(c).length)).toStrictEqual([13, 13, 13, 1]);
    for (const call of calls) {
      const outcomes = Object.values(call).reduce(
        (sum: number, q) =>
          sum + (Array.isArray(q.criteria) ? q.criteria.length : q.criteria ? Object.keys(q.criteria).length : 2),
        0,
      );
      expect(outcomes).toBeLessThanOrEqual(40);
    }
    expect(calls.flatMap((c) => Object.keys(c))).toStrictEqual(Object.keys(questions));
    // Every answer is the server's; the usage is the sum over the calls.
    for (const { key, probabilities } of h.fake.reported) {
      const answer = res.body.answers[key];
      if (answer.type === "noul") expect(answer.noul).toBe(probabilities.true);
      else expect(answer.probabilities).toStrictEqual(probabilities);
    }
    expect(res.body.usage.output_tokens).toBe(0);
    expect(res.body.usage.input_tokens).toBeGreaterThan(0);
  });

  it("splits a 60-label choice for an openjev model (52 options) into chunks, and recombines them by the chat path's rule", async () => {
    h = await nativeHarness({ upstreamModel: "openjev-27b", setup: (fake) => (fake.optionLimit = 52) });
    const criteria = wideChoice(60);
    const res = await post({ questions: { pick: { type: "choice", instructions: "Which?", criteria } } });
    expect(res.status).toBe(200);
    // Two chunks (52 and 8 labels), each in a call of its own (both under the client's name), then the final
    // round among their leaders. No call was refused: the documented limit was used from the start.
    const calls = questionsOfCalls(h.fake).map((c) => Object.keys((c.pick as { criteria: object }).criteria));
    expect(calls.map((labels) => labels.length)).toStrictEqual([52, 8, 2]);
    const [first, second, final] = h.fake.reported.map((r) => r.probabilities) as Record<string, number>[];
    const chunkA = Object.keys(criteria)
      .slice(0, 52)
      .map((l) => first?.[l] as number);
    const chunkB = Object.keys(criteria)
      .slice(52)
      .map((l) => second?.[l] as number);
    const expected = recombineChunks([chunkA, chunkB], Object.values(final as object)).flat();
    expect(Object.values(res.body.answers.pick.probabilities)).toStrictEqual(expected);
    expect(Object.keys(res.body.answers.pick.probabilities)).toStrictEqual(Object.keys(criteria));
  });

  it("learns a smaller option limit from the server's 422, splits the request again, and plans later ones with it", async () => {
    // A model whose name tells nothing (255 assumed) on a server that takes 52.
    h = await nativeHarness({ setup: (fake) => (fake.optionLimit = 52) });
    const body = { questions: { pick: { type: "choice", instructions: "Which?", criteria: wideChoice(60) } } };
    const res = await post(body);
    expect(res.status).toBe(200);
    const sizes = () =>
      questionsOfCalls(h.fake).map((c) => Object.keys((c.pick as { criteria: object }).criteria).length);
    // The whole choice was refused once (422, "at most 52"), then chunks of 52 and 8 and the final round.
    expect(sizes()).toStrictEqual([60, 52, 8, 2]);
    expect(Object.keys(res.body.answers.pick.probabilities)).toHaveLength(60);
    expect((await post(body)).status).toBe(200);
    expect(sizes().slice(4)).toStrictEqual([52, 8, 2]);
  });

  it("refuses a choice that could not be split into one round of chunks under a very small option limit", async () => {
    h = await nativeHarness({ setup: (fake) => (fake.optionLimit = 7) });
    const res = await post({
      questions: { pick: { type: "choice", instructions: "Which?", criteria: wideChoice(60) } },
    });
    expect(res.status).toBe(DECIDER_ERROR_STATUS.invalid_request);
    expect(res.body).toStrictEqual({
      error:
        'the model server takes at most 7 options per question, so the choice "pick" of 60 labels cannot be split into chunks whose leaders fit one final round; send at most 49 labels',
      code: "invalid_request",
    });
  });

  it("passes on no field the server added: answers hold exactly their type's keys", async () => {
    h = await nativeHarness({ setup: (fake) => (fake.extraFields = true) });
    const res = await post({ questions: mixedQuestions(3) });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toStrictEqual(["answers", "model", "usage"]);
    expect(Object.keys(res.body.answers.q0).sort()).toStrictEqual(["noul", "type"]);
    expect(Object.keys(res.body.answers.q1).sort()).toStrictEqual(["choice", "confidence", "probabilities", "type"]);
    expect(Object.keys(res.body.answers.q2).sort()).toStrictEqual([
      "confidence",
      "legend",
      "probabilities",
      "score",
      "type",
    ]);
  });

  it("applies the calibration's temperatures on top of the server's probabilities", async () => {
    const file: CalibrationFile = {
      format: "localdecider-calibration",
      version: 1,
      method: "temperature",
      fitted_at: "2026-11-24T10:00:00.000Z",
      data: { records: 10, answers: 30 },
      types: { noul: { temperature: 2, count: 10 }, choice: { temperature: 0.5, count: 10 } },
      names: {},
    };
    h = await nativeHarness({ calibration: new Calibration(file) });
    h.fake.script = (q): Record<string, number> =>
      q.type === "noul" ? { true: 0.9, false: 0.1 } : { a: 0.5, b: 0.3, c: 0.2 };
    const res = await post({ questions: mixedQuestions(2) });
    expect(res.status).toBe(200);
    const noulP = h.fake.reported[0]?.probabilities.true as number;
    expect(res.body.answers.q0.noul).toBe(applyTemperature([noulP, 1 - noulP], 2)[0]);
    const choiceP = Object.values(h.fake.reported[1]?.probabilities as object) as number[];
    expect(Object.values(res.body.answers.q1.probabilities)).toStrictEqual(applyTemperature(choiceP, 0.5));
  });

  it("routes a client's model to the decision model of that name a router lists; our own names keep meaning the configured one", async () => {
    h = await nativeHarness({
      upstreamModel: "openjev-small",
      models: ["openjev-small", "laya-421m"],
      setup: (fake) => {
        fake.router = true;
        fake.chatModels = ["qwen2.5-chat"];
      },
    });
    const models = await request(h.app).get("/v1/models").expect(200);
    expect(models.body.models.map((m: { name: string }) => m.name)).toStrictEqual([
      "localdecider",
      "jev-latest",
      "jev",
      "openjev-small",
      "laya-421m",
    ]);
    const routed = await request(h.app)
      .post("/v1/systemone")
      .send({ model: "laya-421m", state: "s", questions: { a: { type: "noul", instructions: "?" } } });
    expect(routed.status).toBe(200);
    expect(routed.body.model).toBe("localdecider-0.1.0/laya-421m");
    expect(h.fake.requests.at(-1)?.model).toBe("laya-421m");
    const own = await request(h.app)
      .post("/v1/systemone")
      .send({ model: "jev", state: "s", questions: { a: { type: "noul", instructions: "?" } } });
    expect(own.status).toBe(200);
    expect(own.body.model).toBe("localdecider-0.1.0/openjev-small");
    expect(h.fake.requests.at(-1)?.model).toBe("openjev-small");
    const chat = await request(h.app)
      .post("/v1/systemone")
      .send({ model: "qwen2.5-chat", state: "s", questions: { a: { type: "noul", instructions: "?" } } });
    expect(chat.status).toBe(DECIDER_ERROR_STATUS.unknown_model);
    expect(chat.body).toStrictEqual({
      error: 'Unknown model "qwen2.5-chat"; available models: localdecider, jev-latest, jev, openjev-small, laya-421m',
      code: "unknown_model",
    });
  });
});
