import { DECIDER_ERROR_STATUS } from "@localdecider/contracts/decider";
import { choice, noul, score, TypeSafeClient } from "@typesafe-ai/sdk";
import request from "supertest";
import { recombineChunks } from "../../src/decide/recombine";
import { DecisionsUpstream } from "../../src/upstream/decisions-upstream";
import { SGLANG_DECISIONS } from "../../src/upstream/protocol";
import { FakeDecisions } from "../fake-decisions/server";
import { type DeciderUnderTest, deciderInFrontOf, type HarnessOptions, listen } from "../helpers";
import { wideChoice } from "../native/harness";

/**
 * The decider in front of a server of OpenAI's Decisions dialect (test/fake-decisions: OpenAI's contract from
 * the openai package's types, vLLM's and SGLang's published behaviour), asked through TypeSafe's SDK on
 * /v1/systemone (issue 31 item 3): answers exactly the server's, big choices chunked and recombined, the
 * option limit learnt from at most two refused calls, no field the dialect does not document, SGLang refused.
 */
type Harness = DeciderUnderTest & { fake: FakeDecisions; upstream: string };

async function harness(fake: FakeDecisions, options: HarnessOptions = {}): Promise<Harness> {
  return deciderInFrontOf(fake, { upstreamModel: fake.models[0], ...options });
}

describe("a Decisions server upstream", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  const post = (questions: Record<string, unknown>, state: unknown = "A ticket.") =>
    request(h.app).post("/v1/systemone").send({ model: "localdecider", state, questions });
  const reportedOf = (name: string) => h.fake.reported.filter((r) => r.name === name).map((r) => r.probabilities);

  it("OpenAI's API: found by auto as a last resort, asked through the SDK, answered with exactly its probabilities", async () => {
    h = await harness(new FakeDecisions({ mode: "openai" }));
    h.fake.cachedTokens = 12;
    const ready = await request(h.app).get("/ready");
    expect(ready.status).toBe(200);
    expect(ready.body.protocol).toBe("decisions");
    const server = await listen(h);
    try {
      const client = new TypeSafeClient({
        apiKey: "k",
        baseURL: server.url,
        retry: { maxRetries: 0 },
        logLevel: "off",
      });
      const result = await client.systemOne({
        state: "I was charged twice. Please help!",
        questions: {
          billing: noul("Is this about billing?", { true: "it mentions a charge", false: "anything else" }),
          tone: choice("What is the tone?", { calm: null, angry: "shouting", sad: null }),
          urgency: score("How urgent?", ["not", "somewhat", "very", "now"]),
        },
      });
      const [billing] = reportedOf("billing");
      const [tone] = reportedOf("tone");
      const [urgency] = reportedOf("urgency");
      expect(result.answers.billing.noul).toBe(billing?.[0]?.probability);
      expect(result.answers.tone.probabilities).toStrictEqual(
        Object.fromEntries((tone ?? []).map((p) => [p.value, p.probability])),
      );
      expect(result.answers.urgency.probabilities).toStrictEqual(
        Object.fromEntries((urgency ?? []).map((p) => [String(p.value), p.probability])),
      );
      expect(result.answers.urgency.legend).toStrictEqual({ "0": "not", "1": "somewhat", "2": "very", "3": "now" });
    } finally {
      await server.close();
    }
    // One call, only documented fields, each question named by its key, in order.
    expect(h.fake.requests).toHaveLength(1);
    expect(h.fake.unknownFields).toStrictEqual([]);
    expect(h.fake.requests[0]).toStrictEqual({
      model: "gpt-6-luna",
      input: "I was charged twice. Please help!",
      questions: [
        {
          type: "predicate",
          name: "billing",
          instructions: "Is this about billing?\n\nTrue means: it mentions a charge\n\nFalse means: anything else",
        },
        {
          type: "choice",
          name: "tone",
          instructions: "What is the tone?",
          choices: [{ value: "calm" }, { value: "angry", description: "shouting" }, { value: "sad" }],
        },
        {
          type: "score",
          name: "urgency",
          instructions: "How urgent?",
          levels: [{ label: "not" }, { label: "somewhat" }, { label: "very" }, { label: "now" }],
        },
      ],
    });
  });

  it("a JSON state goes as an input_json part, and the usage is the server's", async () => {
    h = await harness(new FakeDecisions({ mode: "openai" }), { protocol: "decisions" });
    const res = await post({ a: { type: "noul", instructions: "Is it?" } }, { ticket: { id: 7 } });
    expect(res.status).toBe(200);
    expect(h.fake.requests[0]?.input).toStrictEqual([
      { role: "user", content: [{ type: "input_json", data: { ticket: { id: 7 } } }] },
    ]);
    expect(res.body.usage).toStrictEqual({ input_tokens: 28, output_tokens: 1 });
  });

  it("vLLM: learns its 26 choices from one refused call, recombines the chunks exactly, and plans later requests with it", async () => {
    h = await harness(new FakeDecisions({ mode: "vllm" }));
    expect((await request(h.app).get("/ready")).body.protocol).toBe("decisions");
    const criteria = wideChoice(60);
    const res = await post({ pick: { type: "choice", instructions: "Which?", criteria } });
    expect(res.status).toBe(200);
    const widths = () => h.fake.requests.map((r) => (r.questions as { choices: unknown[] }[])[0]?.choices.length);
    expect(widths()).toStrictEqual([60, 26, 26, 8, 3]);
    expect(h.fake.statuses).toStrictEqual([400, 200, 200, 200, 200]);
    const labels = Object.keys(criteria);
    const [a, b, c, final] = reportedOf("pick");
    const chunks = [a, b, c].map((chunk) => (chunk ?? []).map((p) => p.probability));
    const expected = recombineChunks(
      chunks,
      (final ?? []).map((p) => p.probability),
    ).flat();
    expect(Object.values(res.body.answers.pick.probabilities)).toStrictEqual(expected);
    expect(Object.keys(res.body.answers.pick.probabilities)).toStrictEqual(labels);
    // The final round's values are the chunks' leaders, as sent.
    expect((final ?? []).map((p) => p.value)).toStrictEqual(
      [a, b, c].map((chunk, i) => {
        const ps = (chunk ?? []).map((p) => p.probability);
        return labels[i * 26 + ps.indexOf(Math.max(...ps))];
      }),
    );
    expect((await post({ pick: { type: "choice", instructions: "Which?", criteria } })).status).toBe(200);
    expect(h.fake.statuses.slice(5)).toStrictEqual([200, 200, 200, 200]);
    expect(h.fake.unknownFields).toStrictEqual([]);
  });

  it("vLLM: a call of more than 64 questions refused with 400 is sent again in halves", async () => {
    h = await harness(new FakeDecisions({ mode: "vllm" }), { questionsPerCall: 100, outcomesPerCall: 1000 });
    const questions = Object.fromEntries(
      Array.from({ length: 100 }, (_, i) => [`n${i}`, { type: "noul", instructions: `Is ${i} true?` }]),
    );
    const res = await post(questions);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body.answers)).toStrictEqual(Object.keys(questions));
    expect(h.fake.requests.map((r) => (r.questions as unknown[]).length)).toStrictEqual([100, 50, 50]);
  });

  it("vLLM: a model it lists but cannot serve in its Decisions API (501) is not ready, saying why", async () => {
    const fake = new FakeDecisions({ mode: "vllm", models: [] });
    fake.listedOnly = ["chat-model"];
    h = await harness(fake, { protocol: "decisions", upstreamModel: "chat-model" });
    const ready = await request(h.app).get("/ready");
    expect(ready.status).toBe(503);
    expect(JSON.stringify(ready.body)).toContain("HTTP 501");
  });

  it("a question the server declines is a refusal: never retried; /v1/systemone answers its 502, /v1/decisions passes the refusal on", async () => {
    h = await harness(new FakeDecisions({ mode: "openai" }), { protocol: "decisions" });
    h.fake.refusals.add("b");
    const res = await post({ a: { type: "noul", instructions: "Is it?" }, b: { type: "noul", instructions: "And?" } });
    expect(res.status).toBe(DECIDER_ERROR_STATUS.upstream_malformed);
    expect(res.body.code).toBe("upstream_malformed");
    // A refusal is the server's answer, not a malformed one: asked once.
    expect(h.fake.requests.map((r) => (r.questions as { name: string }[]).map((q) => q.name))).toStrictEqual([
      ["a", "b"],
    ]);
    const decisions = await request(h.app)
      .post("/v1/decisions")
      .send({
        model: "localdecider",
        input: "A ticket.",
        questions: [
          { type: "predicate", name: "a", instructions: "Is it?" },
          { type: "predicate", name: "b", instructions: "And?" },
        ],
      });
    expect(decisions.status).toBe(200);
    expect(decisions.body.answers[0]).toMatchObject({ type: "predicate", name: "a" });
    expect(decisions.body.answers[1]).toStrictEqual({ type: "refusal", name: "b" });
    expect(h.fake.requests).toHaveLength(2);
  });

  it.each(["decisions", "auto"] as const)(
    "SGLang's own /v1/decisions dialect is refused at start-up (protocol %s)",
    async (protocol) => {
      h = await harness(new FakeDecisions({ mode: "sglang" }), { protocol });
      const ready = await request(h.app).get("/ready");
      expect(ready.status).toBe(503);
      expect(JSON.stringify(ready.body)).toContain("SGLang");
      const res = await post({ a: { type: "noul", instructions: "Is it?" } });
      expect(res.status).toBe(503);
      expect(h.fake.requests).toHaveLength(0);
      expect(SGLANG_DECISIONS).toContain("not OpenAI's Decisions");
    },
  );
});

describe("DecisionsUpstream: typed values", () => {
  it('sends each option\'s typed value and maps the answer back by it: the string "true" and true are two options', async () => {
    const fake = new FakeDecisions({ mode: "openai" });
    const url = await fake.start();
    try {
      const upstream = new DecisionsUpstream({ baseURL: `${url}/v1`, authorization: undefined });
      fake.script = () => [0.125, 0.25, 0.625];
      const result = await upstream.decide(
        {
          model: "gpt-6-luna",
          state: "s",
          questions: [
            {
              key: "q",
              type: "choice",
              instructions: "Which?",
              options: [
                { label: "as text", description: undefined, value: "true" },
                { label: "as boolean", description: undefined, value: true },
                { label: "plain", description: "a label without a value" },
              ],
            },
          ],
        },
        { signal: new AbortController().signal, slot: undefined },
      );
      const [sent] = (fake.requests[0]?.questions ?? []) as { choices: unknown }[];
      expect(sent?.choices).toStrictEqual([
        { value: "true" },
        { value: true },
        { value: "plain", description: "a label without a value" },
      ]);
      expect(result.answers).toStrictEqual({
        q: { type: "choice", probabilities: { "as text": 0.125, "as boolean": 0.25, plain: 0.625 } },
      });
    } finally {
      await fake.stop();
    }
  });
});
