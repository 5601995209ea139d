import type { AppError } from "@localdecider/service-kit";
import type { Request, Response } from "express";
import { bearerAuth } from "../src/auth";

/** What bearerAuth(key) does with one Authorization header: passes, or the error it hands on. */
function check(key: string | undefined, authorization: string | undefined): "pass" | Record<string, unknown> {
  let outcome: "pass" | Record<string, unknown> = "pass";
  const req = { get: (name: string) => (name.toLowerCase() === "authorization" ? authorization : undefined) };
  bearerAuth(key)(req as Request, {} as Response, (err?: unknown) => {
    if (err === undefined) return;
    const e = err as AppError;
    outcome = { status: e.status, body: e.toBody(), headers: e.headers };
  });
  return outcome;
}

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

  it("lets everything through without a key", () => {
    expect(check(undefined, "Bearer\tanything")).toBe("pass");
  });
});
