import { FakeSystemOne } from "../fake-systemone/server";

/**
 * The fake native server itself, held to llama.cpp's published contract (tools/server/tests/unit/
 * test_systemone.py: test_systemone_wire_contract, ERROR_CONTRACT, ANSWER_KEYS; tools/server/README.md), so
 * that what the decider is tested against is what a real llama-server answers.
 */
describe("the fake System One server follows llama.cpp's published contract", () => {
  let fake: FakeSystemOne;
  let url: string;
  beforeEach(async () => {
    fake = new FakeSystemOne();
    url = await fake.start();
  });
  afterEach(async () => {
    await fake.stop();
  });

  const questions = {
    route: {
      type: "choice",
      instructions: "Which team?",
      criteria: { billing: "payments", shipping: null, technical: null },
    },
    urgency: { type: "score", instructions: "How urgent?", criteria: ["can wait", "this week", "today", "right now"] },
    angry: { type: "noul", instructions: "Is the customer angry?" },
  };

  async function post(body: unknown): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
    const res = await fetch(`${url}/v1/systemone`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown>, headers: res.headers };
  }

  function envelope(res: { status: number; body: Record<string, unknown> }, type: string): void {
    expect(Object.keys(res.body)).toStrictEqual(["error"]);
    const error = res.body.error as Record<string, unknown>;
    expect(Object.keys(error).sort()).toStrictEqual(["code", "message", "type"]);
    expect(error.code).toBe(res.status);
    expect(error.type).toBe(type);
    expect(error.message).toEqual(expect.any(String));
  }

  it("answers in request order with exactly each type's keys, the model that answered and output_tokens 0", async () => {
    const res = await post({ model: "jev-latest", state: "I was charged twice.", questions });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toStrictEqual(["answers", "model", "usage"]);
    expect(res.body.model).toBe("test-model");
    const answers = res.body.answers as Record<string, Record<string, unknown>>;
    expect(Object.keys(answers)).toStrictEqual(["route", "urgency", "angry"]);
    expect(Object.keys(answers.route as object).sort()).toStrictEqual([
      "choice",
      "confidence",
      "probabilities",
      "type",
    ]);
    expect(Object.keys(answers.urgency as object).sort()).toStrictEqual([
      "confidence",
      "legend",
      "probabilities",
      "score",
      "type",
    ]);
    expect(Object.keys(answers.angry as object).sort()).toStrictEqual(["noul", "type"]);
    expect(Object.keys(answers.urgency?.probabilities as object)).toStrictEqual(["0", "1", "2", "3"]);
    expect(answers.urgency?.legend).toStrictEqual({
      "0": "can wait",
      "1": "this week",
      "2": "today",
      "3": "right now",
    });
    expect(res.body.usage).toStrictEqual({ input_tokens: expect.any(Number), output_tokens: 0 });
  });

  it("400 invalid_request_error for a body that is not JSON", async () => {
    const res = await post('{"state": "unterminated');
    expect(res.status).toBe(400);
    envelope(res, "invalid_request_error");
  });

  it.each([
    [{ questions }, '"state" must be provided'],
    [{ state: "s", questions: {} }, '"questions" must be a non-empty object'],
    [{ state: "s", model: 123, questions }, '"model" must be a string'],
    [{ state: "s", questions: { q: { type: "noul", instructions: "" } } }, 'questions.q: "instructions"'],
    [{ state: "s", questions: { q: { type: "score", instructions: "x", criteria: ["one"] } } }, "2 to 10 levels"],
  ])("422 unprocessable_entity_error for %j", async (body, message) => {
    const res = await post(body);
    expect(res.status).toBe(422);
    envelope(res, "unprocessable_entity_error");
    expect((res.body.error as { message: string }).message).toContain(message);
  });

  it("422 naming the model's option limit for one option too many", async () => {
    fake.optionLimit = 52;
    const criteria = Object.fromEntries(Array.from({ length: 53 }, (_, i) => [`o${i}`, null]));
    const res = await post({ state: "s", questions: { q: { type: "choice", instructions: "x", criteria } } });
    expect(res.status).toBe(422);
    expect((res.body.error as { message: string }).message).toBe(
      "questions.q: too many options (53), this model supports at most 52",
    );
  });

  it("413 request_too_large_error past the prompt-token budget, without Retry-After", async () => {
    fake.promptBudget = 1;
    const res = await post({ state: "s", questions });
    expect(res.status).toBe(413);
    envelope(res, "request_too_large_error");
    expect(res.headers.get("retry-after")).toBeNull();
  });

  it("429 rate_limit_error with Retry-After when the decision queue is full", async () => {
    fake.maxQueued = 2;
    const res = await post({ state: "s", questions });
    expect(res.status).toBe(429);
    envelope(res, "rate_limit_error");
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  });

  it("501 not_supported_error when the model is not a decision model, and for images without image input", async () => {
    const images = await post({ state: "s", questions, images: ["data:image/png;base64,iVBORw0KGgo="] });
    expect(images.status).toBe(501);
    envelope(images, "not_supported_error");
    fake.decision = false;
    const res = await post({ state: "s", questions });
    expect(res.status).toBe(501);
    envelope(res, "not_supported_error");
  });
});
