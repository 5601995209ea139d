import { ABSENT_SHARE, outcomeOfToken, readOut } from "../src/decide/readout";
import type { Alternative, Reading } from "../src/upstream/types";
import { recordedPosition, recordedValuePositions } from "./replay/recordings";

const noul: Reading = { literals: ["true", "false"], whitespaceFirst: true };
const score4: Reading = { literals: ["0", "1", "2", "3"], whitespaceFirst: true };
/** A choice after the prefill `{"q1": "`: inside the string, the letter and its closing quote. */
const choice3: Reading = { literals: ['A"', 'B"', 'C"'], whitespaceFirst: false };
const alts = (list: [string, number][]): Alternative[] => list.map(([token, p]) => ({ token, logprob: Math.log(p) }));
const close = (actual: number[], expected: number[]) => {
  expect(actual).toHaveLength(expected.length);
  for (const [i, p] of actual.entries()) expect(p).toBeCloseTo(expected[i] as number, 12);
};

describe("outcomeOfToken", () => {
  it("counts a token that is a prefix of one outcome, or the whole outcome followed by valid JSON", () => {
    expect(outcomeOfToken(" true", noul)).toBe(0);
    expect(outcomeOfToken("t", noul)).toBe(0);
    expect(outcomeOfToken(" fa", noul)).toBe(1);
    expect(outcomeOfToken("false,", noul)).toBe(1);
    expect(outcomeOfToken(" true}\n", noul)).toBe(0);
    expect(outcomeOfToken("3", score4)).toBe(3);
    expect(outcomeOfToken("2}", score4)).toBe(2);
    expect(outcomeOfToken("B", choice3)).toBe(1);
    expect(outcomeOfToken('B"', choice3)).toBe(1);
    expect(outcomeOfToken('C"}', choice3)).toBe(2);
  });

  it("never counts a token that cannot begin an outcome there, whatever it looks like", () => {
    // The colon is already in the prefill: `:t` would write a second one.
    expect(outcomeOfToken(":t", noul)).toBeUndefined();
    expect(outcomeOfToken("trueish", noul)).toBeUndefined();
    expect(outcomeOfToken("35", score4)).toBeUndefined();
    expect(outcomeOfToken("7", score4)).toBeUndefined();
    // Inside the string the prefill opened: an unquoted or space-led letter is another string.
    expect(outcomeOfToken(" B", choice3)).toBeUndefined();
    expect(outcomeOfToken('"B', choice3)).toBeUndefined();
    expect(outcomeOfToken("BA", choice3)).toBeUndefined();
  });

  it("never counts a token that could begin several outcomes: whitespace, nothing, a bare quote", () => {
    expect(outcomeOfToken("   ", noul)).toBeUndefined();
    expect(outcomeOfToken("\n\n", score4)).toBeUndefined();
    expect(outcomeOfToken("", noul)).toBeUndefined();
    expect(outcomeOfToken("", choice3)).toBeUndefined();
    expect(outcomeOfToken('"', { literals: ['"A"', '"B"'], whitespaceFirst: true })).toBeUndefined();
  });
});

describe("readOut", () => {
  it("sums the alternatives per outcome and renormalises over the outcomes, dropping the rest", () => {
    const read = readOut(
      alts([
        [" true", 0.3],
        [" false", 0.2],
        ["   ", 0.2],
        ["t", 0.1],
        [" fa", 0.1],
        ["Sure", 0.1],
      ]),
      noul,
    );
    expect(read?.absent).toStrictEqual([]);
    close(read?.distribution ?? [], [0.4 / 0.7, 0.3 / 0.7]);
  });

  it("gives an outcome that no alternative begins half of the smallest reported probability", () => {
    const read = readOut(
      alts([
        ["A", 0.5],
        ["B", 0.2],
        ["Sure", 0.05],
      ]),
      choice3,
    );
    expect(read?.absent).toStrictEqual([2]);
    const c = 0.05 * ABSENT_SHARE;
    close(read?.distribution ?? [], [0.5 / (0.7 + c), 0.2 / (0.7 + c), c / (0.7 + c)]);
  });

  it("skips partial UTF-8 pieces (bytes without text) and the empty end token", () => {
    const read = readOut(
      [
        { token: "", logprob: Math.log(0.5), bytes: [230, 161] },
        { token: "", logprob: Math.log(0.3), bytes: [] },
        { token: "1", logprob: Math.log(0.1) },
        { token: "2", logprob: Math.log(0.1) },
      ],
      { literals: ["1", "2"], whitespaceFirst: true },
    );
    close(read?.distribution ?? [], [0.5, 0.5]);
  });

  it("keeps every outcome strictly between 0 and 1, even when one is 40 nats less likely", () => {
    const read = readOut(
      [
        { token: " true", logprob: 0 },
        { token: "x", logprob: -40 },
      ],
      noul,
    );
    const [t, f] = read?.distribution ?? [];
    expect(t).toBeLessThan(1);
    expect(f).toBeGreaterThan(0);
  });

  it("is undefined when the server reported no alternatives", () => {
    expect(readOut([], noul)).toBeUndefined();
  });
});

describe("replay of a real llama-server's recorded answers", () => {
  const positions = recordedValuePositions();
  const exp = Math.exp;

  it("finds the value positions of every recorded answer", () => {
    expect(positions.length).toBeGreaterThanOrEqual(40);
  });

  it.each(positions.map((p) => [`${p.file} ${p.key}`, p] as const))(
    "%s: a distribution over exactly the allowed outcomes, none 0 or 1",
    (_name, position) => {
      const read = readOut(position.alternatives, position.reading);
      expect(read).toBeDefined();
      const dist = read?.distribution ?? [];
      expect(dist).toHaveLength(position.reading.literals.length);
      expect(dist.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
      for (const p of dist) {
        expect(p).toBeGreaterThan(0);
        expect(p).toBeLessThan(1);
      }
    },
  );

  it('b_ans q1 (yes/no): counts ` false`, `fa`, `f` and `t`, and not `":`, `"S`, `1` or any letter', () => {
    const { alternatives, reading } = recordedPosition("probes/b_ans.json", "q1");
    const p = (token: string) => exp(alternatives.find((a) => a.token === token)?.logprob ?? Number.NaN);
    const read = readOut(alternatives, reading);
    const t = p("t");
    const f = p(" false") + p("fa") + p("f");
    expect(read?.absent).toStrictEqual([]);
    close(read?.distribution ?? [], [t / (t + f), f / (t + f)]);
  });

  it("b_bias q1 (yes/no): `:t` (the glued colon) is not a vote for true; both outcomes absent, so even", () => {
    const { alternatives, reading, emitted } = recordedPosition("probes/b_bias.json", "q1");
    expect(emitted).toBe("t");
    expect(alternatives.map((a) => a.token)).toContain(":t");
    const read = readOut(alternatives, reading);
    expect(read?.absent).toStrictEqual([0, 1]);
    close(read?.distribution ?? [], [0.5, 0.5]);
  });

  it("0001 q2 (choice): the unquoted ` B` is not valid JSON there and does not count", () => {
    const { alternatives, reading } = recordedPosition("exchanges/0001.json", "q2");
    expect(alternatives.map((a) => a.token)).toContain(" B");
    const read = readOut(alternatives, reading);
    expect(read?.absent).toStrictEqual([0, 1, 2]);
    close(read?.distribution ?? [], [1 / 3, 1 / 3, 1 / 3]);
  });

  it("0001 q3 (score 0-3): counts `1` and `3`, not `8`, `5` or `4`; 0 and 2 get half the smallest", () => {
    const { alternatives, reading } = recordedPosition("exchanges/0001.json", "q3");
    const read = readOut(alternatives, reading);
    const smallest = Math.min(...alternatives.map((a) => a.logprob));
    const absent = exp(smallest) * ABSENT_SHARE;
    const one = exp(alternatives.find((a) => a.token === "1")?.logprob ?? 0);
    const three = exp(alternatives.find((a) => a.token === "3")?.logprob ?? 0);
    const total = 2 * absent + one + three;
    expect(read?.absent).toStrictEqual([0, 2]);
    close(read?.distribution ?? [], [absent / total, one / total, absent / total, three / total]);
  });
});
