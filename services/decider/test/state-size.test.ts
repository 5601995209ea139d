import fc from "fast-check";
import request from "supertest";
import { requestWeight } from "../src/decide/decider";
import { jsonLengths, PRETTY_OVERHEAD, renderState, ShownState } from "../src/decide/prompt";
import { type Harness, harness, waitFor } from "./helpers";

/** The state of the review's attack: 63 nested arrays around 99,000 zeros (204 KB as a body). */
const deepZeros = () => {
  let state: unknown = new Array(99_000).fill(0);
  for (let i = 0; i < 62; i++) state = [state];
  return state;
};

/** The state's text as the fake upstream received it: between the fence lines of the prompt. */
function stateShown(body: Record<string, unknown>): string {
  const user = (body.messages as { role: string; content: string }[]).find((m) => m.role === "user")?.content ?? "";
  const match = /<<<STATE [0-9a-f]+>>>\n([\s\S]*)\n<<<END OF STATE [0-9a-f]+>>>/.exec(user);
  if (match === null) throw new Error("no fenced state in the prompt");
  return match[1] as string;
}

describe("how large a state may render for the model", () => {
  it("jsonLengths counts exactly what JSON.stringify writes, compact and indented, without writing it (fast-check)", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), (value) => {
        const { compact, pretty } = jsonLengths(value);
        expect(compact).toBe(JSON.stringify(value).length);
        expect(pretty).toBe(JSON.stringify(value, null, 2).length);
      }),
      { numRuns: 500 },
    );
  });

  it("jsonLengths counts escapes too: quotes, backslashes, control characters, lone and paired surrogates, odd keys (fast-check)", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4, stringUnit: "binary" }), (value) => {
        const { compact, pretty } = jsonLengths(value);
        expect(compact).toBe(JSON.stringify(value).length);
        expect(pretty).toBe(JSON.stringify(value, null, 2).length);
      }),
      { numRuns: 500 },
    );
    expect(jsonLengths({ '"\\\u0000\ud800': "\u2028\udc00\ud83d\ude00", __proto__x: [-0, 1e21, 5e-7] }).compact).toBe(
      JSON.stringify({ '"\\\u0000\ud800': "\u2028\udc00\ud83d\ude00", __proto__x: [-0, 1e21, 5e-7] }).length,
    );
  });

  it("a request's weight with its state measured already (ShownState) is its weight walked whole (fast-check)", () => {
    fc.assert(
      fc.property(
        fc.jsonValue({ maxDepth: 4 }),
        fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })),
        (state, rest) => {
          const body = { ...rest, state };
          expect(requestWeight(body, new ShownState(state, Number.MAX_SAFE_INTEGER))).toBe(requestWeight(body));
        },
      ),
      { numRuns: 300 },
    );
  });

  it("a deeply nested state is shown compact (indenting it would add 12 M characters), a shallow one indented as before", () => {
    const deep = deepZeros();
    expect(JSON.stringify(deep, null, 2).length).toBeGreaterThan(12_000_000);
    expect(renderState(deep)).toBe(JSON.stringify(deep));
    expect(renderState({ n: 1, s: ["x"] })).toBe(JSON.stringify({ n: 1, s: ["x"] }, null, 2));
    // Indenting that adds up to PRETTY_OVERHEAD characters is kept: a wide flat array of 1,000 numbers.
    const wide = Array.from({ length: 1000 }, (_, i) => i);
    expect(JSON.stringify(wide, null, 2).length - JSON.stringify(wide).length).toBeLessThan(PRETTY_OVERHEAD);
    expect(renderState(wide)).toBe(JSON.stringify(wide, null, 2));
  });

  it("a request's weight counts two bytes a character and a fixed cost a value", () => {
    expect(requestWeight("ab")).toBe(2 * 4 + 64);
    expect(requestWeight({ a: [1, 2] })).toBe(2 * JSON.stringify({ a: [1, 2] }).length + 64 * 4);
  });
});

describe("POST /v1/systemone with states that would blow up the prompt", () => {
  let h: Harness;
  afterEach(async () => {
    await h?.close();
  });

  it("the deeply nested state reaches the model compact: the prompt's state is no longer than the body", async () => {
    h = await harness({ bodyLimit: "1mb" });
    const state = deepZeros();
    const res = await request(h.app)
      .post("/v1/systemone")
      .send({ model: "localdecider", state, questions: { a: { type: "noul", instructions: "Is it?" } } });
    expect(res.status).toBe(200);
    expect(h.fake.requests).toHaveLength(1);
    expect(stateShown(h.fake.requests[0] as Record<string, unknown>)).toBe(JSON.stringify(state));
  });

  it("a state that renders past the body limit (numbers written short: 1e20 is 21 digits) gets 413 naming the limit, and nothing is sent", async () => {
    h = await harness({ bodyLimit: "64kb" });
    const body = `{"model":"localdecider","questions":{"a":{"type":"noul","instructions":"?"}},"state":[${new Array(12_000).fill("1e20").join(",")}]}`;
    expect(body.length).toBeLessThan(64 * 1024);
    const res = await request(h.app).post("/v1/systemone").set("content-type", "application/json").send(body);
    expect(res.status).toBe(413);
    expect(res.body).toStrictEqual({
      code: "payload_too_large",
      // 12,000 numbers of 21 digits, indented (a flat array is shown indented: it adds under PRETTY_OVERHEAD).
      error:
        "the state renders to 300002 characters for the model, more than the 65536 allowed (LOCALDECIDER_BODY_LIMIT); send a smaller state",
    });
    expect(h.fake.calls).toBe(0);
  });

  it("requests waiting for a slot hold at most maxHeldBytes: past it the next one gets 429 queue_full with Retry-After, and once they finish it is admitted again", async () => {
    const state = "x".repeat(20_000);
    const payload = (name: string) => ({
      model: "localdecider",
      state,
      questions: { [name]: { type: "noul", instructions: "Is it?" } },
    });
    const weight = requestWeight(payload("a0"));
    // Room for three such requests, not four.
    h = await harness({ maxInflight: 1, maxHeldBytes: 3 * weight + weight / 2 });
    h.fake.holding = true;
    const held = ["a0", "a1", "a2"].map((name) =>
      request(h.app)
        .post("/v1/systemone")
        .send(payload(name))
        .then((r) => r),
    );
    await waitFor(() => h.fake.inflight === 1, "the first request's call in flight");
    await waitFor(() => h.limiter.counts().queued === 2, "two requests waiting for the slot");
    const refused = await request(h.app).post("/v1/systemone").send(payload("a3"));
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe("queue_full");
    expect(Number(refused.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    h.fake.release();
    for (const res of await Promise.all(held)) expect(res.status).toBe(200);
    const again = await request(h.app).post("/v1/systemone").send(payload("a3"));
    expect(again.status).toBe(200);
    expect(h.fake.calls).toBe(4);
  });
});
