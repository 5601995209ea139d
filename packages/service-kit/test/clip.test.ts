import express from "express";
import request from "supertest";
import { z } from "zod";
import { AppError, clip, clipStrings, ECHO_LIMITS, errorHandler, jsonBody, requestId, validationDetails } from "../src";
import { captureLines } from "./capture-logger";

const MEGABYTE = "m".repeat(1_000_000);
/** What a clipped string may grow to: the limit, then "… (N more characters)". */
const clippedLength = (limit: number) => limit + 40;

describe("clip", () => {
  it("leaves a short text alone and cuts a long one, saying how much was left out", () => {
    expect(clip("gpt-4")).toBe("gpt-4");
    expect(clip("x".repeat(ECHO_LIMITS.quote))).toBe("x".repeat(ECHO_LIMITS.quote));
    expect(clip("abcdef", 3)).toBe("abc… (3 more characters)");
    expect(clip(MEGABYTE)).toBe(`${"m".repeat(ECHO_LIMITS.quote)}… (${1_000_000 - ECHO_LIMITS.quote} more characters)`);
  });

  it("never cuts a surrogate pair in two", () => {
    expect(clip("ab😀cd", 3)).toBe("ab… (4 more characters)");
  });
});

describe("clipStrings", () => {
  it("clips every string, however nested, and changes none of the caller's objects", () => {
    const failure = { kind: "timeout", detail: MEGABYTE, tries: [{ said: MEGABYTE }, "short"] };
    const clipped = clipStrings({ failure, n: 3 }, 10);
    expect(clipped).toStrictEqual({
      failure: {
        kind: "timeout",
        detail: "mmmmmmmmmm… (999990 more characters)",
        tries: [{ said: "mmmmmmmmmm… (999990 more characters)" }, "short"],
      },
      n: 3,
    });
    expect(failure.detail).toBe(MEGABYTE);
    expect(failure.tries[0]).toStrictEqual({ said: MEGABYTE });
  });

  it("returns the very value when nothing needs clipping", () => {
    const fields = { a: "short", b: [1, { c: "also short" }] };
    expect(clipStrings(fields)).toBe(fields);
  });
});

describe("log lines", () => {
  it("hold at most ECHO_LIMITS.text characters of any string: message, fields, nested fields, stacks", () => {
    const { logger, lines } = captureLines();
    logger.warn(MEGABYTE, { question: MEGABYTE, failure: { detail: MEGABYTE }, list: [MEGABYTE] });
    logger.error("unhandled error", { error: MEGABYTE, stack: `Error: ${MEGABYTE}\n    at somewhere` });
    logger.error(new Error(MEGABYTE));
    expect(lines).toHaveLength(3);
    for (const line of lines) {
      expect(line.length).toBeLessThan(6 * clippedLength(ECHO_LIMITS.text));
      expect(line).toContain(`more characters)`);
    }
    const first = JSON.parse(lines[0] as string);
    expect(first.question).toBe(clip(MEGABYTE, ECHO_LIMITS.text));
    expect(first.failure.detail).toBe(clip(MEGABYTE, ECHO_LIMITS.text));
  });

  it("are written unchanged when nothing in them is long", () => {
    const { logger, lines } = captureLines();
    logger.info("request", { path: "/users/alice/todos", status: 200 });
    expect(JSON.parse(lines[0] as string)).toMatchObject({
      message: "request",
      path: "/users/alice/todos",
      status: 200,
    });
  });
});

describe("error bodies", () => {
  it("repeat at most ECHO_LIMITS.text characters of an AppError's message or of a string in its details", () => {
    const err = new AppError(400, `Unknown thing "${MEGABYTE}"`, { details: [{ path: MEGABYTE, message: "bad" }] });
    const body = err.toBody();
    expect(body.error).toBe(clip(`Unknown thing "${MEGABYTE}"`, ECHO_LIMITS.text));
    expect(body.details).toStrictEqual([{ path: clip(MEGABYTE, ECHO_LIMITS.text), message: "bad" }]);
  });

  it("through the error middleware: a 1 MB message is answered and logged clipped", async () => {
    const { logger, lines } = captureLines();
    const app = express();
    app.use(requestId({}));
    app.use(jsonBody({ limit: "2mb" }));
    app.post("/things", (req) => {
      throw new AppError(400, `Unknown thing "${String(req.body.name)}"`, { cause: new Error(String(req.body.name)) });
    });
    app.use(errorHandler({ logger }));
    const res = await request(app).post("/things").send({ name: MEGABYTE });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body).length).toBeLessThan(clippedLength(ECHO_LIMITS.text) + 40);
    expect(lines.map((l) => l.length <= 2 * clippedLength(ECHO_LIMITS.text) + 500)).toStrictEqual([true]);
  });
});

describe("validationDetails", () => {
  const schema = z.record(z.string(), z.number());

  it("lists the first ECHO_LIMITS.details problems and says how many more there were", () => {
    const body = Object.fromEntries(Array.from({ length: 250 }, (_, i) => [`k${i}`, "not a number"]));
    const result = schema.safeParse(body);
    if (result.success) throw new Error("expected a failure");
    const details = validationDetails(result.error, { root: "body" });
    expect(details).toHaveLength(ECHO_LIMITS.details + 1);
    expect(details[0]).toStrictEqual({ path: "k0", message: "Invalid input: expected number, received string" });
    expect(details.at(-1)).toStrictEqual({
      path: "body",
      message: `and 150 more problems (the first ${ECHO_LIMITS.details} are listed)`,
    });
  });

  it("clips a path made of a long key to ECHO_LIMITS.quote characters", () => {
    const result = schema.safeParse({ [MEGABYTE]: "x" });
    if (result.success) throw new Error("expected a failure");
    expect(validationDetails(result.error, { root: "body" })).toStrictEqual([
      { path: clip(MEGABYTE), message: "Invalid input: expected number, received string" },
    ]);
  });
});
