import { DeciderErrorBody, SystemOneResponse } from "@localdecider/contracts/decider";
import { createLogger } from "@localdecider/service-kit";
import request from "supertest";
import { type AskedQuestion, FakeUpstream, type Flavour } from "./fake-upstream/server";
import { type Harness, harness, sum, waitFor } from "./helpers";
import { JPEG_ASSET, PNG_ASSET } from "./image-assets";

const choiceTruth: Record<string, number> = { billing: 0.5, shipping: 0.3, refund: 0.15, other: 0.05 };
const scoreTruth = [0.1, 0.2, 0.6, 0.1];

/** Scripted truth per question name: what the tests expect the service to recover. */
function script(q: AskedQuestion): Record<string, number> {
  if (q.name === "urgent") return { true: 0.7, false: 0.3 };
  if (q.name === "topic") return choiceTruth;
  if (q.name === "severity") return Object.fromEntries(scoreTruth.map((p, i) => [String(i), p]));
  if (q.name === "big") return bigTruth;
  return { true: 0.5, false: 0.5 };
}

const bigLabels = Array.from({ length: 255 }, (_, i) => `label-${i}`);
const bigTruth: Record<string, number> = Object.fromEntries(bigLabels.map((l, i) => [l, 1 + ((i * 37) % 101)]));
const bigTotal = sum(Object.values(bigTruth));

const body = {
  model: "localdecider",
  state: { diff: "--- a/x\n+++ b/x\n@@\n-old\n+new" },
  questions: {
    urgent: { type: "noul", instructions: "Is this urgent?", criteria: { true: "needs action today", false: null } },
    topic: {
      type: "choice",
      instructions: { ask: "What is it about?" },
      criteria: { billing: "money", shipping: null, refund: ["return", "money back"], other: null },
    },
    severity: {
      type: "score",
      instructions: ["How severe?"],
      criteria: ["none", "low", "high", { level: "critical" }],
    },
  },
};

const CONTEXT_TOO_LONG =
  "the request does not fit the model's context: send a shorter state, or fewer questions per prompt (LOCALDECIDER_QUESTIONS_PER_CALL), or give the model a larger context (the embedded engine: LOCALDECIDER_CONTEXT_SIZE)";

/** One question: a fault on its one call decides the whole request. */
const one = { model: "localdecider", state: body.state, questions: { urgent: body.questions.urgent } };

const decide = (h: Harness, payload: unknown = body) =>
  request(h.app)
    .post("/v1/systemone")
    .send(payload as object);

describe("POST /v1/systemone", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  describe.each<Flavour>(["llama", "vllm", "ollama"])("against a %s backend", (flavour) => {
    it("recovers the scripted distributions of noul, choice and score questions", async () => {
      h = await harness({ flavour });
      h.fake.script = script;
      const res = await decide(h);
      expect(res.status).toBe(200);
      expect(SystemOneResponse.parse(res.body)).toStrictEqual(res.body);
      expect(Object.keys(res.body.answers)).toStrictEqual(["urgent", "topic", "severity"]);
      expect(res.body.model).toBe("localdecider-0.1.0/test-model");
      // One call per question, one decoded token each; llama.cpp reports the shared prefix as cached
      // after the first call (10 new prompt tokens each), the others count the whole prompt every time.
      expect(res.body.usage).toStrictEqual({ input_tokens: flavour === "llama" ? 120 : 300, output_tokens: 3 });
      expect(h.fake.requests.map((r) => FakeUpstream.probed(r).question.name).sort()).toStrictEqual([
        "severity",
        "topic",
        "urgent",
      ]);
      expect(res.body.answers.urgent.type).toBe("noul");
      expect(res.body.answers.urgent.noul).toBeCloseTo(0.7, 12);
      const topic = res.body.answers.topic;
      expect(topic.choice).toBe("billing");
      for (const [label, p] of Object.entries(choiceTruth)) expect(topic.probabilities[label]).toBeCloseTo(p, 12);
      expect(topic.confidence).toBeCloseTo((4 * 0.5 - 1) / 3, 12);
      const severity = res.body.answers.severity;
      expect(severity.score).toBeCloseTo(0.2 + 1.2 + 0.3, 12);
      expect(severity.legend).toStrictEqual({ "0": "none", "1": "low", "2": "high", "3": { level: "critical" } });
      expect(severity.confidence).toBeCloseTo(1 - (0.2 + 0.2 + 0.1) / 1, 12);
      for (const [i, p] of scoreTruth.entries()) expect(severity.probabilities[String(i)]).toBeCloseTo(p, 12);
    });

    it("splits a 255-label choice into chunks and recombines one distribution whose argmax is the choice", async () => {
      h = await harness({ flavour });
      h.fake.script = script;
      h.fake.junk = 0;
      const criteria = Object.fromEntries(bigLabels.map((l) => [l, null]));
      const res = await decide(h, {
        model: "jev-latest",
        state: null,
        questions: { big: { type: "choice", instructions: "Which label?", criteria } },
      });
      expect(res.status).toBe(200);
      const big = res.body.answers.big;
      expect(Object.keys(big.probabilities)).toStrictEqual(bigLabels);
      expect(sum(Object.values(big.probabilities) as number[])).toBeCloseTo(1, 9);
      if (flavour === "llama") {
        // llama.cpp spreads each letter over several tokens (`B`, `B"`, `B"}`), so only the likeliest
        // letters of a chunk fit the 20 reported alternatives; the rest get their explicit share.
        expect(h.observer.absent).toBeGreaterThan(0);
        for (const label of bigLabels) expect(big.probabilities[label]).toBeGreaterThan(0);
      } else {
        for (const label of bigLabels) {
          expect(big.probabilities[label]).toBeCloseTo((bigTruth[label] as number) / bigTotal, 12);
        }
      }
      const best = bigLabels.reduce((a, b) => ((bigTruth[b] as number) > (bigTruth[a] as number) ? b : a));
      expect(big.choice).toBe(best);
      // 13 chunks of at most 20 labels, one call each (in 3 prompts of at most 128 outcomes), then one
      // final round among the 13 leaders.
      expect(h.fake.calls).toBe(14);
      expect(res.body.usage.output_tokens).toBe(14);
      const finalRound = FakeUpstream.asked(h.fake.requests[13] as Record<string, unknown>);
      expect(finalRound.map((q) => [q.name, q.title, q.labels.length])).toStrictEqual([
        ["big", "choice, final round among the best options", 13],
      ]);
    });
  });

  it("renders at most QUESTIONS_PER_CALL questions per prompt and probes each question once at its value", async () => {
    h = await harness({ questionsPerCall: 2 });
    const questions = Object.fromEntries(
      Array.from({ length: 5 }, (_, i) => [`n${i}`, { type: "noul", instructions: "Is it?" }]),
    );
    const res = await decide(h, { model: "localdecider", state: "the state text", questions });
    expect(res.status).toBe(200);
    expect(h.fake.calls).toBe(5);
    expect(res.body.usage).toStrictEqual({ input_tokens: 500, output_tokens: 5 });
    const prompts = new Set<string>();
    for (const req of h.fake.requests) {
      const messages = req.messages as { role: string; content: string }[];
      expect(messages[1]?.content).toContain(">>>\nthe state text\n<<<END OF STATE ");
      expect(messages.at(-1)?.role).toBe("assistant");
      expect(FakeUpstream.asked(req).length).toBeLessThanOrEqual(2);
      prompts.add(JSON.stringify(messages.slice(0, -1)));
      expect(req).toMatchObject({
        temperature: 0,
        logprobs: true,
        top_logprobs: 20,
        max_tokens: 1,
        continue_final_message: true,
        add_generation_prompt: false,
      });
    }
    // 5 questions, 2 per prompt: 3 shared prefixes.
    expect(prompts.size).toBe(3);
  });

  it("accepts nested objects, arrays and null as state", async () => {
    h = await harness();
    for (const state of [{ a: { b: [1, 2, { c: null }] } }, [1, "two"], null, "text"]) {
      const res = await decide(h, { ...body, state });
      expect(res.status).toBe(200);
    }
  });

  it("echoes x-request-id in x-request-id and x-typesafe-request-id", async () => {
    h = await harness();
    const res = await decide(h).set("x-request-id", "req-123");
    expect(res.headers["x-request-id"]).toBe("req-123");
    expect(res.headers["x-typesafe-request-id"]).toBe("req-123");
    const generated = await decide(h);
    expect(generated.headers["x-typesafe-request-id"]).toBe(generated.headers["x-request-id"]);
    expect(generated.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
  });

  describe("rejects invalid input with 422 invalid_request, naming each problem, and makes no upstream call", () => {
    const cases: [string, unknown, { path: string; message: string }[]][] = [
      [
        "questions missing",
        { model: "localdecider", state: null },
        [{ path: "questions", message: "Invalid input: expected record, received undefined" }],
      ],
      [
        "empty questions",
        { model: "localdecider", state: null, questions: {} },
        [{ path: "questions", message: "questions must hold at least one question" }],
      ],
      [
        "state missing",
        { model: "localdecider", questions: { a: { type: "noul", instructions: "Is it?" } } },
        [{ path: "state", message: "state is required: a string, a JSON object or array, or null" }],
      ],
      [
        "unknown question type",
        { model: "localdecider", state: null, questions: { q1: { type: "maybe" } } },
        [
          {
            path: "questions.q1.type",
            message: "Invalid discriminator value. Expected 'noul' | 'choice' | 'score' | 'box'",
          },
        ],
      ],
      [
        "choice criteria of the wrong type",
        {
          model: "localdecider",
          state: null,
          questions: { q1: { type: "choice", instructions: "?", criteria: "abc" } },
        },
        [{ path: "questions.q1.criteria", message: "Invalid input: expected record, received string" }],
      ],
      [
        "256 labels",
        {
          model: "localdecider",
          state: null,
          questions: {
            q1: {
              type: "choice",
              instructions: "?",
              criteria: Object.fromEntries(Array.from({ length: 256 }, (_, i) => [`l${i}`, null])),
            },
          },
        },
        [{ path: "questions.q1.criteria", message: "a choice allows at most 255 labels" }],
      ],
      [
        "11 score levels",
        {
          model: "localdecider",
          state: null,
          questions: { s: { type: "score", instructions: "?", criteria: new Array(11).fill("x") } },
        },
        [{ path: "questions.s.criteria", message: "a score allows at most 10 levels" }],
      ],
      [
        "1 score level",
        { model: "localdecider", state: null, questions: { s: { type: "score", instructions: "?", criteria: ["x"] } } },
        [{ path: "questions.s.criteria", message: "a score needs at least 2 levels" }],
      ],
      [
        "a number as instructions",
        { model: "localdecider", state: null, questions: { a: { type: "noul", instructions: 5 } } },
        [{ path: "questions.a.instructions", message: "instructions must be text, a JSON object or a JSON array" }],
      ],
      ...(
        [
          [
            "missing instructions",
            {},
            "instructions are required: the question put to the model, as text (or a JSON object or array)",
          ],
          [
            "null instructions",
            { instructions: null },
            "instructions are required: the question put to the model, as text (or a JSON object or array)",
          ],
          ["empty instructions", { instructions: "" }, "instructions must not be empty"],
          ["whitespace instructions", { instructions: " \n\t" }, "instructions must not be empty"],
          ["an empty object as instructions", { instructions: {} }, "instructions must not be empty"],
          ["an empty array as instructions", { instructions: [] }, "instructions must not be empty"],
        ] as const
      ).map(([name, fields, message]): [string, unknown, { path: string; message: string }[]] => [
        name,
        {
          model: "localdecider",
          state: null,
          questions: { ok: { type: "noul", instructions: "?" }, a: { type: "score", criteria: ["x", "y"], ...fields } },
        },
        [{ path: "questions.a.instructions", message }],
      ]),
      [
        "a box question without instructions",
        { model: "localdecider", state: null, questions: { where: { type: "box" } } },
        [
          {
            path: "questions.where.instructions",
            message: "instructions are required: the question put to the model, as text (or a JSON object or array)",
          },
        ],
      ],
      [
        "an asset no text references",
        {
          model: "localdecider",
          state: "look at `photo`",
          questions: { a: { type: "noul", instructions: "Is there a mug in `photo`?" } },
          assets: { photo: PNG_ASSET, spare: PNG_ASSET },
        },
        [
          {
            path: "assets.spare",
            message:
              'asset "spare" is not referenced: name it in the state, an instructions or a criteria text, or leave it out',
          },
        ],
      ],
      [
        "assets beside questions that are not an object",
        { model: "localdecider", state: "`photo`", questions: ["photo"], assets: { photo: PNG_ASSET } },
        [{ path: "questions", message: "Invalid input: expected record, received array" }],
      ],
      [
        "an asset whose data is not base64, one of the wrong format and one of an unknown format",
        {
          model: "localdecider",
          state: "`a` `b` `c`",
          questions: { q: { type: "noul", instructions: "?" } },
          assets: {
            a: { type: "image", format: "png", data_base64: "data:image/png;base64,iVBORw0KGgo=" },
            b: { ...JPEG_ASSET, format: "png" },
            c: { ...PNG_ASSET, format: "gif" },
          },
        },
        [
          {
            path: "assets.a.data_base64",
            message:
              "data_base64 must be standard base64 (A-Z, a-z, 0-9, + and /, padded with =) without a data: prefix",
          },
          {
            path: "assets.b.data_base64",
            message: 'the file is not a PNG image (its first bytes are not PNG\'s signature) although format is "png"',
          },
          { path: "assets.c.format", message: 'Invalid option: expected one of "png"|"jpg"' },
        ],
      ],
      [
        "__proto__ as a question name",
        JSON.parse(
          '{"model":"localdecider","state":null,"questions":{"__proto__":{"type":"noul","instructions":"?"},"a":{"type":"noul","instructions":"?"}}}',
        ),
        [{ path: "questions.__proto__", message: '"__proto__" cannot be used as a name or label' }],
      ],
      [
        "__proto__ as a choice label",
        JSON.parse(
          '{"model":"localdecider","state":null,"questions":{"c":{"type":"choice","instructions":"?","criteria":{"__proto__":null,"x":null}}}}',
        ),
        [{ path: "questions.c.criteria.__proto__", message: '"__proto__" cannot be used as a name or label' }],
      ],
      [
        "an empty choice label",
        {
          model: "localdecider",
          state: null,
          questions: { c: { type: "choice", instructions: "?", criteria: { "": null } } },
        },
        [{ path: "questions.c.criteria.", message: "a label must not be empty" }],
      ],
      [
        "a body that is not an object",
        5,
        [{ path: "body", message: "Invalid input: expected object, received number" }],
      ],
    ];
    it.each(cases)("%s", async (_name, payload, details) => {
      h = await harness();
      const res = await request(h.app)
        .post("/v1/systemone")
        .set("content-type", "application/json")
        .send(JSON.stringify(payload));
      expect(res.status).toBe(422);
      expect(res.body).toStrictEqual({ error: "Invalid request body", code: "invalid_request", details });
      expect(h.fake.calls).toBe(0);
    });
  });

  it("answers 400 naming the available models for an unknown model", async () => {
    h = await harness();
    const res = await decide(h, { ...body, model: "gpt-9" });
    expect(res.status).toBe(400);
    expect(res.body).toStrictEqual({
      error: 'Unknown model "gpt-9"; available models: localdecider, jev-latest, jev',
      code: "unknown_model",
    });
  });

  it("answers 422 naming the available models for a missing model, or one that is not a name, as for an unknown one", async () => {
    h = await harness();
    const { model: _omitted, ...withoutModel } = body;
    const missing = await decide(h, withoutModel);
    expect(missing.status).toBe(422);
    expect(missing.body).toStrictEqual({
      error: "Missing model; available models: localdecider, jev-latest, jev",
      code: "invalid_request",
      details: [{ path: "model", message: "required: one of localdecider, jev-latest, jev" }],
    });
    const empty = await decide(h, { ...body, model: "", questions: {} });
    expect(empty.status).toBe(422);
    expect(empty.body).toStrictEqual({
      error: "Invalid model; available models: localdecider, jev-latest, jev",
      code: "invalid_request",
      details: [
        { path: "model", message: "must be a model's name: one of localdecider, jev-latest, jev" },
        { path: "questions", message: "questions must hold at least one question" },
      ],
    });
    expect(h.fake.calls).toBe(0);
  });

  it("answers 400 invalid_json for malformed JSON and 413 for a body over the limit", async () => {
    h = await harness({ bodyLimit: "1kb" });
    const bad = await request(h.app).post("/v1/systemone").set("content-type", "application/json").send('{"model":');
    expect(bad.status).toBe(400);
    expect(bad.body).toStrictEqual({ error: "Request body is not valid JSON", code: "invalid_json" });
    const big = await decide(h, { ...body, state: "x".repeat(2000) });
    expect(big.status).toBe(413);
    expect(big.body).toStrictEqual({ error: "Request body too large", code: "payload_too_large" });
    expect(h.fake.calls).toBe(0);
  });

  describe("with LOCALDECIDER_API_KEY set", () => {
    it("answers 401 with WWW-Authenticate for a missing or wrong bearer and 200 for the right one", async () => {
      h = await harness({ apiKey: "s3cret" });
      const missing = await decide(h);
      expect(missing.status).toBe(401);
      expect(missing.headers["www-authenticate"]).toBe('Bearer realm="localdecider"');
      expect(missing.body).toStrictEqual({ error: "Missing API key", code: "unauthorized" });
      const wrong = await decide(h).set("authorization", "Bearer nope");
      expect(wrong.status).toBe(401);
      expect(wrong.body).toStrictEqual({ error: "Invalid API key", code: "unauthorized" });
      const models = await request(h.app).get("/v1/models");
      expect(models.status).toBe(401);
      const ok = await decide(h, one).set("authorization", "Bearer s3cret");
      expect(ok.status).toBe(200);
      expect(h.fake.calls).toBe(1);
    });

    it("checks the bearer before reading the body", async () => {
      h = await harness({ apiKey: "s3cret" });
      const res = await request(h.app).post("/v1/systemone").set("content-type", "application/json").send("{not json");
      expect(res.status).toBe(401);
    });
  });

  it("sends LOCALDECIDER_UPSTREAM_API_KEY to the backend as a bearer, on chat calls and on the readiness probe", async () => {
    h = await harness({ upstreamApiKey: "up-key" });
    expect((await decide(h, one)).status).toBe(200);
    expect((await request(h.app).get("/ready")).status).toBe(200);
    // The model check before the decision, the start-up inspection (the model list again, three one-token
    // calls), the call, and /ready's own check.
    expect(h.fake.inspections).toHaveLength(3);
    expect(h.fake.authorizations).toStrictEqual(Array(7).fill("Bearer up-key"));
  });

  it("accepts any bearer when no API key is configured", async () => {
    h = await harness();
    const res = await decide(h).set("authorization", "Bearer whatever");
    expect(res.status).toBe(200);
  });

  describe("upstream faults", () => {
    const faults: [string, Parameters<typeof setFault>[1], number, unknown][] = [
      [
        "a 404 for the model becomes 503",
        "model404",
        503,
        {
          error: "inference backend returned HTTP 404",
          code: "model_unavailable",
        },
      ],
      ["a 5xx becomes 502", "http500", 502, { error: "inference backend returned HTTP 500", code: "upstream_error" }],
      [
        "a context overflow becomes 400 saying so",
        "contextTooLong",
        400,
        {
          error: CONTEXT_TOO_LONG,
          code: "context_too_long",
        },
      ],
    ];
    it.each(faults)("%s", async (_name, fault, status, expected) => {
      h = await harness();
      setFault(h, fault);
      const res = await decide(h, one);
      expect(res.status).toBe(status);
      expect(res.body).toStrictEqual(expected);
      expect(h.fake.calls).toBe(1);
    });

    it.each(["vllm", "ollama", "llama"] as const)(
      "a %s backend that does not list the configured model gets 503 before any call, never another model's answer",
      async (flavour) => {
        h = await harness({ flavour, upstreamModel: "missing-model" });
        const res = await decide(h);
        expect(res.status).toBe(503);
        expect(res.body).toStrictEqual({
          error: 'inference backend returned HTTP 404: it does not serve model "missing-model"',
          code: "model_unavailable",
        });
        expect(h.fake.calls).toBe(0);
      },
    );

    it("a backend that answers 404 to a call for the model makes it 503", async () => {
      h = await harness({ flavour: "ollama" });
      setFault(h, "model404");
      const res = await decide(h, one);
      expect(res.status).toBe(503);
      expect(res.body).toStrictEqual({
        error: "inference backend returned HTTP 404",
        code: "model_unavailable",
      });
    });

    it("a 429 from the backend becomes 503 upstream_busy passing its Retry-After on", async () => {
      h = await harness();
      setFault(h, "http429");
      const res = await decide(h, one);
      expect(res.status).toBe(503);
      expect(res.headers["retry-after"]).toBe("7");
      expect(res.body).toStrictEqual({ error: "inference backend is busy (HTTP 429)", code: "upstream_busy" });
      expect(h.fake.calls).toBe(1);
    });

    it("a connection dropped once is tried again on a new one; dropped twice, it becomes 502 upstream_unreachable", async () => {
      h = await harness();
      setFault(h, "drop");
      expect((await decide(h, one)).status).toBe(200);
      expect(h.fake.calls).toBe(2);
      h.fake.faults = ["drop", "drop"];
      const res = await decide(h, one);
      expect(h.fake.calls).toBe(4);
      expect(res.status).toBe(502);
      expect(res.body.code).toBe("upstream_unreachable");
      expect(DeciderErrorBody.parse(res.body)).toStrictEqual(res.body);
    });

    it("an unreachable upstream becomes 502 upstream_unreachable", async () => {
      h = await harness();
      await h.fake.stop();
      const res = await decide(h);
      expect(res.status).toBe(502);
      expect(res.body.code).toBe("upstream_unreachable");
      expect(res.body.error).toBe("inference backend unreachable");
    });

    it("a call past LOCALDECIDER_TIMEOUT is aborted and answered 504", async () => {
      h = await harness({ timeoutSeconds: 0.2 });
      setFault(h, "hang");
      const res = await decide(h, one);
      expect(res.status).toBe(504);
      expect(res.body).toStrictEqual({
        error: "the decision did not complete within 0.2 s",
        code: "upstream_timeout",
      });
      await waitForAbort(h);
    });

    it("LOCALDECIDER_TIMEOUT bounds the whole request: calls still queued at the deadline never start", async () => {
      h = await harness({ timeoutSeconds: 0.3, maxInflight: 1 });
      h.fake.holding = true;
      // Three calls through one slot: the first is held past the deadline, the other two wait for it.
      const res = await decide(h, {
        ...one,
        questions: {
          a: { type: "noul", instructions: "Is it?" },
          b: { type: "noul", instructions: "Is it?" },
          c: { type: "noul", instructions: "Is it?" },
        },
      });
      expect(res.status).toBe(504);
      expect(res.body).toStrictEqual({ error: "the decision did not complete within 0.3 s", code: "upstream_timeout" });
      await waitForAbort(h);
      await waitFor(() => h.limiter.counts().queued === 0 && h.limiter.counts().running === 0, "the queue to drain");
      expect(h.fake.calls).toBe(1);
    });

    it("a context overflow on llama.cpp is recognised by its message too", async () => {
      h = await harness({ flavour: "llama" });
      setFault(h, "contextTooLong");
      const res = await decide(h, one);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe("context_too_long");
    });

    it("a response without a choice is retried and the retry's answer is used; usage counts both calls", async () => {
      h = await harness();
      h.fake.script = script;
      setFault(h, "malformed");
      const res = await decide(h, one);
      expect(res.status).toBe(200);
      expect(res.body.answers.urgent.noul).toBeCloseTo(0.7, 12);
      expect(h.fake.calls).toBe(2);
      expect(h.observer.retries).toBe(1);
      expect(res.body.usage).toStrictEqual({ input_tokens: 100, output_tokens: 1 });
    });

    it("gives up with 502 after MALFORMED_RETRIES retries", async () => {
      h = await harness({ malformedRetries: 2 });
      h.fake.faults = ["malformed", "malformed", "malformed"];
      const res = await decide(h, one);
      expect(res.status).toBe(502);
      expect(res.body).toStrictEqual({
        error: "inference backend returned malformed output 3 time(s); last: the response has no choice",
        code: "upstream_malformed",
      });
      expect(h.fake.calls).toBe(3);
    });

    it.each([
      ["in this process", false],
      ["shared through Redis", true],
    ])(
      "calls of two requests that overflow llama.cpp's shared context together: the second is retried alone once (limits %s)",
      async (_mode, sharedRedis) => {
        h = await harness({ flavour: "llama", maxInflight: 2, sharedRedis });
        h.fake.script = script;
        // Room for one call of 100 prompt tokens at a time, as with `-c` shared by `--parallel` slots.
        h.fake.sharedContext = 150;
        h.fake.holding = true;
        // then() sends each request now, while the test goes on; each holds a slot of its own.
        const first = decide(h, one).then((r) => r);
        await waitFor(() => h.fake.calls === 1, "the first request's call to arrive");
        const second = decide(h, { ...one, questions: { other: { type: "noul", instructions: "Is it?" } } }).then(
          (r) => r,
        );
        // The second request's call arrives beside the held one and gets the 500.
        await waitFor(() => h.fake.calls === 2, "the second request's call to arrive");
        h.fake.release();
        const [a, b] = await Promise.all([first, second]);
        expect([a.status, b.status]).toStrictEqual([200, 200]);
        expect(a.body.answers.urgent.noul).toBeCloseTo(0.7, 12);
        expect(h.fake.calls).toBe(3);
        // The retry waited for every slot of the server: it arrived alone.
        expect(h.fake.concurrencyAtArrival).toStrictEqual([1, 2, 1]);
      },
    );

    it("a call that does not fit even alone is a 400 context_too_long, after one retry alone", async () => {
      h = await harness({ flavour: "llama" });
      h.fake.faults = ["sharedContext", "sharedContext"];
      const res = await decide(h, one);
      expect(res.status).toBe(400);
      expect(res.body).toStrictEqual({
        error: CONTEXT_TOO_LONG,
        code: "context_too_long",
      });
      expect(h.fake.calls).toBe(2);
    });

    it("a prompt longer than llama.cpp's context is a 400 context_too_long; the server's reason goes to the log", async () => {
      h = await harness({ flavour: "llama" });
      h.fake.sharedContext = 50;
      const res = await decide(h, one);
      expect(res.status).toBe(400);
      expect(res.body).toStrictEqual({
        error: CONTEXT_TOO_LONG,
        code: "context_too_long",
      });
    });

    it("without logprobs the request fails with 502 no_logprobs, naming the setting that allows it", async () => {
      h = await harness();
      setFault(h, "noLogprobs");
      const res = await decide(h, one);
      expect(res.status).toBe(502);
      expect(res.body).toStrictEqual({
        error:
          "inference backend returned no logprobs, so no probabilities can be read; use a server that reports top_logprobs, or set LOCALDECIDER_ALLOW_NO_LOGPROBS=true to accept answers from the emitted token alone (probability 1)",
        code: "no_logprobs",
      });
    });

    it.each<Flavour>(["vllm", "llama"])(
      "with LOCALDECIDER_ALLOW_NO_LOGPROBS, a %s backend's answers are the emitted outcomes with probability 1",
      async (flavour) => {
        h = await harness({ allowNoLogprobs: true, maxInflight: 1, flavour });
        h.fake.script = script;
        // On llama.cpp a call without logprobs is asked once more (the UTF-8 piece case): that one has none
        // either, on a server that never sends them.
        h.fake.faults = Array(flavour === "llama" ? 6 : 3).fill("noLogprobs");
        const res = await decide(h);
        expect(res.status).toBe(200);
        expect(res.body.answers).toStrictEqual({
          urgent: { type: "noul", noul: 1 },
          topic: {
            type: "choice",
            choice: "billing",
            probabilities: { billing: 1, shipping: 0, refund: 0, other: 0 },
            confidence: 1,
          },
          severity: {
            type: "score",
            score: 2,
            probabilities: { "0": 0, "1": 0, "2": 1, "3": 0 },
            confidence: 1,
            legend: { "0": "none", "1": "low", "2": "high", "3": { level: "critical" } },
          },
        });
      },
    );

    it("an outcome absent from the alternatives while the other is present gets an explicit share, is counted, and is logged once", async () => {
      const lines: { message: string; absent?: unknown }[] = [];
      const logger = createLogger({ service: "t", level: "warn" });
      logger.transports.forEach((t) => {
        t.silent = true;
      });
      logger.on("data", (info: { message: string; absent?: unknown }) => lines.push(info));
      h = await harness({ logger, flavour: "llama" });
      // The model puts no probability on `false` for "sure": no reported alternative can begin it.
      h.fake.script = (q) => (q.name === "sure" ? { true: 1, false: 0 } : script(q));
      const res = await decide(h, {
        ...one,
        questions: { ...one.questions, sure: { type: "noul", instructions: "Is it?" } },
      });
      expect(res.status).toBe(200);
      // Half of the smallest reported probability: far below 1 - noul, never a made-up 0.5.
      const sure = res.body.answers.sure.noul as number;
      expect(sure).toBeGreaterThan(0.9);
      expect(sure).toBeLessThan(1);
      expect(res.body.answers.urgent.noul).toBeCloseTo(0.7, 12);
      expect(h.observer.absent).toBe(1);
      const warned = lines.filter((l) => l.message.includes("absent"));
      expect(warned).toHaveLength(1);
      expect(warned[0]?.absent).toStrictEqual([{ question: "sure", outcomes: ["false"] }]);
    });

    it("alternatives that begin no outcome at all are malformed output: retried, and then 502 naming where the model put its probability, never a uniform answer", async () => {
      h = await harness({ flavour: "llama", malformedRetries: 1 });
      h.fake.script = script;
      h.fake.faults = ["junkOnly"];
      const recovered = await decide(h, one);
      expect(recovered.status).toBe(200);
      expect(recovered.body.answers.urgent.noul).toBeCloseTo(0.7, 12);
      expect(h.observer.retries).toBe(1);
      h.fake.faults = ["junkOnly", "junkOnly"];
      const res = await decide(h, one);
      expect(res.status).toBe(502);
      expect(res.body).toStrictEqual({
        error:
          'inference backend returned malformed output 2 time(s); last: no reported alternative begins an outcome; the model put its probability on " \\"" (50.0 %), ":t" (25.0 %), "   " (12.5 %)',
        code: "upstream_malformed",
      });
      expect(h.observer.absent).toBe(0);
    });

    it("on llama.cpp, a call whose sampled token was a piece of a UTF-8 character (no logprobs) is asked again with a grammar, and its raw alternatives read", async () => {
      h = await harness({ flavour: "llama" });
      h.fake.script = script;
      h.fake.faults = ["piece"];
      const res = await decide(h, one);
      expect(res.status).toBe(200);
      expect(res.body.answers.urgent.noul).toBeCloseTo(0.7, 12);
      expect(h.fake.calls).toBe(2);
      expect(h.fake.requests[0]?.grammar).toBeUndefined();
      expect(h.fake.requests[1]?.grammar).toBe('root ::= [ \\t\\n\\r]* ("true" | "false") [^\\x00]*');
      expect(h.observer.retries).toBe(0);
    });
  });
});

function setFault(h: Harness, fault: Harness["fake"]["faults"][number]): void {
  h.fake.faults = [fault];
}

async function waitForAbort(h: Harness): Promise<void> {
  await waitFor(() => h.fake.aborted === 1, "the fake to see the abort");
}
