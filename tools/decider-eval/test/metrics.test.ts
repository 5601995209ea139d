import {
  accuracy,
  binIndex,
  brier,
  expectedCalibrationError,
  logLoss,
  maximumCalibrationError,
  metricsInOnePass,
  type Prediction,
  quantile,
  reliabilityBins,
  summarize,
} from "../src/metrics";

// Four yes/no answers, worked by hand:
//   [0.8, 0.2] label 0: confidence 0.8, correct    [0.6, 0.4] label 1: confidence 0.6, wrong
//   [0.3, 0.7] label 1: confidence 0.7, correct    [0.5, 0.5] label 1: confidence 0.5, wrong (a tie picks the first)
const four: Prediction[] = [
  { probabilities: [0.8, 0.2], label: 0 },
  { probabilities: [0.6, 0.4], label: 1 },
  { probabilities: [0.3, 0.7], label: 1 },
  { probabilities: [0.5, 0.5], label: 1 },
];

describe("metrics on four answers worked by hand", () => {
  it("accuracy is the share whose argmax is the label: 2/4", () => {
    expect(accuracy(four)).toBe(0.5);
  });

  it("log loss is the mean of -ln p(label): (0.22314 + 0.91629 + 0.35667 + 0.69315) / 4", () => {
    expect(logLoss(four)).toBeCloseTo(0.5473141, 6);
  });

  it("Brier is the mean of sum_k (p_k - y_k)^2: (0.08 + 0.72 + 0.18 + 0.5) / 4", () => {
    expect(brier(four)).toBeCloseTo(0.37, 12);
  });

  it("ECE weighs each bin's |accuracy - confidence| by its share: (0.5 + 0.6 + 0.3 + 0.2) / 4", () => {
    expect(expectedCalibrationError(four)).toBeCloseTo(0.4, 12);
  });

  it("MCE is the largest gap of a non-empty bin: 0.6 (the 0.6 bin, all wrong)", () => {
    expect(maximumCalibrationError(four)).toBeCloseTo(0.6, 12);
  });

  it("bins are 10 equal-width ranges; empty ones have a count of 0 and no confidence or accuracy", () => {
    const bins = reliabilityBins(four);
    expect(bins.map((b) => b.count)).toStrictEqual([0, 0, 0, 0, 0, 1, 1, 1, 1, 0]);
    expect(bins[0]).toStrictEqual({ lower: 0, upper: 0.1, count: 0, confidence: null, accuracy: null });
    expect(bins[9]).toStrictEqual({ lower: 0.9, upper: 1, count: 0, confidence: null, accuracy: null });
    expect(bins[6]).toStrictEqual({ lower: 0.6, upper: 0.7, count: 1, confidence: 0.6, accuracy: 0 });
  });
});

describe("bin edges", () => {
  it("puts m/10 in bin m (a bin is [m/10, (m+1)/10)) and 1 in the last bin", () => {
    expect(Array.from({ length: 11 }, (_, m) => binIndex(m / 10))).toStrictEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9]);
    expect([binIndex(0.0999999), binIndex(0.1000001), binIndex(0.95), binIndex(0.30000000000000004)]).toStrictEqual([
      0, 1, 9, 3,
    ]);
  });

  it("averages answers sharing a bin, certainty included: ECE = MCE = |0.5 - 0.975|", () => {
    const pair: Prediction[] = [
      { probabilities: [0.95, 0.05], label: 0 },
      { probabilities: [1, 0], label: 1 },
    ];
    expect(reliabilityBins(pair)[9]).toStrictEqual({
      lower: 0.9,
      upper: 1,
      count: 2,
      confidence: 0.975,
      accuracy: 0.5,
    });
    expect(expectedCalibrationError(pair)).toBeCloseTo(0.475, 12);
    expect(maximumCalibrationError(pair)).toBeCloseTo(0.475, 12);
    // Probability 0 for the label is clamped to 1e-15: -ln(1e-15) = 34.5388, not infinity.
    expect(logLoss(pair)).toBeCloseTo((-Math.log(0.95) + 34.538776) / 2, 5);
  });
});

describe("several outcomes", () => {
  it("scores a three-outcome answer over all its outcomes", () => {
    const one: Prediction[] = [{ probabilities: [0.5, 0.3, 0.2], label: 2 }];
    expect(brier(one)).toBeCloseTo(0.25 + 0.09 + 0.64, 12);
    expect(logLoss(one)).toBeCloseTo(1.6094379, 6);
    expect(accuracy(one)).toBe(0);
    expect(expectedCalibrationError(one)).toBeCloseTo(0.5, 12);
  });
});

describe("quantile", () => {
  it("interpolates between order statistics (type 7)", () => {
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(quantile([1, 2, 3, 4], 0.025)).toBeCloseTo(1.075, 12);
    expect(quantile([1, 2, 3, 4], 0.975)).toBeCloseTo(3.925, 12);
  });
});

describe("summarize", () => {
  it("gives every metric a 95 % interval that repeats with the seed and changes with it", () => {
    const many = Array.from({ length: 40 }, (_, i) => four[i % 4] as Prediction);
    const a = summarize(many, { samples: 300, seed: 7 });
    const b = summarize(many, { samples: 300, seed: 7 });
    const c = summarize(many, { samples: 300, seed: 8 });
    expect(a).toStrictEqual(b);
    expect(a.accuracy?.ci95).not.toStrictEqual(c.accuracy?.ci95);
    expect(a.count).toBe(40);
    expect(a.accuracy?.value).toBe(0.5);
    const [low, high] = (a.accuracy as { ci95: [number, number] }).ci95;
    expect(low).toBeLessThan(0.5);
    expect(high).toBeGreaterThan(0.5);
    expect(low).toBeGreaterThan(0.2);
    expect(high).toBeLessThan(0.8);
  });

  it("gives zero-width intervals without resamples, and nulls for no answers", () => {
    expect(summarize(four, { samples: 0, seed: 1 }).brier).toStrictEqual({
      value: brier(four),
      ci95: [brier(four), brier(four)],
    });
    expect(summarize([], { samples: 100, seed: 1 })).toStrictEqual({
      count: 0,
      accuracy: null,
      log_loss: null,
      brier: null,
      ece: null,
      mce: null,
    });
  });
});

describe("the bootstrap's one-pass metrics", () => {
  it("equal the metric functions", () => {
    const mixed: Prediction[] = [
      ...four,
      { probabilities: [0.95, 0.05], label: 0 },
      { probabilities: [1, 0], label: 1 },
    ];
    const one = metricsInOnePass(mixed);
    expect(one.accuracy).toBeCloseTo(accuracy(mixed), 12);
    expect(one.log_loss).toBeCloseTo(logLoss(mixed), 12);
    expect(one.brier).toBeCloseTo(brier(mixed), 12);
    expect(one.ece).toBeCloseTo(expectedCalibrationError(mixed), 12);
    expect(one.mce).toBeCloseTo(maximumCalibrationError(mixed), 12);
  });
});
