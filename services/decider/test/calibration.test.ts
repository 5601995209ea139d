import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { applyTemperature, type CalibrationFile } from "@localdecider/contracts/decider";
import request from "supertest";
import { Calibration } from "../src/calibration/calibration";
import { loadCalibration } from "../src/calibration/load";
import { choiceConfidence, scoreStats } from "../src/decide/math";
import type { AskedQuestion } from "./fake-upstream/server";
import { type Harness, harness } from "./helpers";

/** Temperatures per type, and one question name with its own. */
const file: CalibrationFile = {
  format: "localdecider-calibration",
  version: 1,
  method: "temperature",
  fitted_at: "2026-11-24T10:00:00.000Z",
  data: { records: 120, answers: 480, source: "reviews.jsonl" },
  types: { noul: { temperature: 2, count: 200 }, choice: { temperature: 0.5, count: 100 } },
  names: { risky: { type: "noul", temperature: 4, count: 80 } },
};

const truth: Record<string, Record<string, number>> = {
  urgent: { true: 0.9, false: 0.1 },
  risky: { true: 0.8, false: 0.2 },
  topic: { billing: 0.5, shipping: 0.3, refund: 0.2 },
  effort: { "0": 0.1, "1": 0.2, "2": 0.6, "3": 0.1 },
};
const script = (q: AskedQuestion) => truth[q.name] as Record<string, number>;

const body = {
  model: "localdecider",
  state: "A customer writes about a late parcel.",
  questions: {
    urgent: { type: "noul", instructions: "Is it?" },
    risky: { type: "noul", instructions: "Is it?" },
    topic: { type: "choice", instructions: "Which topic?", criteria: { billing: null, shipping: null, refund: null } },
    effort: { type: "score", instructions: "How much effort?", criteria: ["none", "some", "much", "all"] },
  },
};

describe("POST /v1/systemone with a calibration", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("rescales each answer by its name's or type's temperature and derives choice, score and confidence from it", async () => {
    h = await harness({ calibration: new Calibration(file) });
    h.fake.script = script;
    const res = await request(h.app).post("/v1/systemone").send(body);
    expect(res.status).toBe(200);
    const urgent = applyTemperature([0.9, 0.1], 2);
    const risky = applyTemperature([0.8, 0.2], 4);
    const topic = applyTemperature([0.5, 0.3, 0.2], 0.5);
    // Hand check of one: 0.9^(1/2) / (0.9^(1/2) + 0.1^(1/2)) = 0.75.
    expect(urgent[0]).toBeCloseTo(0.75, 12);
    expect(res.body.answers.urgent.noul).toBeCloseTo(urgent[0] as number, 12);
    expect(res.body.answers.risky.noul).toBeCloseTo(risky[0] as number, 12);
    expect(res.body.answers.topic.choice).toBe("billing");
    expect(Object.values(res.body.answers.topic.probabilities)).toStrictEqual(topic.map((p) => expect.closeTo(p, 12)));
    expect(res.body.answers.topic.confidence).toBeCloseTo(choiceConfidence(topic), 12);
    // No score temperature in the file: the score answer is the model's own.
    const effort = scoreStats([0.1, 0.2, 0.6, 0.1]);
    expect(res.body.answers.effort.score).toBeCloseTo(effort.score, 12);
    expect(res.body.answers.effort.confidence).toBeCloseTo(effort.confidence, 12);
  });

  it("recomputes a score's mean level and confidence from the rescaled levels", async () => {
    h = await harness({
      calibration: new Calibration({ ...file, types: { score: { temperature: 3, count: 10 } }, names: {} }),
    });
    h.fake.script = script;
    const res = await request(h.app).post("/v1/systemone").send(body);
    const levels = applyTemperature([0.1, 0.2, 0.6, 0.1], 3);
    const stats = scoreStats(levels);
    expect(res.body.answers.effort.score).toBeCloseTo(stats.score, 12);
    expect(res.body.answers.effort.confidence).toBeCloseTo(stats.confidence, 12);
    expect(res.body.answers.effort.confidence).toBeLessThan(scoreStats([0.1, 0.2, 0.6, 0.1]).confidence);
    expect(res.body.answers.urgent.noul).toBeCloseTo(0.9, 12);
  });

  it("is shown by GET /v1/models: fit date, data size and temperatures", async () => {
    h = await harness({ calibration: new Calibration(file) });
    const res = await request(h.app).get("/v1/models");
    expect(res.body.calibration).toStrictEqual({
      active: true,
      method: "temperature",
      version: 1,
      fitted_at: "2026-11-24T10:00:00.000Z",
      data: { records: 120, answers: 480, source: "reviews.jsonl" },
      temperatures: { types: { noul: 2, choice: 0.5 }, names: { risky: { type: "noul", temperature: 4 } } },
    });
  });
});

describe("a calibration fitted on another prompt version", () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
  });

  it("is applied, and GET /v1/models says which versions differ in a warning", async () => {
    const calibration = new Calibration({ ...file, prompt_version: "3" }, "4");
    expect(calibration.warning).toContain("fitted on prompt version 3, this decider uses prompt version 4");
    h = await harness({ calibration });
    const res = await request(h.app).get("/v1/models");
    expect(res.body.calibration).toMatchObject({
      active: true,
      prompt_version: "4",
      fitted_prompt_version: "3",
      warning: calibration.warning,
    });
  });

  it("warns when the file does not name its prompt version, and not when it names the decider's", () => {
    expect(new Calibration(file, "4").warning).toContain("does not name the prompt version");
    const same = new Calibration({ ...file, prompt_version: "4" }, "4");
    expect(same.warning).toBeUndefined();
    expect(same.describe()).toMatchObject({ prompt_version: "4", fitted_prompt_version: "4" });
    expect(same.describe()).not.toHaveProperty("warning");
  });

  it("is read from the file with the decider's prompt version", () => {
    const dir = mkdtempSync(join(tmpdir(), "calibration-"));
    const path = join(dir, "v3.json");
    writeFileSync(path, JSON.stringify({ ...file, prompt_version: "3" }));
    expect(loadCalibration(path, dir, "4").warning).toContain("prompt version 3");
  });
});

describe("loadCalibration", () => {
  const dir = mkdtempSync(join(tmpdir(), "calibration-"));

  it("reads a valid file", () => {
    const path = join(dir, "good.json");
    writeFileSync(path, JSON.stringify(file));
    expect(loadCalibration(path).file).toStrictEqual(file);
  });

  it("names the file and every problem of a malformed one", () => {
    const path = join(dir, "bad.json");
    writeFileSync(path, JSON.stringify({ ...file, version: 2, types: { noul: { temperature: 1000, count: 1 } } }));
    expect(() => loadCalibration(path)).toThrow(
      `LOCALDECIDER_CALIBRATION: calibration file ${path}: is not a localdecider calibration file (version 1): version: Invalid input: expected 1; types.noul.temperature: Too big: expected number to be <=100`,
    );
  });
});
