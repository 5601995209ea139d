import { codeDistribution, codeOfToken, type TokenLogprob, valueOffset } from "../src/decide/logprobs";

const tok = (token: string, top: [string, number][] = []): TokenLogprob => ({
  token,
  logprob: Math.log(top.find(([t]) => t === token)?.[1] ?? 1),
  top: top.map(([t, p]) => ({ token: t, logprob: Math.log(p) })),
});

describe("valueOffset", () => {
  it("points at the first character of a value, after a string's opening quote", () => {
    const text = '{"q1": true, "q2":"B", "q12": 3}';
    expect(valueOffset(text, "q1")).toBe(text.indexOf("true"));
    expect(valueOffset(text, "q2")).toBe(text.indexOf("B"));
    expect(valueOffset(text, "q12")).toBe(text.indexOf("3"));
    expect(valueOffset(text, "q3")).toBeUndefined();
  });
});

describe("codeOfToken", () => {
  const codes = ["A", "B", "true", "false"];
  it("matches a whole code, a code followed by a delimiter, or a prefix of a long code", () => {
    expect(codeOfToken("A", codes)).toBe("A");
    expect(codeOfToken('B"', codes)).toBe("B");
    expect(codeOfToken("tr", codes)).toBe("true");
    expect(codeOfToken("false,", codes)).toBe("false");
  });
  it("does not match junk that merely starts like a code", () => {
    expect(codeOfToken("Apple", codes)).toBeUndefined();
    expect(codeOfToken("", codes)).toBeUndefined();
    expect(codeOfToken("\n", codes)).toBeUndefined();
    expect(codeOfToken("10", ["1", "0"])).toBeUndefined();
  });
});

describe("codeDistribution", () => {
  it("reads llama.cpp tokens with the space and quote attached and drops junk", () => {
    const tokens = [
      tok('{"q1":'),
      tok(' "B', [
        [' "B', 0.5],
        [' "A', 0.25],
        [' "', 0.2],
        ["Sure", 0.05],
      ]),
      tok('"}'),
    ];
    const text = tokens.map((t) => t.token).join("");
    expect(codeDistribution(tokens, valueOffset(text, "q1") as number, ["A", "B", "C"])).toStrictEqual([
      0.25 / 0.75,
      0.5 / 0.75,
      0,
    ]);
  });

  it("reads a boolean split across tokens (tr + ue) by its first token", () => {
    const tokens = [
      tok('{"q1":'),
      tok("tr", [
        ["tr", 0.6],
        ["f", 0.4],
      ]),
      tok("ue"),
      tok("}"),
    ];
    const text = tokens.map((t) => t.token).join("");
    const dist = codeDistribution(tokens, valueOffset(text, "q1") as number, [true, false]);
    expect(dist?.[0]).toBeCloseTo(0.6, 15);
    expect(dist?.[1]).toBeCloseTo(0.4, 15);
  });

  it("reads leading-space tokens (Ollama) and sums alternatives that spell the same code", () => {
    const tokens = [
      tok('{"q1":'),
      tok(" 2", [
        [" 2", 0.5],
        ["2", 0.1],
        [" 0", 0.3],
        [" 7", 0.1],
      ]),
      tok("}"),
    ];
    const text = tokens.map((t) => t.token).join("");
    const dist = codeDistribution(tokens, valueOffset(text, "q1") as number, [0, 1, 2]) as number[];
    expect(dist[0]).toBeCloseTo(0.3 / 0.9, 15);
    expect(dist[1]).toBe(0);
    expect(dist[2]).toBeCloseTo(0.6 / 0.9, 15);
  });

  it("is undefined when no alternative is a code (the caller falls back to the emitted answer)", () => {
    const tokens = [tok('{"q1":'), tok(" maybe", [[" maybe", 1]]), tok("}")];
    expect(codeDistribution(tokens, 6, ["A", "B"])).toBeUndefined();
  });
});
