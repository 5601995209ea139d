import type { Question } from "@localdecider/contracts";
import { callSchema, packCalls, partsOf, planRequest } from "../src/decide/plan";

const choice = (n: number): Question => ({
  type: "choice",
  criteria: Object.fromEntries(Array.from({ length: n }, (_, i) => [`l${i}`, null])),
});

describe("planRequest", () => {
  it("packs at most QUESTIONS_PER_CALL questions and OUTCOMES_PER_CALL outcomes into a call", () => {
    const questions: Record<string, Question> = {
      a: { type: "noul" },
      b: { type: "score", criteria: ["x", "y", "z"] },
      c: choice(20),
      d: { type: "noul" },
    };
    const plan = planRequest(questions, { questionsPerCall: 3, outcomesPerCall: 21 });
    expect(plan.firstRound.map((call) => call.map((p) => p.question))).toStrictEqual([["a", "b"], ["c"], ["d"]]);
    expect(plan.callCount).toBe(3);
  });

  it("splits a choice of more than 20 labels into chunks and counts the final round", () => {
    const plan = planRequest({ big: choice(255) }, { questionsPerCall: 16, outcomesPerCall: 128 });
    const chunks = plan.firstRound.flat();
    expect(chunks.map((p) => p.options.length)).toStrictEqual([...new Array(12).fill(20), 15]);
    expect(chunks.map((p) => p.round)).toStrictEqual(
      Array.from({ length: 13 }, (_, index) => ({ kind: "chunk", index, of: 13 })),
    );
    expect(plan.firstRound.map((c) => c.length)).toStrictEqual([6, 6, 1]);
    expect(plan.finalSizes).toStrictEqual(new Map([["big", 13]]));
    expect(plan.callCount).toBe(4);
  });

  it("keeps a choice of exactly 20 labels whole", () => {
    expect(partsOf("c", choice(20)).map((p) => p.round)).toStrictEqual([{ kind: "whole" }]);
  });
});

describe("codes and schema", () => {
  it("uses booleans for noul, level numbers for score and letters for choice, as enums in a strict object", () => {
    const parts = [
      ...partsOf("n", { type: "noul", criteria: { true: "yes", false: null } }),
      ...partsOf("s", { type: "score", criteria: ["a", "b", "c"] }),
      ...partsOf("c", choice(3)),
    ];
    expect(parts.map((p) => p.options.map((o) => o.code))).toStrictEqual([
      [true, false],
      [0, 1, 2],
      ["A", "B", "C"],
    ]);
    expect(callSchema(parts)).toStrictEqual({
      type: "object",
      properties: {
        q1: { type: "boolean" },
        q2: { type: "integer", enum: [0, 1, 2] },
        q3: { type: "string", enum: ["A", "B", "C"] },
      },
      required: ["q1", "q2", "q3"],
      additionalProperties: false,
    });
  });

  it("packCalls never leaves an empty call and keeps order", () => {
    const items = [3, 5, 2, 7, 1].map((n) => ({ options: new Array(n) }));
    expect(
      packCalls(items, { questionsPerCall: 2, outcomesPerCall: 8 }).map((c) => c.map((i) => i.options.length)),
    ).toStrictEqual([[3, 5], [2], [7, 1]]);
  });
});
