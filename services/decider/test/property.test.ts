import fc from "fast-check";
import request from "supertest";
import type { Flavour } from "./fake-upstream/server";
import { type Harness, harness } from "./helpers";

// `__proto__` is refused with 422 (see the systemone suite); every other name must come back.
const name = fc.string({ minLength: 1, maxLength: 10 }).filter((n) => n !== "__proto__");
const entry = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.constant(null),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.oneof(fc.string({ maxLength: 5 }), fc.integer()), { maxKeys: 3 }),
  fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
);
/** Instructions are required and not empty (422 otherwise, see the systemone suite): text, an object or an array. */
const instructions = fc.oneof(
  fc.string({ minLength: 1, maxLength: 20 }).filter((s) => s.trim() !== ""),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.oneof(fc.string({ maxLength: 5 }), fc.integer()), {
    minKeys: 1,
    maxKeys: 3,
  }),
  fc.array(fc.string({ maxLength: 5 }), { minLength: 1, maxLength: 3 }),
);
const question = fc.oneof(
  fc.record(
    {
      type: fc.constant("noul"),
      instructions,
      criteria: fc.record({ true: entry, false: entry }, { requiredKeys: [] }),
    },
    { requiredKeys: ["type", "instructions"] },
  ),
  fc.record({
    type: fc.constant("choice"),
    instructions,
    criteria: fc
      .uniqueArray(name, { minLength: 1, maxLength: 45 })
      .chain((labels) =>
        fc.tuple(...labels.map(() => entry)).map((descs) => Object.fromEntries(labels.map((l, i) => [l, descs[i]]))),
      ),
  }),
  fc.record({
    type: fc.constant("score"),
    instructions,
    criteria: fc.array(entry, { minLength: 2, maxLength: 10 }),
  }),
);
const questions = fc.dictionary(name, question, { minKeys: 1, maxKeys: 20 });
const state = fc.oneof(
  fc.string({ maxLength: 50 }),
  fc.constant(null),
  fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }),
);

function argmaxKey(probabilities: Record<string, number>): string {
  const entries = Object.entries(probabilities);
  return entries.reduce((best, e) => (e[1] > best[1] ? e : best))[0];
}

function checkDistribution(probabilities: Record<string, number>, keys: string[]): void {
  expect(Object.keys(probabilities)).toStrictEqual(keys);
  for (const p of Object.values(probabilities)) {
    expect(p).toBeGreaterThanOrEqual(0);
    expect(p).toBeLessThanOrEqual(1);
  }
  expect(Math.abs(Object.values(probabilities).reduce((a, b) => a + b, 0) - 1)).toBeLessThan(1e-9);
}

describe.each<Flavour>(["llama", "vllm", "ollama"])("POST /v1/systemone over random question sets (%s)", (flavour) => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness({ flavour, maxQueue: 1000, questionsPerCall: 7, outcomesPerCall: 40 });
  });
  afterAll(async () => {
    await h.close();
  });

  it("answers every question with a valid distribution and never a 5xx", async () => {
    await fc.assert(
      fc.asyncProperty(questions, state, fc.double({ min: 0, max: 0.5, noNaN: true }), async (qs, st, junk) => {
        h.fake.junk = junk;
        const res = await request(h.app)
          .post("/v1/systemone")
          .send({ model: "localdecider", state: st, questions: qs });
        expect(res.status).toBe(200);
        expect(Object.keys(res.body.answers).sort()).toStrictEqual(Object.keys(qs).sort());
        for (const [name, q] of Object.entries(qs)) {
          const a = res.body.answers[name];
          expect(a.type).toBe(q.type);
          if (q.type === "noul") {
            expect(a.noul).toBeGreaterThanOrEqual(0);
            expect(a.noul).toBeLessThanOrEqual(1);
          } else if (q.type === "choice") {
            checkDistribution(a.probabilities, Object.keys(q.criteria));
            expect(a.choice).toBe(argmaxKey(a.probabilities));
            expect(a.confidence).toBeGreaterThanOrEqual(0);
            expect(a.confidence).toBeLessThanOrEqual(1);
          } else {
            const levels = q.criteria.map((_, i) => String(i));
            checkDistribution(a.probabilities, levels);
            const expected = levels.reduce((s, l, i) => s + i * (a.probabilities[l] as number), 0);
            expect(a.score).toBeCloseTo(expected, 12);
            expect(a.confidence).toBeGreaterThanOrEqual(0);
            expect(a.confidence).toBeLessThanOrEqual(1);
            // Through JSON: fast-check's dictionaries have a null prototype, the parsed body does not.
            const legend = Object.fromEntries(q.criteria.map((c, i) => [String(i), c]));
            expect(a.legend).toStrictEqual(JSON.parse(JSON.stringify(legend)));
          }
        }
      }),
      { numRuns: 60 },
    );
  }, 60_000);
});
