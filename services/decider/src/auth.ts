import { createHash, timingSafeEqual } from "node:crypto";
import { parseBearer } from "@localdecider/service-kit";
import type { RequestHandler } from "express";
import { deciderError } from "./errors";

const digest = (value: string) => createHash("sha256").update(value).digest();
const matches = (token: unknown, expected: Buffer) =>
  typeof token === "string" && timingSafeEqual(digest(token), expected);

/**
 * Whether an `Authorization` header carries the configured key (the same rules as bearerAuth): what the
 * open routes (`/ready`, and `/v1/models` without a key) ask before they name internal addresses. Never true
 * without a key: then nobody is authenticated, whatever they send.
 */
export function keyHolder(apiKey: string | undefined): (authorization: string | undefined) => boolean {
  if (apiKey === undefined) return () => false;
  const expected = digest(apiKey);
  return (authorization) => matches(parseBearer(authorization), expected);
}

/**
 * `Authorization: Bearer <key>` when a key is configured, read by the kit's parseBearer (the todos' rules
 * too) and compared in constant time (over digests, so the length of the key does not leak either). No
 * bearer credentials: "Missing API key"; a malformed header or a wrong key: "Invalid API key". Without a key
 * every request passes, bearer or not: the SDK always sends one. A key no client could send as a bearer
 * token (a space, `$`, ...: outside RFC 6750's b64token) is refused by the config at boot (config.ts).
 */
export function bearerAuth(apiKey: string | undefined): RequestHandler {
  if (apiKey === undefined) return (_req, _res, next) => next();
  const expected = digest(apiKey);
  return (req, _res, next) => {
    const token = parseBearer(req.get("authorization"));
    if (matches(token, expected)) {
      next();
      return;
    }
    next(
      deciderError("unauthorized", token === undefined ? "Missing API key" : "Invalid API key", {
        headers: { "WWW-Authenticate": 'Bearer realm="localdecider"' },
      }),
    );
  };
}
