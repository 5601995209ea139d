import type { RequestHandler } from "express";
import { z } from "zod";

/**
 * CORS, opt-in: browsers on the listed origins may call the service (`*_CORS_ORIGINS`); with the variable
 * unset (the default) the service sends no CORS header at all, so a page on another origin can send a
 * simple request but never read the answer, as before. Only explicit origins: no `*` and no patterns, so
 * a list always says exactly which web apps may read answers. No credentials mode: the services take bearer
 * tokens in a header, never cookies, so `Access-Control-Allow-Credentials` is never sent.
 */

/** `https://app.example.com` or `http://localhost:5173`: scheme, host and port only, as a browser's `Origin`. */
function parseOrigin(entry: string): string | { problem: string } {
  const problem = {
    problem: `"${entry}" is not an origin: write scheme://host[:port] with nothing after (https://app.example.com, http://localhost:5173); list each one, * is not accepted`,
  };
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    return problem;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return problem;
  if (url.username !== "" || url.password !== "" || url.search !== "" || url.hash !== "") return problem;
  if (!/^[a-z]+:\/\/[^/?#@]+\/?$/i.test(entry)) return problem;
  return url.origin;
}

/** The zod field of a service's `*_CORS_ORIGINS` variable: a comma list of origins, parsed; unset: CORS off. */
export function corsOriginsSchema() {
  return z
    .string()
    .max(16_384)
    .transform((text, ctx) => {
      const origins: string[] = [];
      for (const entry of text
        .split(",")
        .map((e) => e.trim())
        .filter((e) => e !== "")) {
        const parsed = parseOrigin(entry);
        if (typeof parsed !== "string") {
          ctx.addIssue({ code: "custom", message: parsed.problem });
          return z.NEVER;
        }
        if (!origins.includes(parsed)) origins.push(parsed);
      }
      return origins;
    });
}

export interface CorsOptions {
  /** The origins allowed (corsOriginsSchema's output). */
  origins: readonly string[];
  /** Request headers a page may send beyond the CORS-safelisted ones. */
  allowHeaders?: readonly string[];
  /** Response headers a page may read beyond the safelisted ones. */
  exposeHeaders?: readonly string[];
  /** How long a browser may cache a preflight's answer, in seconds. */
  maxAgeSeconds?: number;
}

export const CORS_DEFAULTS = {
  allowHeaders: ["authorization", "content-type", "x-request-id"],
  exposeHeaders: ["x-request-id", "location", "retry-after", "www-authenticate", "allow"],
  maxAgeSeconds: 600,
} as const;

/**
 * The CORS middleware. A request whose `Origin` is listed gets `Access-Control-Allow-Origin` (that origin)
 * and the exposed headers; its preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered 204
 * with the methods and headers allowed. Any other request passes untouched (an unlisted origin's preflight
 * then gets the route's own OPTIONS answer, without CORS headers, which the browser refuses).
 */
export function cors(options: CorsOptions): RequestHandler {
  const origins = new Set(options.origins);
  const allowHeaders = options.allowHeaders ?? CORS_DEFAULTS.allowHeaders;
  const expose = (options.exposeHeaders ?? CORS_DEFAULTS.exposeHeaders).join(", ");
  const maxAge = String(options.maxAgeSeconds ?? CORS_DEFAULTS.maxAgeSeconds);
  return (req, res, next) => {
    // Caches must keep answers to different origins apart, listed or not.
    res.vary("Origin");
    const origin = req.get("origin");
    if (origin === undefined || !origins.has(origin)) {
      next();
      return;
    }
    res.set("Access-Control-Allow-Origin", origin);
    const requested = req.get("access-control-request-method");
    if (req.method === "OPTIONS" && requested !== undefined) {
      res.set("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, DELETE");
      res.set("Access-Control-Allow-Headers", allowHeaders.join(", "));
      res.set("Access-Control-Max-Age", maxAge);
      res.status(204).end();
      return;
    }
    res.set("Access-Control-Expose-Headers", expose);
    next();
  };
}
