import {
  FIRST_PROBE,
  OPTION_LIMIT_FLOOR,
  OPTION_LIMIT_TTL_MS,
  OptionLimits,
  serverHint,
} from "../src/upstream/option-limits";
import type { NativeCall, NativeQuestion } from "../src/upstream/types";

const choiceOf = (key: string, n: number, instructions = "Which one?"): NativeQuestion => ({
  key,
  type: "choice",
  instructions,
  options: Array.from({ length: n }, (_, i) => ({ label: `l${i}`, description: undefined })),
});
const call = (...questions: NativeQuestion[]): NativeCall => ({ model: "m", state: "A ticket.", questions });

describe("OptionLimits: what a refusal teaches (issue 35, issue 31)", () => {
  let now = 0;
  const limits = () =>
    new OptionLimits(
      () => 255,
      () => now,
    );
  beforeEach(() => {
    now = 1_000_000;
  });

  it("without a number, a refused call with a choice over 26 options is tried with 26, kept once a call of 26 is answered", () => {
    const l = limits();
    expect(l.refused("m", 60, undefined)).toBe(FIRST_PROBE);
    expect(l.limit("m")).toBe(26);
    expect(l.limit("other")).toBe(255);
    l.answered("m", 26);
    // Confirmed: a refusal at or under 26 is about something else.
    expect(l.refused("m", 26, undefined)).toBeUndefined();
    expect(l.limit("m")).toBe(26);
  });

  it("a number the server named is tried first; a wrong one costs one more refused call, then 26, never a third", () => {
    const l = limits();
    expect(l.refused("m", 60, 52)).toBe(52);
    expect(l.refused("m", 52, undefined)).toBe(26);
    // The second refused call was the lesson's last: a third refusal stands, and the size tried is dropped.
    expect(l.refused("m", 26, 20)).toBeUndefined();
    expect(l.limit("m")).toBe(255);
  });

  it.each([0, 1, -1, 1.5, 60, 61, 1e9])(
    "a named number %s under the floor, or not under the call's widest choice, is no limit",
    (hint) => {
      const l = limits();
      expect(l.refused("m", 60, hint)).toBe(FIRST_PROBE);
      expect(l.limit("m")).toBeGreaterThanOrEqual(OPTION_LIMIT_FLOOR);
    },
  );

  it("a refusal of a call without a wide choice teaches nothing", () => {
    const l = limits();
    expect(l.refused("m", 0, 1)).toBeUndefined();
    expect(l.refused("m", 2, undefined)).toBeUndefined();
    expect(l.refused("m", 26, undefined)).toBeUndefined();
    expect(l.limit("m")).toBe(255);
    // A number under 26 the server named is taken for a call of up to 26.
    expect(l.refused("m", 20, 10)).toBe(10);
  });

  it(`a lesson holds ${OPTION_LIMIT_TTL_MS / 60_000} minutes, then the documented limit is tried again`, () => {
    const l = limits();
    l.refused("m", 60, undefined);
    l.answered("m", 26);
    now += OPTION_LIMIT_TTL_MS - 1;
    expect(l.limit("m")).toBe(26);
    now += 1;
    expect(l.limit("m")).toBe(255);
  });
});

describe("serverHint: a number only from the server's own words", () => {
  it("reads llama.cpp's and vLLM's wordings", () => {
    const c = call(choiceOf("pick", 60));
    expect(serverHint("questions.pick: too many options (60), this model supports at most 52", c)).toBe(52);
    expect(serverHint("question 'pick': at most 26 options for this model", c)).toBe(26);
    expect(serverHint("question 'pick': at most 26 alternatives for this model", c)).toBe(26);
    expect(serverHint("This model supports at most 26 choices per question", c)).toBe(26);
    expect(serverHint("questions: at most 64 for this model", c)).toBeUndefined();
    expect(serverHint("bad request", c)).toBeUndefined();
  });

  it.each([
    ["a question's name", call(choiceOf("option at most 0", 60)), "questions.option at most 0: too many options"],
    [
      "a name echoed in part",
      call(choiceOf("pick option at most 3 of these please", 60)),
      "questions.pick option at most 3 of…: bad",
    ],
    [
      "an instruction",
      call(choiceOf("q", 60, "Choose at most 2 options")),
      "questions.q: 'Choose at most 2 options' is not allowed",
    ],
    [
      "a label over the digits",
      call({ ...choiceOf("q", 3), options: [{ label: "5", description: undefined }] }),
      "option 5 is refused: at most 5",
    ],
  ])("skips a number that %s supplied", (_what, c, message) => {
    expect(serverHint(message, c)).toBeUndefined();
  });

  it("takes the server's number after an echoed one", () => {
    const c = call(choiceOf("option at most 0", 60));
    expect(serverHint("questions.option at most 0: too many options (60), this model supports at most 52", c)).toBe(52);
  });

  it("reads a long message in linear time (a 1 MB message of repeated phrases)", () => {
    const c = call(choiceOf("q", 60));
    expect(serverHint("option at most x ".repeat(60_000), c)).toBeUndefined();
  });
});
