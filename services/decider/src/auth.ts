import { createHash, timingSafeEqual } from "node:crypto";
import type { RequestHandler } from "express";
import { deciderError } from "./errors";

const digest = (value: string) => createHash("sha256").update(value).digest();

/**
 * `Authorization: Bearer <key>` when a key is configured, compared in constant time (over digests, so
 * the length of the key does not leak either). Without a key every request passes, bearer or not: the
 * SDK always sends one.
 */
export function bearerAuth(apiKey: string | undefined): RequestHandler {
  if (apiKey === undefined) return (_req, _res, next) => next();
  const expected = digest(apiKey);
  return (req, _res, next) => {
    const match = /^Bearer\s+(.+)$/i.exec(req.get("authorization") ?? "");
    const token = match?.[1]?.trim();
    if (token !== undefined && timingSafeEqual(digest(token), expected)) {
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
