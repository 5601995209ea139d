import type { AppError } from "@localdecider/service-kit";
import type { Request, RequestHandler, Response } from "express";
import { bearerAuth, keyHolder } from "../src/auth";

type Outcome = "pass" | Record<string, unknown> | string;

/**
 * What a middleware does with one Authorization header: passes (calls `next()` once, with nothing), or the
 * error it hands on. Anything else is reported as what it is, so that it fails every expectation: never calling
 * `next` (the request would hang), calling it twice, or touching the response (an empty object here: any use
 * of it throws).
 */
function outcomeOf(middleware: RequestHandler, authorization: string | undefined): Outcome {
  const outcomes: ("pass" | Record<string, unknown>)[] = [];
  const req = { get: (name: string) => (name.toLowerCase() === "authorization" ? authorization : undefined) };
  try {
    void middleware(req as Request, {} as Response, (err?: unknown) => {
      if (err === undefined) {
        outcomes.push("pass");
        return;
      }
      const e = err as AppError;
      outcomes.push({ status: e.status, body: e.toBody(), headers: e.headers });
    });
  } catch (err) {
    return `threw: ${(err as Error).message}`;
  }
  if (outcomes.length !== 1) return `next() called ${outcomes.length} times`;
  return outcomes[0] as Outcome;
}

/** What bearerAuth(key) does with one Authorization header. */
const check = (key: string | undefined, authorization: string | undefined) => outcomeOf(bearerAuth(key), authorization);

const refused = (error: string) => ({
  status: 401,
  body: { error, code: "unauthorized" },
  headers: { "WWW-Authenticate": 'Bearer realm="localdecider"' },
});

describe("the decider's bearer check (LOCALDECIDER_API_KEY)", () => {
  it("passes the key after Bearer in any letter case and after one or more spaces", () => {
    expect(["Bearer s3cret", "bearer s3cret", "Bearer   s3cret"].map((h) => check("s3cret", h))).toStrictEqual([
      "pass",
      "pass",
      "pass",
    ]);
  });

  it("answers 'Missing API key' without bearer credentials: no header, or another scheme", () => {
    expect(check("s3cret", undefined)).toStrictEqual(refused("Missing API key"));
    expect(check("s3cret", "Basic czNjcmV0")).toStrictEqual(refused("Missing API key"));
  });

  it("answers 'Invalid API key' for a wrong key and for a malformed header (no token, a tab, two tokens)", () => {
    for (const header of ["Bearer nope", "Bearer", "Bearer\ts3cret", "Bearer s3cret s3cret", "Bearer s3cret,x"]) {
      expect([header, check("s3cret", header)]).toStrictEqual([header, refused("Invalid API key")]);
    }
  });

  it("lets everything through without a key: no header, any bearer, a malformed one", () => {
    expect([undefined, "Bearer anything", "Bearer\tanything", "Basic x"].map((h) => check(undefined, h))).toStrictEqual(
      ["pass", "pass", "pass", "pass"],
    );
  });
});

describe("the check itself", () => {
  it("reports a middleware that never calls next, calls it twice, or touches the response", () => {
    expect(outcomeOf(() => {}, "Bearer s3cret")).toBe("next() called 0 times");
    const twice: RequestHandler = (_req, _res, next) => {
      next();
      next();
    };
    expect(outcomeOf(twice, "Bearer s3cret")).toBe("next() called 2 times");
    expect(outcomeOf((_req, res) => res.status(401), "Bearer s3cret")).toMatch(/^threw: /);
    expect(outcomeOf((_req, _res, next) => next(), "Bearer s3cret")).toBe("pass");
  });
});

describe("keyHolder: whether a caller holds the key (what /ready and /v1/models ask before naming addresses)", () => {
  it("is true for the configured key only, by bearerAuth's rules", () => {
    const holds = keyHolder("s3cret");
    expect(
      ["Bearer s3cret", "bearer   s3cret", "Bearer nope", "Bearer s3cret s3cret", "Basic czNjcmV0", undefined].map(
        holds,
      ),
    ).toStrictEqual([true, true, false, false, false, false]);
  });

  it("is never true without a configured key: then nobody is authenticated, whatever they send", () => {
    const holds = keyHolder(undefined);
    expect(["Bearer anything", "Bearer ", undefined].map(holds)).toStrictEqual([false, false, false]);
  });
});
