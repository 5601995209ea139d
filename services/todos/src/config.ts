import {
  allowedHostsSchema,
  byteSize,
  connectionLimit,
  connectionLimitsProblem,
  corsOriginsSchema,
  LOG_LEVELS,
  logFormatSchema,
} from "@localdecider/service-kit";
import { z } from "zod";

/**
 * Items one user may hold (TODOS_MAX_ITEMS_PER_USER unset). 10,000 is far beyond any hand-kept list, while it
 * bounds what one user can store (titles of at most 500 characters: under 20 MB). One list answer is bounded
 * apart from it (TODOS_LIST_MAX_ITEMS, TODOS_LIST_MAX_BYTES).
 */
export const DEFAULT_MAX_ITEMS_PER_USER = 10_000;
/** Upper bound of TODOS_MAX_ITEMS_PER_USER. */
export const MAX_ITEMS_PER_USER_LIMIT = 1_000_000;

/**
 * Items one list answer holds when the client does not page it (TODOS_LIST_MAX_ITEMS unset): a hand-kept list
 * comes whole, a long one a window at a time, with `Link: <…>; rel="next"` to the rest (src/http/list-window.ts).
 */
export const DEFAULT_LIST_MAX_ITEMS = 1_000;
/** Bytes of items as JSON in one list answer (TODOS_LIST_MAX_BYTES unset): 1 MiB. */
export const DEFAULT_LIST_MAX_BYTES = "1mb";
/**
 * The least TODOS_LIST_MAX_BYTES: a page of `limit=100` items of 500 control characters (about 315 KB) always
 * fits, so an explicit page is never cut short.
 */
export const LIST_MAX_BYTES_MIN = 512 * 1024;

/** Shortest accepted TODOS_JWT_SECRET, in UTF-8 bytes: HS256 keys shorter than the hash (32 bytes) are weak. */
export const JWT_SECRET_MIN_BYTES = 32;

/** JWT claims with a fixed meaning: none of them can name the admin claim. */
const REGISTERED_CLAIMS = ["iss", "sub", "aud", "exp", "nbf", "iat", "jti"];

/** Bounds of TODOS_JWT_MAX_LIFETIME, in seconds: a minute to a year. */
export const JWT_MAX_LIFETIME_RANGE = { min: 60, max: 31_536_000 } as const;
/** Bounds of TODOS_JWT_MAX_FUTURE_IAT, in seconds: none to an hour. */
export const JWT_MAX_FUTURE_IAT_RANGE = { min: 0, max: 3_600 } as const;

/** A whole number of seconds within a range; decimals, units ("24h") and the like are refused. */
function seconds(range: { min: number; max: number }) {
  return z
    .string()
    .regex(/^[0-9]+$/, { error: `must be a whole number of seconds (${range.min}-${range.max})`, abort: true })
    .transform(Number)
    .refine((n) => n >= range.min && n <= range.max, {
      error: `must be ${range.min}-${range.max} seconds`,
    });
}

const LOOPBACK_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** https://, or http:// to a loopback host only (a provider on the same machine, the tests' key server). */
function isJwksUrl(value: string): boolean {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  return url.protocol === "https:" || (url.protocol === "http:" && LOOPBACK_HOSTS.has(url.hostname));
}

/** The sign-in variables, all of which mean nothing unless TODOS_AUTH=jwt. */
const JWT_VARIABLES = [
  "TODOS_JWT_JWKS_URL",
  "TODOS_JWT_SECRET",
  "TODOS_JWT_ISSUER",
  "TODOS_JWT_AUDIENCE",
  "TODOS_JWT_ADMIN_CLAIM",
  "TODOS_JWT_MAX_LIFETIME",
  "TODOS_JWT_MAX_FUTURE_IAT",
] as const;

/**
 * The service's whole configuration, read from the environment at boot. Keys are the variable names, and
 * each carries its documented default, so the README's config table is exactly this list.
 */
export const configSchema = z
  .object({
    /** Interface to listen on. */
    TODOS_HOST: z.string().default("127.0.0.1"),
    /** TCP port to listen on (0 picks a free one). */
    TODOS_PORT: z.coerce.number().int().min(0).max(65535).default(3000),
    /**
     * Host names the service answers for besides the loopback names and TODOS_HOST (DNS rebinding): a comma
     * list of names, addresses and `.domain`s, or `*` for any. Unset: those alone with sign-in off, no check
     * with sign-in on. See hostPolicy in the service kit.
     */
    TODOS_ALLOWED_HOSTS: allowedHostsSchema().optional(),
    /** Browser origins allowed to call the API (CORS), a comma list; unset: no CORS headers (off). */
    TODOS_CORS_ORIGINS: corsOriginsSchema().optional(),
    /** PostgreSQL connection string; when unset the embedded PGlite database in TODOS_DATA_DIR is used. */
    DATABASE_URL: z
      .string()
      .regex(/^postgres(ql)?:\/\//, { error: "must be a postgres:// or postgresql:// URL" })
      .optional(),
    /** Directory of the embedded PGlite database, relative to the working directory unless absolute. */
    TODOS_DATA_DIR: z.string().default("./data/todos"),
    /** Items one user may hold; a create past it is refused (409) and changes nothing. */
    TODOS_MAX_ITEMS_PER_USER: z.coerce
      .number()
      .int()
      .min(1)
      .max(MAX_ITEMS_PER_USER_LIMIT)
      .default(DEFAULT_MAX_ITEMS_PER_USER),
    /** Items in one list answer without `limit`/`page`; the rest is behind `Link: <…>; rel="next"`. */
    TODOS_LIST_MAX_ITEMS: z.coerce.number().int().min(1).max(100_000).default(DEFAULT_LIST_MAX_ITEMS),
    /** Bytes of items (as JSON) in one list answer without `limit`/`page`; at least 512 KiB. */
    TODOS_LIST_MAX_BYTES: byteSize({ min: LIST_MAX_BYTES_MIN, fallback: DEFAULT_LIST_MAX_BYTES }),
    /** winston level; "silent" turns logging off. */
    LOG_LEVEL: z.enum(LOG_LEVELS).default("info"),
    /** "json" (one object a line, the default) or "pretty" (one readable line, for development). */
    LOG_FORMAT: logFormatSchema(),
    /** Milliseconds a client has to send its request headers (then 408 and closed); see the kit's connection-limits.ts. */
    TODOS_HEADERS_TIMEOUT_MS: connectionLimit("headersTimeoutMs"),
    /** Milliseconds a client has to send its whole request, body included (then 408 and closed). */
    TODOS_REQUEST_TIMEOUT_MS: connectionLimit("requestTimeoutMs"),
    /** Milliseconds an idle kept-alive connection stays open waiting for its next request. */
    TODOS_IDLE_TIMEOUT_MS: connectionLimit("keepAliveTimeoutMs"),
    /** Connections held at once; one more is closed as it opens. */
    TODOS_MAX_CONNECTIONS: connectionLimit("maxConnections"),
    /** How often (milliseconds) the two request timeouts are checked: the slack on each. */
    TODOS_TIMEOUT_CHECK_MS: connectionLimit("connectionsCheckingIntervalMs"),
    /** Sign-in: "off" (no authentication, the default) or "jwt" (a bearer JWT on every per-user route). */
    TODOS_AUTH: z.enum(["off", "jwt"], { error: 'must be "off" or "jwt"' }).default("off"),
    /** JWT mode: the provider's JSON Web Key Set (asymmetric keys; fetched, cached, refetched on rotation). */
    TODOS_JWT_JWKS_URL: z
      .string()
      .refine(isJwksUrl, { error: "must be an https:// URL (http:// only to localhost, 127.0.0.1 or [::1])" })
      .optional(),
    /** JWT mode: an HS256 shared secret instead of a key set, as its UTF-8 bytes. */
    TODOS_JWT_SECRET: z
      .string()
      .refine((s) => Buffer.byteLength(s, "utf8") >= JWT_SECRET_MIN_BYTES, {
        error: `must be at least ${JWT_SECRET_MIN_BYTES} bytes`,
      })
      .optional(),
    /** JWT mode: the `iss` every token must carry (required in that mode). */
    TODOS_JWT_ISSUER: z.string().optional(),
    /** JWT mode: the `aud` every token must carry, or contain (required in that mode). */
    TODOS_JWT_AUDIENCE: z.string().optional(),
    /** JWT mode: a claim that, when `true`, lets a token act on any userId. Unset: no admin tokens. */
    TODOS_JWT_ADMIN_CLAIM: z
      .string()
      .refine((name) => !REGISTERED_CLAIMS.includes(name), {
        error: `must not be a registered claim (${REGISTERED_CLAIMS.join(", ")})`,
      })
      .optional(),
    /**
     * JWT mode: the longest lifetime (`exp - iat`, seconds) a token may declare. Unset: 86400 (24 h,
     * TOKEN_TIME_DEFAULTS in src/http/auth.ts; optional here so that setting it with sign-in off is refused).
     */
    TODOS_JWT_MAX_LIFETIME: seconds(JWT_MAX_LIFETIME_RANGE).optional(),
    /** JWT mode: how many seconds a token's `iat` may lie ahead of this host's clock. Unset: 60. */
    TODOS_JWT_MAX_FUTURE_IAT: seconds(JWT_MAX_FUTURE_IAT_RANGE).optional(),
  })
  .superRefine((config, ctx) => {
    const problem = (variable: string, message: string) => ctx.addIssue({ code: "custom", path: [variable], message });
    const timeouts = connectionLimitsProblem({
      headersTimeoutMs: config.TODOS_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: config.TODOS_REQUEST_TIMEOUT_MS,
    });
    if (timeouts !== undefined) problem("TODOS_HEADERS_TIMEOUT_MS", timeouts);
    if (config.TODOS_AUTH === "off") {
      // A key or issuer without the switch would leave the service open while the operator believes it is not.
      for (const name of JWT_VARIABLES) {
        if (config[name] !== undefined) problem("TODOS_AUTH", `must be "jwt" when ${name} is set (it is "off")`);
      }
      return;
    }
    const jwks = config.TODOS_JWT_JWKS_URL !== undefined;
    const secret = config.TODOS_JWT_SECRET !== undefined;
    if (jwks && secret) {
      problem("TODOS_JWT_SECRET", "must not be set together with TODOS_JWT_JWKS_URL: choose one key source");
    } else if (!jwks && !secret) {
      problem("TODOS_JWT_JWKS_URL", "is required when TODOS_AUTH=jwt, unless TODOS_JWT_SECRET is set instead");
    }
    if (config.TODOS_JWT_ISSUER === undefined) problem("TODOS_JWT_ISSUER", "is required when TODOS_AUTH=jwt");
    if (config.TODOS_JWT_AUDIENCE === undefined) problem("TODOS_JWT_AUDIENCE", "is required when TODOS_AUTH=jwt");
  });

export type Config = z.infer<typeof configSchema>;
