import type { Question as SystemOneQuestion, TextQuestion } from "@localdecider/contracts/decider";
import type { PartResult } from "../src/decide/answer";
import {
  finalRound,
  type Limits,
  packPrompts,
  planRequest as planTask,
  partsOf as taskParts,
} from "../src/decide/plan";
import { prefill, readingOf } from "../src/decide/probe";
import { systemOneQuestion, systemOneQuestions } from "../src/routes/systemone-dialect";

/** The parts of one System One question, through the edge's translation into the internal form. */
const partsOf = (name: string, question: SystemOneQuestion, size?: number) =>
  taskParts(systemOneQuestion(name, question), size);

/** The plan of System One questions, through the edge's translation into the internal form. */
const planRequest = (questions: Record<string, SystemOneQuestion>, limits: Limits) =>
  planTask(systemOneQuestions(questions), limits);

const choice = (n: number): TextQuestion => ({
  type: "choice",
  instructions: "Which one?",
  criteria: Object.fromEntries(Array.from({ length: n }, (_, i) => [`l${i}`, null])),
});

describe("planRequest", () => {
  it("packs at most QUESTIONS_PER_CALL questions and OUTCOMES_PER_CALL outcomes into a prompt, one call per part", () => {
    const questions: Record<string, TextQuestion> = {
      a: { type: "noul", instructions: "Is it?" },
      b: { type: "score", instructions: "How much?", criteria: ["x", "y", "z"] },
      c: choice(20),
      d: { type: "noul", instructions: "Is it?" },
    };
    const plan = planRequest(questions, { questionsPerCall: 3, outcomesPerCall: 21 });
    expect(plan.firstRound.map((call) => call.map((p) => p.question))).toStrictEqual([["a", "b"], ["c"], ["d"]]);
    expect(plan.callCount).toBe(4);
  });

  it.each([0, 1, 1.5, Number.NaN, -3])(
    "never plans with chunks of %s options: it throws at once rather than splitting forever (issue 35)",
    (size) => {
      expect(() =>
        planRequest({ big: choice(60) }, { questionsPerCall: 16, outcomesPerCall: 128, outcomesPerPart: size }),
      ).toThrow(RangeError);
      expect(() => partsOf("big", choice(60), size)).toThrow(RangeError);
    },
  );

  it("splits a choice into chunks of 2, the fewest that make progress, and of Infinity (no split)", () => {
    expect(partsOf("big", choice(5), 2).map((p) => p.options.length)).toStrictEqual([2, 2, 1]);
    expect(partsOf("big", choice(300), Number.POSITIVE_INFINITY).map((p) => p.options.length)).toStrictEqual([300]);
  });

  it("splits a choice of more than 20 labels into chunks and counts the final round", () => {
    const plan = planRequest({ big: choice(255) }, { questionsPerCall: 16, outcomesPerCall: 128 });
    const chunks = plan.firstRound.flat();
    expect(chunks.map((p) => p.options.length)).toStrictEqual([...new Array(12).fill(20), 15]);
    expect(chunks.map((p) => p.round)).toStrictEqual(
      Array.from({ length: 13 }, (_, index) => ({ kind: "chunk", index, of: 13 })),
    );
    expect(plan.firstRound.map((c) => c.length)).toStrictEqual([6, 6, 1]);
    expect(plan.splitChoices).toStrictEqual([{ question: "big", chunks: 13 }]);
    expect(plan.callCount).toBe(14);
  });

  it("keeps a choice of any size whole for an engine that scores every outcome, with codes of one width", () => {
    const limits = { questionsPerCall: 16, outcomesPerCall: 128, outcomesPerPart: Number.POSITIVE_INFINITY };
    const plan = planRequest({ big: choice(255), small: choice(26) }, limits);
    const [big, small] = plan.firstRound.flat();
    expect(plan.callCount).toBe(2);
    expect(plan.splitChoices).toStrictEqual([]);
    expect(big?.round).toStrictEqual({ kind: "whole" });
    const codes = big?.options.map((o) => o.code) as string[];
    expect([codes.length, codes[0], codes[25], codes[26], codes[254]]).toStrictEqual([255, "AA", "AZ", "BA", "JU"]);
    expect(new Set(codes).size).toBe(255);
    expect(small?.options.map((o) => o.code).join("")).toBe("ABCDEFGHIJKLMNOPQRSTUVWXYZ");
  });

  it("owns the final round: one part among each chunk's most probable label", () => {
    const plan = planRequest(
      { big: choice(45), n: { type: "noul", instructions: "Is it?" } },
      { questionsPerCall: 16, outcomesPerCall: 128 },
    );
    const results: Extract<PartResult, { distribution: number[] }>[] = plan.firstRound.flat().map((part) => ({
      part,
      // Chunk c's leader is its label at index c + 1.
      distribution: part.options.map((_, i) =>
        part.round.kind === "chunk" && i === part.round.index + 1 ? 0.9 : 0.01,
      ),
    }));
    const chunks = new Map([["big", results.filter((r) => r.part.question === "big").map((r) => r.distribution)]]);
    const finals = finalRound(plan, chunks);
    expect(finals).toHaveLength(1);
    expect(finals[0]?.map((p) => [p.question, p.round, p.options.map((o) => [o.code, o.label])])).toStrictEqual([
      [
        "big",
        { kind: "final" },
        [
          ["A", "l1"],
          ["B", "l22"],
          ["C", "l43"],
        ],
      ],
    ]);
  });

  it("keeps a choice of exactly 20 labels whole", () => {
    expect(partsOf("c", choice(20)).map((p) => p.round)).toStrictEqual([{ kind: "whole" }]);
  });
});

describe("codes, prefills and readings", () => {
  it("uses booleans for noul, level numbers for score and letters for choice", () => {
    const parts = [
      ...partsOf("n", { type: "noul", instructions: "Is it?", criteria: { true: "yes", false: null } }),
      ...partsOf("s", { type: "score", instructions: "How much?", criteria: ["a", "b", "c"] }),
      ...partsOf("c", choice(3)),
    ];
    expect(parts.map((p) => p.options.map((o) => o.code))).toStrictEqual([
      [true, false],
      [0, 1, 2],
      ["A", "B", "C"],
    ]);
    // Each prefill stops where the value begins, at a pre-token boundary.
    expect(parts.map((p, i) => prefill(p, i))).toStrictEqual(['{"q1":', '{"q2": ', '{"q3": "']);
    expect(parts.map(readingOf)).toStrictEqual([
      { literals: ["true", "false"], whitespaceFirst: true },
      { literals: ["0", "1", "2"], whitespaceFirst: true },
      { literals: ['A"', 'B"', 'C"'], whitespaceFirst: false },
    ]);
  });

  it("packPrompts never leaves an empty prompt and keeps order", () => {
    const items = [3, 5, 2, 7, 1].map((n, i) => ({ options: new Array(n), question: `q${i}` }));
    expect(
      packPrompts(items, { questionsPerCall: 2, outcomesPerCall: 8 }).map((c) => c.map((i) => i.options.length)),
    ).toStrictEqual([[3, 5], [2], [7, 1]]);
  });
});
