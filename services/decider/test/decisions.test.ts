import { ApiError } from "@localdecider/contracts";
import { createDeciderClient } from "@localdecider/contracts/decider";
import { createLogger } from "@localdecider/service-kit";
import OpenAI, {
  APIError,
  AuthenticationError,
  BadRequestError,
  InternalServerError,
  NotFoundError,
  RateLimitError,
} from "openai7";
import request from "supertest";
import { serversBackend } from "../src/backend";
import type { Upstream } from "../src/upstream/types";
import { FakeUpstream } from "./fake-upstream/server";
import { deciderFor, deciderOver, type Harness, harness, listen, modelServer, waitFor } from "./helpers";
import { PNG_ASSET } from "./image-assets";

/**
 * `POST /v1/decisions` through the official `openai` SDK (7.59.0, `client.decisions.create`) in front of a chat
 * model server (the fake, read through logprobs): shapes, typed values, order, refusals, usage, cache keys,
 * and every bad input refused with a 4xx in OpenAI's envelope before anything reaches the model server.
 */
describe("POST /v1/decisions through openai@7.59.0, in front of a chat model server", () => {
  let h: Harness;
  let server: { url: string; close: () => Promise<void> };
  const client = (apiKey = "k") => new OpenAI({ apiKey, baseURL: `${server.url}/v1`, maxRetries: 0 });

  let stopFakes: (() => Promise<unknown>) | undefined;
  let closeDecider: (() => Promise<void>) | undefined;

  afterEach(async () => {
    await server?.close();
    await h?.close();
    await closeDecider?.();
    await stopFakes?.();
    stopFakes = undefined;
    closeDecider = undefined;
    h = undefined as unknown as Harness;
  });

  it("answers predicate, choice and score questions in order, with typed values, names and usage", async () => {
    h = await harness({ apiKey: "k" });
    server = await listen(h);
    h.fake.script = (q): Record<string, number> =>
      q.name === "billing"
        ? { true: 0.9, false: 0.1 }
        : q.kind === "choice"
          ? { calm: 1, true: 2, "true (boolean)": 5 }
          : { "0": 1, "1": 1, "2": 2 };
    const decision = await client().decisions.create({
      model: "localdecider",
      input: "I was charged twice. Please help!",
      questions: [
        { type: "predicate", name: "billing", instructions: "Is this about billing?" },
        {
          type: "choice",
          name: "tone",
          instructions: "What is the tone?",
          choices: [{ value: "calm" }, { value: "true", description: "the string" }, { value: true }],
        },
        {
          type: "score",
          instructions: "How urgent?",
          levels: [{ label: "not" }, { label: "somewhat" }, { label: "very", description: "now" }],
        },
      ],
    });
    expect(decision.model).toBe("localdecider-0.1.0/test-model");
    const [billing, tone, urgency] = decision.answers;
    expect(billing).toMatchObject({ type: "predicate", name: "billing" });
    if (billing?.type !== "predicate" || tone?.type !== "choice" || urgency?.type !== "score") throw new Error("types");
    expect(billing.probability).toBeCloseTo(0.9, 12);
    // The boolean true and the string "true" are two values, each with its own probability.
    expect(tone.name).toBe("tone");
    expect(tone.choice).toBe(true);
    expect(tone.probabilities.map((p) => p.value)).toStrictEqual(["calm", "true", true]);
    expect(tone.probabilities.map((p) => p.probability)).toEqual([
      expect.closeTo(1 / 8, 12),
      expect.closeTo(2 / 8, 12),
      expect.closeTo(5 / 8, 12),
    ]);
    expect(tone.confidence).toBeCloseTo((3 * (5 / 8) - 1) / 2, 12);
    // An unnamed question: name null. value is the level's index, score = sum of value * p.
    expect(urgency.name).toBeNull();
    expect(urgency.probabilities.map(({ value, label }) => [value, label])).toStrictEqual([
      [0, "not"],
      [1, "somewhat"],
      [2, "very"],
    ]);
    expect(urgency.score).toBeCloseTo(0.25 + 2 * 0.5, 12);
    // One call per question, 100 prompt tokens and one decoded token each (the fake's count), nothing cached.
    expect(decision.usage).toStrictEqual({
      input_tokens: 300,
      input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
      output_tokens: 3,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 303,
    });
  });

  it("renders a message list in order with roles, tool calls and JSON parts, as the state's sections", async () => {
    h = await harness();
    server = await listen(h);
    await client().decisions.create({
      model: "localdecider",
      input: [
        { role: "system", content: "You triage tickets." },
        { type: "message", role: "user", content: [{ type: "input_text", text: "My order 42 is late." }] },
        { type: "function_call", call_id: "c1", name: "lookup_order", arguments: '{"id":42}' },
        { type: "function_call_output", call_id: "c1", output: "shipped yesterday" },
        { role: "user", content: [{ type: "input_json", data: { order: 42, priority: "high" } }] },
        { role: "assistant", content: [{ type: "output_text", text: "Let me check." }] },
      ],
      questions: [{ type: "predicate", instructions: [{ type: "input_text", text: "Is the customer upset?" }] }],
    });
    const messages = (h.fake.requests[0] as { messages: { role: string; content: string }[] }).messages;
    const prompt = messages.map((m) => m.content).join("\n");
    const order = [
      '## "1. system message"\nYou triage tickets.',
      '## "2. user message"\nMy order 42 is late.',
      '## "3. function call lookup_order (call_id c1)"\n{"id":42}',
      '## "4. function call output (call_id c1)"\nshipped yesterday',
      '## "5. user message"\n{\n  "order": 42,\n  "priority": "high"\n}',
      '## "6. assistant message"\nLet me check.',
      // Prompt version 4: one line per question, its instructions after its key and name.
      "q1 question 1: Is the customer upset? (true or false)",
    ].map((text) => prompt.indexOf(text));
    expect(order.every((at) => at >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toStrictEqual(order);
  });

  it("splits a choice wider than a chat probe reads into chunks and a final round, as System One does", async () => {
    h = await harness();
    server = await listen(h);
    const values = Array.from({ length: 30 }, (_, i) => (i === 29 ? true : `v${i}`));
    h.fake.script = (q): Record<string, number> =>
      Object.fromEntries(q.labels.map((label) => [label, label === "v17" ? 50 : label === "true" ? 20 : 1]));
    const decision = await client().decisions.create({
      model: "localdecider",
      input: "x",
      questions: [{ type: "choice", instructions: "Which?", choices: values.map((value) => ({ value })) }],
    });
    const [answer] = decision.answers;
    if (answer?.type !== "choice") throw new Error("not a choice");
    expect(answer.choice).toBe("v17");
    expect(answer.probabilities.map((p) => p.value)).toStrictEqual(values);
    expect(answer.probabilities.reduce((sum, p) => sum + p.probability, 0)).toBeCloseTo(1, 12);
    expect(answer.probabilities[29]?.probability).toBeGreaterThan(answer.probabilities[0]?.probability ?? 1);
    // Two chunks (20 + 10 options) and the final round between their leaders.
    expect(h.fake.calls).toBe(3);
  });

  it("keeps the client's order for integer-like names (object keys would reorder them)", async () => {
    h = await harness();
    server = await listen(h);
    const decision = await client().decisions.create({
      model: "localdecider",
      input: "x",
      questions: ["10", "2", "1", "b", "0"].map((name) => ({ type: "predicate" as const, name, instructions: "?" })),
    });
    expect(decision.answers.map((a) => a.name)).toStrictEqual(["10", "2", "1", "b", "0"]);
  });

  it("refuses the question without evidence and answers the others; /v1/systemone keeps its 502", async () => {
    h = await harness({ malformedRetries: 1, questionsPerCall: 1, maxInflight: 1 });
    server = await listen(h);
    // The first question's call and its retry: no reported alternative begins an outcome.
    h.fake.faults = ["junkOnly", "junkOnly"];
    const decision = await client().decisions.create({
      model: "localdecider",
      input: "x",
      questions: [
        { type: "predicate", name: "a", instructions: "?" },
        { type: "predicate", instructions: "?" },
        { type: "choice", name: "c", instructions: "?", choices: [{ value: "x" }, { value: false }] },
      ],
    });
    expect(decision.answers[0]).toStrictEqual({ type: "refusal", name: "a" });
    expect(decision.answers[1]).toMatchObject({ type: "predicate", name: null });
    expect(decision.answers[2]).toMatchObject({ type: "choice", name: "c" });
    expect(h.fake.calls).toBe(4);

    h.fake.faults = ["junkOnly", "junkOnly"];
    const res = await request(h.app)
      .post("/v1/systemone")
      .send({ model: "localdecider", state: "x", questions: { a: { type: "noul", instructions: "?" } } });
    expect(res.status).toBe(502);
    expect(res.body.code).toBe("upstream_malformed");
  });

  it.each([
    ["chat completions", false],
    ["llama-server's /completion, a prompt's probes in one call", true],
  ])("reports the prompt tokens a server took from its cache, counted in input_tokens (%s)", async (_how, packing) => {
    h = await harness({ flavour: "llama", packing, maxInflight: 1 });
    server = await listen(h);
    const body = {
      model: "localdecider",
      input: "the same state",
      questions: [
        { type: "predicate" as const, instructions: "Is it?" },
        { type: "predicate" as const, instructions: "Is it not?" },
      ],
    };
    await client().decisions.create(body);
    const again = await client().decisions.create(body);
    const { input_tokens, input_tokens_details, output_tokens, total_tokens } = again.usage;
    expect(input_tokens_details.cached_tokens).toBeGreaterThan(0);
    expect(input_tokens).toBeGreaterThan(input_tokens_details.cached_tokens);
    expect(total_tokens).toBe(input_tokens + output_tokens);
    // With packing the probes went through /completion, whose usage is read from timings (cache_n).
    expect(h.fake.completions.length > 0).toBe(packing);
  });

  it("sends every request with one prompt_cache_key to the same model server", async () => {
    const fakes = [new FakeUpstream({ flavour: "vllm" }), new FakeUpstream({ flavour: "vllm" })];
    const addresses = await Promise.all(fakes.map((f) => f.start()));
    const logger = createLogger({ service: "decider-test", level: "silent" });
    const d = deciderOver(
      serversBackend(
        addresses.map((url) => modelServer(url, { logger })),
        "test-model",
        logger,
      ),
      { logger },
    );
    server = await listen(d);
    stopFakes = () => Promise.all(fakes.map((f) => f.stop()));
    closeDecider = d.close;
    const ask = (key: string, state: string) =>
      client().decisions.create({
        model: "localdecider",
        input: state,
        questions: [{ type: "predicate", instructions: "?" }],
        prompt_cache_key: key,
        prompt_cache_options: { mode: "implicit", ttl: "30m" },
        safety_identifier: "user-1234",
      });
    for (const state of ["a", "b", "c", "d", "e", "f"]) await ask("tenant-7", state);
    const counts = fakes.map((f) => f.calls);
    expect(counts.sort()).toStrictEqual([0, 6]);
    // Without a key, the least loaded server takes each request: both get some.
    for (const state of ["a", "b", "c", "d"]) {
      await client().decisions.create({
        model: "localdecider",
        input: state,
        questions: [{ type: "predicate", instructions: "?" }],
      });
    }
  });

  it("is called through our own typed client's decisions.create, its errors read from OpenAI's envelope", async () => {
    h = await harness();
    server = await listen(h);
    const ours = createDeciderClient({ baseUrl: server.url });
    const decision = await ours.decisions.create({
      model: "localdecider",
      input: "x",
      questions: [{ type: "choice", name: "c", instructions: "?", choices: [{ value: false }, { value: "false" }] }],
    });
    expect(decision.answers[0]).toMatchObject({ type: "choice", name: "c" });
    const failed = await ours.decisions
      .create({ model: "localdecider", input: "x", questions: [] })
      .catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(ApiError);
    expect(failed).toMatchObject({ status: 400, code: "invalid_request", details: [{ path: "questions" }] });
  });

  it("runs every request with one prompt_cache_key in the same slot, whatever its input", async () => {
    h = await harness({ flavour: "llama", maxInflight: 2 });
    server = await listen(h);
    const slots = async (key: string | undefined) => {
      const before = h.fake.requests.length;
      for (const state of ["a", "b", "c", "d"]) {
        await client().decisions.create({
          model: "localdecider",
          input: `${key ?? "none"} ${state}`,
          questions: [{ type: "predicate", instructions: "?" }],
          ...(key === undefined ? {} : { prompt_cache_key: key }),
        });
      }
      return h.fake.requests.slice(before).map((r) => r.id_slot);
    };
    // Without a key a new input takes the slot free the longest: the two slots in turn.
    expect(new Set(await slots(undefined)).size).toBe(2);
    // With one, the slot its key last held, whatever the input.
    expect(new Set(await slots("tenant-7")).size).toBe(1);
  });

  it("passes the cache key, hashed, with every call to the backend (for its own caches), never in clear", async () => {
    const fake = new FakeUpstream({ flavour: "vllm" });
    const address = await fake.start();
    const seen: (string | undefined)[] = [];
    const d = deciderFor(address, {
      wrapUpstream: (upstream: Upstream): Upstream => ({
        prefixCache: upstream.prefixCache,
        probe: (probe, options) => {
          seen.push(options.cacheKey);
          return upstream.probe(probe, options);
        },
      }),
    });
    server = await listen(d);
    stopFakes = () => fake.stop();
    closeDecider = d.close;
    const ask = (key?: string) =>
      client().decisions.create({
        model: "localdecider",
        input: "x",
        questions: [{ type: "predicate", instructions: "?" }],
        ...(key === undefined ? {} : { prompt_cache_key: key }),
      });
    await ask("tenant-7");
    await ask("tenant-7");
    await ask("tenant-8");
    await ask();
    expect(seen).toHaveLength(4);
    expect(seen[0]).toMatch(/^key:[0-9a-f]{16}$/);
    expect(seen[1]).toBe(seen[0]);
    expect(seen[2]).not.toBe(seen[0]);
    expect(seen[3]).toBeUndefined();
    expect(seen.some((k) => k?.includes("tenant"))).toBe(false);
  });

  it("lists the models as the openai SDK's models.list() reads them", async () => {
    h = await harness();
    server = await listen(h);
    const ids: string[] = [];
    for await (const model of client().models.list()) {
      expect(model).toMatchObject({
        object: "model",
        owned_by: "localdecider",
        created: Date.UTC(2026, 10, 22) / 1000,
      });
      ids.push(model.id);
    }
    expect(ids).toStrictEqual(["localdecider", "jev-latest", "jev"]);
  });

  describe("refuses bad input with a 400 naming the field, before anything reaches the model server", () => {
    const question = { type: "predicate", instructions: "?" };
    const cases: [string, Record<string, unknown>, string | null][] = [
      ["no model", { input: "x", questions: [question] }, "model"],
      ["no input", { model: "localdecider", questions: [question] }, "input"],
      ["no questions", { model: "localdecider", input: "x", questions: [] }, "questions"],
      ["401 questions", { model: "localdecider", input: "x", questions: Array(401).fill(question) }, "questions"],
      [
        "an unknown question type",
        { model: "localdecider", input: "x", questions: [{ type: "noul", instructions: "?" }] },
        "questions[0].type",
      ],
      [
        "empty instructions",
        { model: "localdecider", input: "x", questions: [{ type: "predicate", instructions: " " }] },
        "questions[0].instructions",
      ],
      [
        "a choice of one value",
        {
          model: "localdecider",
          input: "x",
          questions: [{ type: "choice", instructions: "?", choices: [{ value: "a" }] }],
        },
        "questions[0].choices",
      ],
      [
        "a repeated value",
        {
          model: "localdecider",
          input: "x",
          questions: [
            { type: "choice", instructions: "?", choices: [{ value: true }, { value: "a" }, { value: true }] },
          ],
        },
        "questions[0].choices[2].value",
      ],
      [
        "256 values",
        {
          model: "localdecider",
          input: "x",
          questions: [
            { type: "choice", instructions: "?", choices: Array.from({ length: 256 }, (_, i) => ({ value: `v${i}` })) },
          ],
        },
        "questions[0].choices",
      ],
      [
        "a score of 11 levels",
        {
          model: "localdecider",
          input: "x",
          questions: [
            { type: "score", instructions: "?", levels: Array.from({ length: 11 }, (_, i) => ({ label: `l${i}` })) },
          ],
        },
        "questions[0].levels",
      ],
      [
        "a role it does not know",
        { model: "localdecider", input: [{ role: "tool", content: "x" }], questions: [question] },
        "input[0].role",
      ],
      [
        "a tool output without its call",
        {
          model: "localdecider",
          input: [{ type: "function_call_output", call_id: "c9", output: "x" }],
          questions: [question],
        },
        "input[0].call_id",
      ],
      [
        "a safety_identifier of 65 characters",
        { model: "localdecider", input: "x", questions: [question], safety_identifier: "u".repeat(65) },
        "safety_identifier",
      ],
      [
        "an image for a backend that takes none",
        {
          model: "localdecider",
          input: [
            {
              role: "user",
              content: [
                { type: "input_text", text: "see" },
                { type: "input_image", image_url: `data:image/png;base64,${PNG_ASSET.data_base64}` },
              ],
            },
          ],
          questions: [question],
        },
        "input[0].content[1]",
      ],
      [
        "an image in the instructions for a backend that takes none",
        {
          model: "localdecider",
          input: "x",
          questions: [
            {
              type: "predicate",
              instructions: [{ type: "input_image", image_url: `data:image/png;base64,${PNG_ASSET.data_base64}` }],
            },
          ],
        },
        "questions[0].instructions[0]",
      ],
      ["an unknown field", { model: "localdecider", input: "x", questions: [question], temperature: 0 }, null],
    ];
    it.each(cases)("%s", async (_what, body, param) => {
      h = await harness();
      server = await listen(h);
      const call = client().decisions.create(body as never);
      await expect(call).rejects.toBeInstanceOf(BadRequestError);
      const err = (await call.catch((e: unknown) => e)) as BadRequestError;
      expect(err.status).toBe(400);
      expect(err.error).toMatchObject({ type: "invalid_request_error", param, code: "invalid_request" });
      expect(typeof (err.error as { message: string }).message).toBe("string");
      expect(h.fake.calls).toBe(0);
      expect(h.fake.requests).toHaveLength(0);
    });
  });

  it("answers errors with the SDK's classes: 404 unknown model, 401, 413, 429 with Retry-After, 5xx", async () => {
    h = await harness({ apiKey: "k", maxInflight: 1, maxQueue: 3, questionsPerCall: 1, maxQuestions: 3 });
    server = await listen(h);
    const one = { model: "localdecider", input: "x", questions: [{ type: "predicate" as const, instructions: "?" }] };

    const wrongKey = client("nope").decisions.create(one);
    await expect(wrongKey).rejects.toBeInstanceOf(AuthenticationError);
    await expect(wrongKey).rejects.toMatchObject({
      status: 401,
      error: { type: "authentication_error", code: "unauthorized" },
    });

    const unknown = client().decisions.create({ ...one, model: "gpt-6-luna" });
    await expect(unknown).rejects.toBeInstanceOf(NotFoundError);
    await expect(unknown).rejects.toMatchObject({ error: { param: "model", code: "model_not_found" } });

    const many = client().decisions.create({ ...one, questions: Array(4).fill(one.questions[0]) });
    await expect(many).rejects.toBeInstanceOf(APIError);
    await expect(many).rejects.toMatchObject({ status: 413, error: { code: "too_many_questions" } });

    h.fake.faults = ["http500"];
    const down = client().decisions.create(one);
    await expect(down).rejects.toBeInstanceOf(InternalServerError);
    await expect(down).rejects.toMatchObject({ status: 502, error: { type: "server_error", code: "upstream_error" } });

    h.fake.holding = true;
    const held = client().decisions.create({ ...one, questions: Array(3).fill(one.questions[0]) });
    held.catch(() => {});
    await waitFor(() => h.fake.inflight === 1, "one call in flight");
    const refused = client().decisions.create({ ...one, questions: Array(2).fill(one.questions[0]) });
    await expect(refused).rejects.toBeInstanceOf(RateLimitError);
    const err = (await refused.catch((e: unknown) => e)) as RateLimitError;
    expect(Number(err.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(err.error).toMatchObject({ type: "rate_limit_error", code: "queue_full" });
    h.fake.release();
    await expect(held).resolves.toMatchObject({
      answers: [{ type: "predicate" }, { type: "predicate" }, { type: "predicate" }],
    });
    expect(h.fake.calls).toBe(4);
  });

  it("keeps the decider's own error body on /v1/systemone", async () => {
    h = await harness();
    const res = await request(h.app).post("/v1/systemone").send({ model: "localdecider", state: "x", questions: {} });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ code: "invalid_request", error: "Invalid request body" });
    const bad = await request(h.app).post("/v1/decisions").send("{not json").set("content-type", "application/json");
    expect(bad.status).toBe(400);
    expect(bad.body).toStrictEqual({
      error: {
        message: "Request body is not valid JSON",
        type: "invalid_request_error",
        param: null,
        code: "invalid_json",
      },
    });
  });
});
