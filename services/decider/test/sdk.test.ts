import { IMAGES_HEADER } from "@localdecider/contracts/decider";
import {
  APIError,
  AuthenticationError,
  BadRequestError,
  choice,
  InternalServerError,
  noul,
  RateLimitError,
  score,
  TypeSafeClient,
  UnprocessableEntityError,
} from "@typesafe-ai/sdk";
import { type Harness, harness, listen, waitFor } from "./helpers";
import { PNG_ASSET } from "./image-assets";

describe("the official @typesafe-ai/sdk against the service", () => {
  let h: Harness;
  let server: { url: string; close: () => Promise<void> };
  const client = (apiKey = "k") =>
    new TypeSafeClient({ apiKey, baseURL: server.url, retry: { maxRetries: 0 }, logLevel: "off" });

  afterEach(async () => {
    await server.close();
    await h.close();
  });

  it("systemOne() answers every question with the SDK's default model and only baseURL changed", async () => {
    h = await harness({ apiKey: "k" });
    server = await listen(h);
    h.fake.script = (q): Record<string, number> =>
      q.name === "billing"
        ? { true: 0.9, false: 0.1 }
        : q.name === "tone"
          ? { calm: 1, angry: 3 }
          : { "0": 1, "1": 1, "2": 2 };
    const result = await client().systemOne({
      state: "I was charged twice. Please help!",
      questions: {
        billing: noul("Is this about billing?"),
        tone: choice("What is the tone?", { calm: null, angry: "shouting" }),
        urgency: score("How urgent?", ["not", "somewhat", "very"]),
      },
    });
    expect(result.model).toBe("localdecider-0.1.0/test-model");
    expect(result.answers.billing.noul).toBeCloseTo(0.9, 12);
    expect(result.answers.tone.choice).toBe("angry");
    expect(result.answers.tone.probabilities.angry).toBeCloseTo(0.75, 12);
    expect(result.answers.tone.confidence).toBeCloseTo(0.5, 12);
    expect(result.answers.urgency.score).toBeCloseTo(0.25 + 1, 12);
    expect(result.answers.urgency.legend).toStrictEqual({ "0": "not", "1": "somewhat", "2": "very" });
    // One call per question, one decoded token each.
    expect(result.usage).toStrictEqual({ input_tokens: 300, output_tokens: 3 });
  });

  it("withResponse() exposes the request id the service echoed in x-typesafe-request-id", async () => {
    h = await harness();
    server = await listen(h);
    const { requestId, response } = await client()
      .systemOne({ state: null, questions: { a: noul("?") } }, { headers: { "x-request-id": "sdk-req-1" } })
      .withResponse();
    expect(requestId).toBe("sdk-req-1");
    expect(response.headers.get("x-request-id")).toBe("sdk-req-1");
  });

  it("models.list() returns the model cards", async () => {
    h = await harness();
    server = await listen(h);
    const models = await client().models.list();
    expect(models.map((m) => m.name)).toStrictEqual(["localdecider", "jev-latest", "jev"]);
    for (const m of models) expect(m.release_date).toBe("2026-11-22");
  });

  it("errors surface as the SDK's classes: 401, 400, 429 and 5xx", async () => {
    h = await harness({ apiKey: "k", maxInflight: 1, maxQueue: 3, questionsPerCall: 1 });
    server = await listen(h);
    const wrongKey = client("nope").systemOne({ state: null, questions: { a: noul("Is it?") } });
    await expect(wrongKey).rejects.toBeInstanceOf(AuthenticationError);
    await expect(wrongKey).rejects.toMatchObject({ status: 401, message: "401 Invalid API key" });

    const unknownModel = client().systemOne({ model: "gpt-9", state: null, questions: { a: noul("Is it?") } });
    await expect(unknownModel).rejects.toBeInstanceOf(BadRequestError);

    h.fake.faults = ["http500"];
    const upstreamDown = client().systemOne({ state: null, questions: { a: noul("Is it?") } });
    await expect(upstreamDown).rejects.toBeInstanceOf(InternalServerError);
    await expect(upstreamDown).rejects.toMatchObject({ status: 502, body: { code: "upstream_error" } });

    h.fake.holding = true;
    const held = client().systemOne({
      state: null,
      questions: { a: noul("Is it?"), b: noul("Is it?"), c: noul("Is it?") },
    });
    held.catch(() => {});
    await waitFor(() => h.fake.inflight === 1, "one call in flight");
    // 2 calls still queued + 2 more > MAX_QUEUE 3.
    const refused = client().systemOne({ state: null, questions: { d: noul("Is it?"), e: noul("Is it?") } });
    await expect(refused).rejects.toBeInstanceOf(RateLimitError);
    await expect(refused).rejects.toMatchObject({ status: 429, retryAfterMs: expect.any(Number) });
    h.fake.release();
    await expect(held).resolves.toMatchObject({
      answers: { a: { type: "noul" }, b: { type: "noul" }, c: { type: "noul" } },
    });
  });

  describe("with the SDK's own retries on (2, its default), counting what reaches the service", () => {
    let sent: string[];
    /** The SDK as shipped, retrying 408, 429 and 5xx twice, with its waits cut short and every attempt counted. */
    const retrying = () =>
      new TypeSafeClient({
        apiKey: "k",
        baseURL: server.url,
        logLevel: "off",
        retry: { maxRetries: 2, backoffInitialMs: 1, backoffMaxMs: 1, respectRetryAfter: false },
        fetch: (input, init) => {
          sent.push(new Headers(init?.headers).get("x-typesafe-retry-count") ?? "first");
          return fetch(input, init);
        },
      });
    beforeEach(() => {
      sent = [];
    });

    it("a validation failure (its own noul() without instructions) is a 422 UnprocessableEntityError, sent once", async () => {
      h = await harness();
      server = await listen(h);
      const call = retrying().systemOne({ state: "s", questions: { a: noul() } });
      await expect(call).rejects.toBeInstanceOf(UnprocessableEntityError);
      await expect(call).rejects.toMatchObject({
        status: 422,
        message: "422 Invalid request body",
        body: {
          error: "Invalid request body",
          code: "invalid_request",
          details: [
            {
              path: "questions.a.instructions",
              message: "instructions are required: the question put to the model, as text (or a JSON object or array)",
            },
          ],
        },
      });
      expect(sent).toStrictEqual(["first"]);
      expect(h.fake.calls).toBe(0);
    });

    it("too many questions is a 413 APIError, sent once", async () => {
      h = await harness({ maxQuestions: 1 });
      server = await listen(h);
      const call = retrying().systemOne({ state: "s", questions: { a: noul("Is it?"), b: noul("Is it?") } });
      await expect(call).rejects.toBeInstanceOf(APIError);
      await expect(call).rejects.toMatchObject({
        status: 413,
        body: {
          error:
            "this request holds 2 questions, more than the 1 one request may hold (LOCALDECIDER_MAX_QUESTIONS); send them in several requests",
          code: "too_many_questions",
        },
      });
      expect(sent).toStrictEqual(["first"]);
    });

    it("images and a box question, opted in, are a 422 UnprocessableEntityError naming the backend, sent once", async () => {
      h = await harness();
      server = await listen(h);
      // SDK 0.6.0 models neither: it forwards a request's extra fields (assets) and sends any question given.
      const request = {
        state: "a kitchen: `photo`",
        questions: { mug: { type: "box", instructions: "the coffee mug in `photo`" } },
        assets: { photo: PNG_ASSET },
      } as unknown as Parameters<TypeSafeClient["systemOne"]>[0];
      const call = retrying().systemOne(request, { headers: { [IMAGES_HEADER]: "true" } });
      await expect(call).rejects.toBeInstanceOf(UnprocessableEntityError);
      await expect(call).rejects.toMatchObject({
        status: 422,
        body: {
          error:
            "images and box questions need a native System One upstream; this decider runs a chat model server (OpenAI-compatible, answers read from token logprobs)",
          code: "images_unsupported",
        },
      });
      expect(sent).toStrictEqual(["first"]);
    });

    it("a 5xx, by contrast, is sent three times: the first try and the SDK's two retries", async () => {
      h = await harness();
      server = await listen(h);
      h.fake.faults = ["http500", "http500", "http500"];
      const call = retrying().systemOne({ state: "s", questions: { a: noul("Is it?") } });
      await expect(call).rejects.toBeInstanceOf(InternalServerError);
      expect(sent).toStrictEqual(["first", "1", "2"]);
    });
  });
});
