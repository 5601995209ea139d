import OpenAI, { BadRequestError } from "openai7";
import request from "supertest";
import { listen } from "../helpers";
import { PNG_ASSET } from "../image-assets";
import { type NativeHarness, nativeHarness, questionsOfCalls } from "./harness";

/**
 * `POST /v1/decisions` through openai@7.59.0 in front of a native System One server (the llama.cpp-shaped fake):
 * the questions go out in one call under unique names, typed values as distinct labels, the server's
 * distributions come back as typed answers in order, a declined question is a refusal (never retried), and
 * images reach a server that takes them.
 */
describe("POST /v1/decisions in front of a native System One server", () => {
  let h: NativeHarness;
  let server: { url: string; close: () => Promise<void> };
  const client = () => new OpenAI({ apiKey: "k", baseURL: `${server.url}/v1`, maxRetries: 0 });

  afterEach(async () => {
    await server?.close();
    await h?.close();
  });

  it("sends typed values as distinct labels and maps the server's distribution back to them, in order", async () => {
    h = await nativeHarness({
      setup: (fake) =>
        (fake.script = (q) =>
          q.type === "choice"
            ? { true: 1, "true (boolean)": 3, "10": 4 }
            : Object.fromEntries(q.labels.map((l, i) => [l, i + 1]))),
    });
    server = await listen(h);
    const decision = await client().decisions.create({
      model: "localdecider",
      input: [{ role: "user", content: "Ship it?" }],
      questions: [
        {
          type: "choice",
          name: "2",
          instructions: "Which?",
          choices: [{ value: "true" }, { value: true, description: "yes" }, { value: "10" }],
        },
        { type: "predicate", name: "1", instructions: "Is it?" },
        { type: "score", instructions: "How much?", levels: [{ label: "low" }, { label: "high" }] },
      ],
    });
    expect(h.fake.calls).toBe(1);
    const [sent] = questionsOfCalls(h.fake);
    expect(Object.keys(sent ?? {}).sort()).toStrictEqual(["1", "2", "question 3"]);
    expect(sent?.["2"]?.criteria).toStrictEqual({ true: null, "true (boolean)": "yes", "10": null });
    const [choice, predicate, score] = decision.answers;
    expect(decision.answers.map((a) => a.name)).toStrictEqual(["2", "1", null]);
    if (choice?.type !== "choice" || predicate?.type !== "predicate" || score?.type !== "score")
      throw new Error("types");
    expect(choice.probabilities).toStrictEqual([
      { value: "true", probability: 1 / 8 },
      { value: true, probability: 3 / 8 },
      { value: "10", probability: 4 / 8 },
    ]);
    expect(choice.choice).toBe("10");
    expect(predicate.probability).toBeCloseTo(1 / 3, 12);
    expect(score.score).toBeCloseTo(2 / 3, 12);
    expect(decision.usage.input_tokens).toBeGreaterThan(0);
    expect(decision.usage.total_tokens).toBe(decision.usage.input_tokens + decision.usage.output_tokens);
  });

  it("passes a question the server declined on as a refusal, unretried, the others answered; /v1/systemone answers 502", async () => {
    h = await nativeHarness({ setup: (fake) => (fake.faults = ["refusal"]) });
    server = await listen(h);
    const decision = await client().decisions.create({
      model: "localdecider",
      input: "x",
      questions: [
        { type: "predicate", name: "a", instructions: "?" },
        { type: "predicate", name: "b", instructions: "?" },
      ],
    });
    expect(decision.answers[0]).toStrictEqual({ type: "refusal", name: "a" });
    expect(decision.answers[1]).toMatchObject({ type: "predicate", name: "b" });
    expect(h.fake.calls).toBe(1);

    h.fake.faults = ["refusal"];
    const res = await request(h.app)
      .post("/v1/systemone")
      .send({ model: "localdecider", state: "x", questions: { a: { type: "noul", instructions: "?" } } });
    expect(res.status).toBe(502);
    expect(res.body.code).toBe("upstream_malformed");
  });

  it("passes an image part on to a server that takes images, named where the part was", async () => {
    h = await nativeHarness({ setup: (fake) => (fake.vision = true) });
    server = await listen(h);
    const url = `data:image/png;base64,${PNG_ASSET.data_base64}`;
    await client().decisions.create({
      model: "localdecider",
      input: [
        {
          role: "user",
          content: [
            { type: "input_text", text: "Is this a cat?" },
            { type: "input_image", image_url: url },
          ],
        },
      ],
      questions: [{ type: "predicate", instructions: "Is it a cat?" }],
    });
    const sent = h.fake.requests[0] as { images?: string[]; state?: Record<string, string> };
    expect(sent.images).toStrictEqual([url]);
    expect(sent.state).toStrictEqual({ "1. user message": "Is this a cat?\n\n[image: image-1]" });
  });

  it("refuses an image that is no data URL of a PNG or JPEG, before any call", async () => {
    h = await nativeHarness({ setup: (fake) => (fake.vision = true) });
    server = await listen(h);
    const call = client().decisions.create({
      model: "localdecider",
      input: [{ role: "user", content: [{ type: "input_image", image_url: "https://example.com/cat.png" }] }],
      questions: [{ type: "predicate", instructions: "Is it a cat?" }],
    });
    await expect(call).rejects.toBeInstanceOf(BadRequestError);
    await expect(call).rejects.toMatchObject({ error: { param: "input[0].content[0].image_url" } });
    expect(h.fake.calls).toBe(0);
  });
});
