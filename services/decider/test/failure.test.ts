import { classifyStatus, mentionsMaximumLength } from "../src/upstream/failure";

/** A small seeded generator (mulberry32), so a failing case can be replayed from its seed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("classifyStatus on a server's 400", () => {
  it.each([
    ["vLLM's maximum context length", "This model's maximum context length is 4096 tokens."],
    ["maximum … length without the word context", "prompt exceeds the MAXIMUM input LENGTH"],
    ["maximum and length on one line, after other lines", "bad request\nthe maximum allowed length is 2048"],
    ["too many tokens", "too many tokens in prompt"],
  ])("reads %s as a context overflow", (_situation, message) => {
    expect(classifyStatus(400, message).kind).toBe("context_overflow");
  });

  it.each([
    ["maximum and length on different lines", "maximum\nlength"],
    ["length before maximum", "length of the maximum"],
    ["an unrelated complaint", "invalid value for temperature"],
  ])("does not read %s as a context overflow", (_situation, message) => {
    expect(classifyStatus(400, message).kind).toBe("server_error");
  });

  it("reads 20,000 generated messages exactly as the regex /maximum.*length/i does", () => {
    const pieces = [
      "maximum",
      "MAXIMUM",
      "length",
      "Length",
      "maxim",
      "ength",
      " ",
      "x",
      "\n",
      "\r",
      "\u2028",
      "\u2029",
    ];
    const seed = 9;
    const next = random(seed);
    for (let n = 0; n < 20_000; n++) {
      const count = Math.floor(next() * 8);
      let message = "";
      for (let i = 0; i < count; i++) message += pieces[Math.floor(next() * pieces.length)];
      if (mentionsMaximumLength(message) !== /maximum.*length/i.test(message)) {
        throw new Error(`seed ${seed}, case ${n}: ${JSON.stringify(message)}`);
      }
    }
  });

  // The server's text can repeat the request; a regex with an unbounded wildcard before more pattern
  // (`maximum.*length`) rescans the line from every "maximum": quadratic (8,000 repeats took 0.2 s, a
  // megabyte of them minutes).
  it("lets no regex with a wildcard run read the server's text", () => {
    const exec = jest.spyOn(RegExp.prototype, "exec");
    try {
      classifyStatus(400, "maximum ".repeat(100));
      classifyStatus(500, "maximum ".repeat(100));
      const wildcards = exec.mock.contexts.map((re) => re.source).filter((source) => /\.[*+]/.test(source));
      expect(wildcards).toStrictEqual([]);
    } finally {
      exec.mockRestore();
    }
  });

  it.each([
    ["a megabyte repeating maximum", "maximum ".repeat(131_072), "server_error"],
    [
      "a megabyte of maximum on separate lines, length at the end",
      `${"maximum\n".repeat(131_072)}length`,
      "server_error",
    ],
    ["a megabyte repeating maximum, then length", `${"maximum ".repeat(131_072)}length`, "context_overflow"],
  ])("classifies %s in one pass", (_situation, message, kind) => {
    expect(classifyStatus(400, message).kind).toBe(kind);
  });
});
