import { parseDataset } from "../src/dataset";

const line = (value: unknown) => JSON.stringify(value);
const question = {
  a: { type: "noul", instructions: "Is it?" },
  pick: { type: "choice", instructions: "Which colour?", criteria: { red: null, blue: "blue" } },
  level: { type: "score", instructions: "How high?", criteria: ["low", "mid", "high"] },
};

describe("parseDataset", () => {
  it("reads good records and reports each bad line by number, with the reason, without stopping", () => {
    const text = [
      line({ state: "s1", questions: question, labels: { a: true, pick: "blue", level: 2 } }),
      "",
      "{nope",
      line({ state: "s2", questions: question, labels: { a: "true" } }),
      line({ state: "s3", questions: question, labels: { pick: "green" } }),
      line({ state: "s4", questions: question, labels: { level: 3 } }),
      line({ state: "s5", questions: question, labels: { other: true } }),
      line({ state: "s6", questions: {}, labels: {} }),
      line({ questions: question, labels: {} }),
      line({ state: null, questions: question, labels: {}, extra: 1 }),
      line({ state: null, questions: { a: { type: "maybe" } }, labels: {} }),
      line({ state: "s1", questions: question, labels: { a: true, pick: "blue", level: 2 } }),
      line({ id: "case-7", state: { diff: "x" }, questions: question, labels: { a: false } }),
      line({ id: "case-7", state: "other", questions: question, labels: {} }),
      line({ state: null, questions: question, labels: {} }),
    ].join("\n");
    const { records, bad } = parseDataset(text);
    expect(records.map((r) => [r.line, r.key.startsWith("sha256:") ? "hash" : r.key])).toStrictEqual([
      [1, "hash"],
      [13, "case-7"],
      [15, "hash"],
    ]);
    expect(bad.map((b) => b.line)).toStrictEqual([3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14]);
    const reason = (n: number) => bad.find((b) => b.line === n)?.error;
    expect(reason(3)).toMatch(/^not JSON: /);
    expect(reason(4)).toBe("labels.a: a yes/no (noul) question's label must be true or false");
    expect(reason(5)).toBe('labels.pick: a choice question\'s label must be one of its labels ("red", "blue")');
    expect(reason(6)).toBe("labels.level: a score question's label must be a level from 0 to 2");
    expect(reason(7)).toBe("labels.other: labels a question the record does not ask");
    expect(reason(8)).toBe("questions: questions must hold at least one question");
    expect(reason(9)).toBe("state: state is required (null is allowed)");
    expect(reason(10)).toMatch(/^\(record\): Unrecognized key: "extra"/);
    expect(reason(11)).toMatch(/^questions\.a\.type: /);
    expect(reason(12)).toBe("the same record as line 1 (each record is asked once)");
    expect(reason(14)).toBe("the same id as line 13 (each record is asked once)");
  });

  it("keys a record by its content, so an edited record is asked again", () => {
    const a = parseDataset(line({ state: "s", questions: question, labels: {} })).records[0]?.key;
    const b = parseDataset(line({ state: "t", questions: question, labels: {} })).records[0]?.key;
    expect(a).toMatch(/^sha256:[0-9a-f]{24}$/);
    expect(b).not.toBe(a);
  });
});
