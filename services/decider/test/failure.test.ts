import { clip, ECHO_LIMITS } from "@localdecider/service-kit";
import { seededRandom } from "@localdecider/service-kit/test-utils";
import request from "supertest";
import { ACCEPTED_MODELS } from "../src/models";
import { classifyStatus, mentionsMaximumLength } from "../src/upstream/failure";
import { hashedScript } from "./fake-upstream/server";
import { capturingLogger, type Harness, harness } from "./helpers";

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
    const next = seededRandom(seed);
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

/** Log flooding: what a request (or a model server's answer to it) holds is repeated clipped, never whole. */
describe("what the decider repeats of a request", () => {
  let h: Harness;
  let lines: ReturnType<typeof capturingLogger>["lines"];
  beforeAll(async () => {
    const captured = capturingLogger("silly");
    lines = captured.lines;
    h = await harness({ logger: captured.logger, bodyLimit: "2mb" });
  });
  afterAll(async () => {
    await h.close();
  });
  beforeEach(() => {
    lines.length = 0;
  });
  const MEGABYTE = "m".repeat(1_000_000);
  /** The longest log line written so far, as JSON text. */
  const longestLine = () => Math.max(...lines.map((l) => JSON.stringify(l).length));
  const post = (body: unknown) =>
    request(h.app)
      .post("/v1/systemone")
      .send(body as object);

  it("answers an unknown model of 1 MB with its first 200 characters, and logs no more", async () => {
    const res = await post({
      model: MEGABYTE,
      state: null,
      questions: { a: { type: "noul", instructions: "Is it?" } },
    });
    expect(res.status).toBe(400);
    expect(res.body).toStrictEqual({
      error: `Unknown model "${clip(MEGABYTE)}"; available models: ${ACCEPTED_MODELS.join(", ")}`,
      code: "unknown_model",
    });
    expect(res.body.error).toContain(`"${"m".repeat(ECHO_LIMITS.quote)}… (999800 more characters)"`);
    expect(lines.some((l) => l.message === "request failed" && l.code === "unknown_model")).toBe(true);
    expect(longestLine()).toBeLessThan(2_000);
    expect(h.fake.calls).toBe(0);
  });

  it("lists the first 100 problems of a body of thousands of bad questions, and says how many more", async () => {
    // Fewer than LOCALDECIDER_MAX_QUESTIONS (4096), so they are read and refused as invalid (422).
    const questions = Object.fromEntries(Array.from({ length: 3_000 }, (_, i) => [`q${i}`, { type: "x" }]));
    const res = await post({ model: "localdecider", state: null, questions });
    expect(res.status).toBe(422);
    expect(res.body.details).toHaveLength(ECHO_LIMITS.details + 1);
    expect(res.body.details.at(-1)).toStrictEqual({
      path: "body",
      message: `and 2900 more problems (the first ${ECHO_LIMITS.details} are listed)`,
    });
    expect(JSON.stringify(res.body).length).toBeLessThan(20_000);
  });

  it("names a question of a 1 MB name by its first 200 characters in a field's path", async () => {
    const res = await post({ model: "localdecider", state: null, questions: { [MEGABYTE]: { type: "x" } } });
    expect(res.status).toBe(422);
    expect(res.body.details.map((d: { path: string }) => d.path)).toStrictEqual([
      `questions.${"m".repeat(190)}… (999815 more characters)`,
    ]);
    expect(longestLine()).toBeLessThan(2_000);
  });

  it("logs a model server's 1 MB error text, about a question of a 1 MB name, clipped", async () => {
    const name = "n".repeat(1_000_000);
    h.fake.script = () => {
      throw new Error("x".repeat(1_000_000));
    };
    try {
      const res = await post({
        model: "localdecider",
        state: null,
        questions: { [name]: { type: "noul", instructions: "Is it?" } },
      });
      expect(res.status).toBe(502);
    } finally {
      h.fake.script = hashedScript;
    }
    expect(lines.some((l) => l.message === "upstream call failed")).toBe(true);
    // Each string at most ECHO_LIMITS.text characters; a line holds a handful of them.
    expect(longestLine()).toBeLessThan(6 * (ECHO_LIMITS.text + 40));
  });
});
