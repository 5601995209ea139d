import { argmax, choiceConfidence, scoreStats, spread, uniformSpread } from "../src/decide/math";
import { recombineChunks } from "../src/decide/recombine";

describe("choiceConfidence", () => {
  it("is 1 for a single label", () => {
    expect(choiceConfidence([1])).toBe(1);
  });
  it("is 0 for a uniform distribution and 1 for a certain one", () => {
    expect(choiceConfidence([0.25, 0.25, 0.25, 0.25])).toBe(0);
    expect(choiceConfidence([0, 1, 0])).toBe(1);
  });
  it("follows (n*pmax - 1)/(n - 1)", () => {
    expect(choiceConfidence([0.5, 0.3, 0.2])).toBeCloseTo((3 * 0.5 - 1) / 2, 15);
  });
});

describe("uniformSpread U(n)", () => {
  it("measures from the middle level m = (n-1)/2", () => {
    expect(uniformSpread(2)).toBeCloseTo(0.5, 15);
    expect(uniformSpread(3)).toBeCloseTo(2 / 3, 15);
    expect(uniformSpread(4)).toBeCloseTo(1, 15);
    expect(uniformSpread(5)).toBeCloseTo(6 / 5, 15);
    expect(uniformSpread(10)).toBeCloseTo(2.5, 15);
  });
  it("for even n equals the spread from either middle level", () => {
    for (const n of [2, 4, 6, 8, 10]) {
      const uniform = new Array<number>(n).fill(1 / n);
      expect(uniformSpread(n)).toBeCloseTo(spread(uniform, n / 2 - 1), 12);
      expect(uniformSpread(n)).toBeCloseTo(spread(uniform, n / 2), 12);
    }
  });
});

describe("scoreStats", () => {
  it("computes the expected score, the mode and full confidence for a certain level", () => {
    expect(scoreStats([0, 0, 1, 0, 0])).toStrictEqual({ score: 2, mode: 2, confidence: 1 });
  });
  it("computes confidence = max(0, 1 - spread around the mode / U(n))", () => {
    const p = [0.1, 0.6, 0.3];
    const stats = scoreStats(p);
    expect(stats.score).toBeCloseTo(0.6 + 0.6, 15);
    expect(stats.mode).toBe(1);
    expect(stats.confidence).toBeCloseTo(1 - (0.1 + 0.3) / (2 / 3), 15);
  });
  it("never goes below 0 for a distribution flatter than uniform around its mode", () => {
    expect(scoreStats([0.5, 0, 0, 0, 0.5]).confidence).toBe(0);
  });
});

/** Weights scaled to sum to 1 (the test's own: the service renormalises in log space, readout.ts). */
const normalize = (weights: number[]) => weights.map((w) => w / weights.reduce((a, b) => a + b, 0));

describe("argmax", () => {
  it("picks the first maximum", () => {
    expect(argmax([0.2, 0.4, 0.4])).toBe(1);
  });
});

describe("recombineChunks", () => {
  it("recovers the full distribution from chunk-conditional and final-round distributions", () => {
    const truth = [0.05, 0.15, 0.1, 0.3, 0.25, 0.15];
    const chunks = [truth.slice(0, 3), truth.slice(3)].map((c) => normalize(c));
    // Leaders: label 1 (0.15) and label 3 (0.3); the final round sees them in proportion.
    const final = normalize([0.15, 0.3]);
    const combined = recombineChunks(chunks, final).flat();
    for (const [i, p] of combined.entries()) expect(p).toBeCloseTo(truth[i] as number, 12);
    expect(argmax(combined)).toBe(3);
    expect(combined.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
  });
});
