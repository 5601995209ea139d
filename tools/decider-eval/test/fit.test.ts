import { CalibrationFile } from "@localdecider/contracts/decider";
import { composeWithActive, fitCalibration, fitTemperature, isHeldOut, scaled } from "../src/fit";
import { logLoss, type Prediction } from "../src/metrics";
import type { LabelledAnswer } from "../src/predictions";
import { seededRandom } from "../src/random";

/** The true distribution softmax(z), reported at temperature 1/k: p ∝ q^k. */
const sharpen = (q: number[], k: number) => {
  const w = q.map((p) => p ** k);
  const total = w.reduce((a, b) => a + b, 0);
  return w.map((x) => x / total);
};

/** Answers whose labels follow q exactly: for q = j/10, j of 10 copies are labelled outcome 0. */
function exactYesNo(k: number, name = "a", type: LabelledAnswer["type"] = "noul"): LabelledAnswer[] {
  const out: LabelledAnswer[] = [];
  for (let j = 1; j <= 9; j++) {
    for (let c = 0; c < 10; c++) {
      out.push({
        record: `r${j}-${c}`,
        name,
        type,
        probabilities: sharpen([j / 10, 1 - j / 10], k),
        label: c < j ? 0 : 1,
      });
    }
  }
  return out;
}

describe("fitTemperature", () => {
  it("recovers the temperature that undoes a known over-confidence exactly when the labels hold the true frequencies", () => {
    expect(fitTemperature(exactYesNo(2))).toBeCloseTo(2, 4);
    expect(fitTemperature(exactYesNo(0.5))).toBeCloseTo(0.5, 4);
    expect(fitTemperature(exactYesNo(1))).toBeCloseTo(1, 4);
  });

  it("recovers it within 5 % from sampled labels over three outcomes", () => {
    const random = seededRandom(3);
    const preds: Prediction[] = [];
    for (let i = 0; i < 6000; i++) {
      const z = [random() * 4, random() * 4, random() * 4];
      const e = z.map(Math.exp);
      const q = e.map((x) => x / e.reduce((a, b) => a + b, 0));
      const u = random();
      const label = u < (q[0] as number) ? 0 : u < (q[0] as number) + (q[1] as number) ? 1 : 2;
      preds.push({ probabilities: sharpen(q, 3), label });
    }
    expect(Math.abs(fitTemperature(preds) - 3) / 3).toBeLessThan(0.05);
  });

  it("lowers the log loss it minimises", () => {
    const preds = exactYesNo(2);
    const t = fitTemperature(preds);
    expect(logLoss(scaled(preds, t))).toBeLessThan(logLoss(preds));
    expect(logLoss(scaled(preds, t))).toBeLessThan(logLoss(scaled(preds, t * 1.05)));
    expect(logLoss(scaled(preds, t))).toBeLessThan(logLoss(scaled(preds, t / 1.05)));
  });
});

describe("fitCalibration", () => {
  const now = new Date("2026-11-24T10:00:00.000Z");

  it("fits each type, and names with at least the minimum of training answers (and not all of their type), into a valid file", () => {
    const answers = [
      ...exactYesNo(2, "big"),
      ...exactYesNo(4, "small").slice(0, 40),
      ...exactYesNo(0.5, "lvl", "score"),
    ];
    const file = fitCalibration(answers, { minPerName: 50, records: 12, source: "x.jsonl", now });
    expect(CalibrationFile.parse(file)).toStrictEqual(file);
    expect(file.fitted_at).toBe("2026-11-24T10:00:00.000Z");
    expect(file.data).toStrictEqual({ records: 12, answers: 220, source: "x.jsonl" });
    expect(Object.keys(file.types)).toStrictEqual(["noul", "score"]);
    expect(file.types.noul?.count).toBe(130);
    expect(file.types.score?.temperature).toBeCloseTo(0.5, 3);
    // "small" has too few answers; "lvl" is all of the score answers, so its temperature would be the type's.
    expect(Object.keys(file.names)).toStrictEqual(["big"]);
    expect(file.names.big).toStrictEqual({ type: "noul", temperature: expect.closeTo(2, 3), count: 90 });
  });

  it("records the decider's prompt version the answers came from, when known", () => {
    const answers = exactYesNo(2, "a");
    const file = fitCalibration(answers, { minPerName: 1, records: 1, now, promptVersion: "4" });
    expect(CalibrationFile.parse(file).prompt_version).toBe("4");
    expect(fitCalibration(answers, { minPerName: 1, records: 1, now })).not.toHaveProperty("prompt_version");
  });

  it("gives no name of its own to a name asked as two types", () => {
    const answers = [...exactYesNo(2, "both"), ...exactYesNo(2, "both", "choice")];
    expect(fitCalibration(answers, { minPerName: 1, records: 1, now }).names).toStrictEqual({});
  });
});

describe("composeWithActive", () => {
  it("multiplies the temperatures in force with the new ones, for every type and name either holds", () => {
    const fitted = fitCalibration([...exactYesNo(2, "a"), ...exactYesNo(2, "b")], {
      minPerName: 1000,
      records: 1,
      now: new Date(0),
    });
    fitted.names = { b: { type: "noul", temperature: 3, count: 90 } };
    const composed = composeWithActive(
      {
        active: true,
        method: "temperature",
        version: 1,
        fitted_at: "2026-01-01T00:00:00Z",
        data: { records: 1, answers: 1 },
        temperatures: { types: { noul: 1.5, score: 0.8 }, names: { a: { type: "noul", temperature: 4 } } },
      },
      fitted,
    );
    expect(composed.types).toStrictEqual({
      noul: { temperature: expect.closeTo(3, 3), count: 180 },
      score: { temperature: 0.8, count: 0 },
    });
    expect(composed.names).toStrictEqual({
      a: { type: "noul", temperature: expect.closeTo(8, 3), count: 0 },
      b: { type: "noul", temperature: 4.5, count: 90 },
    });
    expect(CalibrationFile.parse(composed)).toStrictEqual(composed);
  });
});

describe("isHeldOut", () => {
  it("splits by a seeded hash: the same every time, about the share asked for, different per seed", () => {
    const keys = Array.from({ length: 2000 }, (_, i) => `record-${i}`);
    const held = keys.filter((k) => isHeldOut(k, 0.3, 1));
    expect(keys.filter((k) => isHeldOut(k, 0.3, 1))).toStrictEqual(held);
    expect(held.length / keys.length).toBeGreaterThan(0.27);
    expect(held.length / keys.length).toBeLessThan(0.33);
    expect(keys.filter((k) => isHeldOut(k, 0.3, 2))).not.toStrictEqual(held);
  });

  it("splits short keys that differ only in their last characters (cr-001, cr-002…) evenly too", () => {
    const keys = Array.from({ length: 200 }, (_, i) => `cr-${String(i + 1).padStart(3, "0")}`);
    const share = keys.filter((k) => isHeldOut(k, 0.3, 1)).length / keys.length;
    expect(share).toBeGreaterThan(0.22);
    expect(share).toBeLessThan(0.38);
  });
});
