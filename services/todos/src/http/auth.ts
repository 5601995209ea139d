import { TODOS_AUTH_REALM } from "@localdecider/contracts/todos";
import { AppError, parseBearer } from "@localdecider/service-kit";
import type { RequestHandler } from "express";
import { errors, type JWTPayload, type JWTVerifyGetKey, jwtVerify } from "jose";
import type { Config } from "../config";
import { KeySetUnavailable, RemoteKeySet } from "./key-set";

/**
 * Sign-in (TODOS_AUTH=jwt): every per-user route wants `Authorization: Bearer <JWT>`, verified with jose
 * against either the provider's JSON Web Key Set or an HS256 shared secret, whose `sub` is the path's
 * `:userId` (or which carries the configured admin claim as `true`).
 */

export const AUTH_REALM = TODOS_AUTH_REALM;

/** Name of the security scheme in /openapi.json. */
export const BEARER_SCHEME = "bearerAuth";

/** The `error` of each sign-in failure (todos error bodies are `{ error }`, without a code). */
export const AUTH_MESSAGES = {
  missing: "Missing bearer token",
  invalid: "Invalid bearer token",
  forbidden: "Token not valid for this user",
  keysUnavailable: "Sign-in keys unavailable",
} as const;

/** Asymmetric algorithms accepted from a key set; never `none`, never an HMAC one (key-confusion attacks). */
export const JWKS_ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
  "Ed25519",
];
/** The one algorithm accepted with a shared secret. */
export const SECRET_ALGORITHMS = ["HS256"];

/** Leeway for `exp` and `nbf` against clock drift between the provider and this host. */
export const CLOCK_TOLERANCE_SECONDS = 5;

/**
 * Bounds on a token's time claims beyond `exp` and `nbf` (TODOS_JWT_MAX_LIFETIME, TODOS_JWT_MAX_FUTURE_IAT
 * when unset). With `exp` in the future, a lifetime `exp - iat` of at most 24 h also means the token was
 * issued at most 24 h ago, and an `iat` at most 60 s ahead means it stays valid at most 24 h + 60 s from now.
 */
export const TOKEN_TIME_DEFAULTS = {
  /** 24 h: the longest default access token lifetime of the common providers (Auth0's), and well above most. */
  maxLifetimeSeconds: 86_400,
  /** 60 s: clocks of NTP-synced hosts agree within a second; this leaves room for a badly synced one. */
  maxFutureIatSeconds: 60,
};

/** How the provider's key set is fetched and kept (src/http/key-set.ts), unless a test passes others. */
export const JWKS_DEFAULTS = {
  /**
   * One deadline for the whole fetch of the key set: connecting, headers and body. Past it the fetch fails
   * and the request answers 503; the next request fetches again.
   */
  timeoutMs: 5_000,
  /** A key set body longer than this fails the fetch (503). Real sets are a few KiB; 256 KiB is ample. */
  maxBytes: 256 * 1024,
  /** No refetch sooner than this after the last successful one, even for an unknown `kid`. */
  cooldownMs: 30_000,
  /** A key set older than this is refetched on the next request. */
  cacheMaxAgeMs: 600_000,
};

export type KeySource =
  | { jwksUrl: URL; timeoutMs?: number; maxBytes?: number; cooldownMs?: number; cacheMaxAgeMs?: number }
  | { secret: string };

export interface JwtAuthOptions {
  keys: KeySource;
  /** Required `iss`. */
  issuer: string;
  /** Required `aud` (the token's `aud` equals it, or is an array holding it). */
  audience: string;
  /** A claim that, when exactly `true`, lets the token act on any userId. */
  adminClaim?: string;
  /** Longest accepted `exp - iat`, in seconds (default TOKEN_TIME_DEFAULTS.maxLifetimeSeconds). */
  maxLifetimeSeconds?: number;
  /** How far `iat` may lie ahead of this host's clock, in seconds (default TOKEN_TIME_DEFAULTS). */
  maxFutureIatSeconds?: number;
}

export interface TodosAuth {
  keySource: "jwks" | "secret";
  /**
   * The token's claims once signature, algorithm, `iss`, `aud`, `exp`, `iat` (lifetime, not ahead) and `sub`
   * are checked; else an AppError (401, or 503 when the key set cannot be fetched).
   */
  verify(token: string): Promise<JWTPayload & { sub: string }>;
  adminClaim: string | undefined;
  /** The bounds on `exp - iat` and on `iat` ahead of this host's clock that `verify` applies, in seconds. */
  tokenTimes: { maxLifetimeSeconds: number; maxFutureIatSeconds: number };
}

function wwwAuthenticate(invalidToken: boolean): Record<string, string> {
  const params = invalidToken ? `realm="${AUTH_REALM}", error="invalid_token"` : `realm="${AUTH_REALM}"`;
  return { "WWW-Authenticate": `Bearer ${params}` };
}

/** `Retry-After` of a 503 for an unavailable key set: the fetch deadline in whole seconds, at least 1. */
export function keysRetryAfterSeconds(timeoutMs: number): number {
  return Math.max(1, Math.ceil(timeoutMs / 1000));
}

/** A key-set lookup whose transport and content failures are told apart from a token that matches no key. */
function remoteKeys(source: Extract<KeySource, { jwksUrl: URL }>): JWTVerifyGetKey {
  const keySet = new RemoteKeySet({
    url: source.jwksUrl,
    timeoutMs: source.timeoutMs ?? JWKS_DEFAULTS.timeoutMs,
    maxBytes: source.maxBytes ?? JWKS_DEFAULTS.maxBytes,
    cooldownMs: source.cooldownMs ?? JWKS_DEFAULTS.cooldownMs,
    cacheMaxAgeMs: source.cacheMaxAgeMs ?? JWKS_DEFAULTS.cacheMaxAgeMs,
  });
  return keySet.getKey;
}

/**
 * The checks jose has no separate setting for: `iat` at most `maxFutureIatSeconds` ahead of this host's clock
 * (jose's maxTokenAge would apply the 5 s exp/nbf leeway to it), and a lifetime `exp - iat` of at most
 * `maxLifetimeSeconds`. jose has already checked that both are numbers and that `exp` is not past.
 */
function checkTokenTimes(
  payload: JWTPayload,
  limits: { maxLifetimeSeconds: number; maxFutureIatSeconds: number },
): void {
  const iat = payload.iat as number;
  const exp = payload.exp as number;
  const now = Math.floor(Date.now() / 1000);
  if (iat > now + limits.maxFutureIatSeconds) {
    throw new errors.JWTClaimValidationFailed(
      `"iat" claim timestamp check failed (more than ${limits.maxFutureIatSeconds} s in the future)`,
      payload,
      "iat",
      "check_failed",
    );
  }
  if (exp - iat > limits.maxLifetimeSeconds) {
    throw new errors.JWTClaimValidationFailed(
      `token lifetime (exp - iat) over ${limits.maxLifetimeSeconds} s`,
      payload,
      "exp",
      "check_failed",
    );
  }
}

export function createJwtAuth(options: JwtAuthOptions): TodosAuth {
  const { keys } = options;
  const keySource = "jwksUrl" in keys ? "jwks" : "secret";
  const verifyOptions = {
    algorithms: "jwksUrl" in keys ? JWKS_ALGORITHMS : SECRET_ALGORITHMS,
    issuer: options.issuer,
    audience: options.audience,
    clockTolerance: CLOCK_TOLERANCE_SECONDS,
    // jose checks exp only when present; a token that never expires is refused. iat is needed to bound the
    // token's lifetime (checkTokenTimes).
    requiredClaims: ["exp", "iat", "sub"],
  };
  const limits = {
    maxLifetimeSeconds: options.maxLifetimeSeconds ?? TOKEN_TIME_DEFAULTS.maxLifetimeSeconds,
    maxFutureIatSeconds: options.maxFutureIatSeconds ?? TOKEN_TIME_DEFAULTS.maxFutureIatSeconds,
  };
  const secret = "secret" in keys ? new TextEncoder().encode(keys.secret) : undefined;
  const getKey = "jwksUrl" in keys ? remoteKeys(keys) : undefined;
  const retryAfter = keysRetryAfterSeconds(("jwksUrl" in keys ? keys.timeoutMs : undefined) ?? JWKS_DEFAULTS.timeoutMs);

  return {
    keySource,
    adminClaim: options.adminClaim,
    tokenTimes: limits,
    async verify(token) {
      try {
        const { payload } =
          getKey !== undefined
            ? await jwtVerify(token, getKey, verifyOptions)
            : await jwtVerify(token, secret as Uint8Array, verifyOptions);
        checkTokenTimes(payload, limits);
        if (typeof payload.sub !== "string" || payload.sub === "") {
          throw new errors.JWTClaimValidationFailed(
            '"sub" claim must be a non-empty string',
            payload,
            "sub",
            "invalid",
          );
        }
        return payload as JWTPayload & { sub: string };
      } catch (err) {
        // Unreachable, non-200, over the deadline or the size cap, not JSON, not a key set: the provider's
        // fault. The token may be fine, so not a 401 (a client would throw it away).
        if (err instanceof KeySetUnavailable) {
          throw new AppError(503, AUTH_MESSAGES.keysUnavailable, {
            headers: { "Retry-After": String(retryAfter) },
            logLevel: "error",
            cause: err,
          });
        }
        // Bad signature, disallowed alg (none, HS256 with a key set), wrong iss/aud, expired, unknown kid (no
        // key for it even after the refetch allowed, or several candidates for a token without kid),
        // malformed: all the same 401 to the client; the reason goes to the log line.
        throw new AppError(401, AUTH_MESSAGES.invalid, { headers: wwwAuthenticate(true), cause: err });
      }
    },
  };
}

/** The sign-in the config asks for, or undefined when TODOS_AUTH=off. */
export function authFromConfig(config: Config): TodosAuth | undefined {
  if (config.TODOS_AUTH === "off") return undefined;
  const { TODOS_JWT_JWKS_URL: jwksUrl, TODOS_JWT_SECRET: secret } = config;
  const issuer = config.TODOS_JWT_ISSUER;
  const audience = config.TODOS_JWT_AUDIENCE;
  // configSchema already refuses these; kept so a config built by hand cannot switch sign-in off silently.
  if (issuer === undefined || audience === undefined || (jwksUrl === undefined) === (secret === undefined)) {
    throw new Error("TODOS_AUTH=jwt needs TODOS_JWT_ISSUER, TODOS_JWT_AUDIENCE and one key source");
  }
  return createJwtAuth({
    keys: jwksUrl !== undefined ? { jwksUrl: new URL(jwksUrl) } : { secret: secret as string },
    issuer,
    audience,
    ...(config.TODOS_JWT_ADMIN_CLAIM === undefined ? {} : { adminClaim: config.TODOS_JWT_ADMIN_CLAIM }),
    ...(config.TODOS_JWT_MAX_LIFETIME === undefined ? {} : { maxLifetimeSeconds: config.TODOS_JWT_MAX_LIFETIME }),
    ...(config.TODOS_JWT_MAX_FUTURE_IAT === undefined ? {} : { maxFutureIatSeconds: config.TODOS_JWT_MAX_FUTURE_IAT }),
  });
}

/**
 * Runs before anything else of a per-user route (before the body is read): 401 without a valid token,
 * 403 when the token's subject is not the path's `:userId` and it carries no admin claim. The header is read
 * by the kit's parseBearer (the decider's rules too): no bearer credentials (none, or another scheme) is
 * "missing"; a Bearer header without exactly one b64token after its spaces is "invalid".
 */
export function requireUser(auth: TodosAuth): RequestHandler {
  return async (req, _res, next) => {
    const token = parseBearer(req.headers.authorization);
    if (token === undefined) throw new AppError(401, AUTH_MESSAGES.missing, { headers: wwwAuthenticate(false) });
    if (typeof token !== "string") {
      throw new AppError(401, AUTH_MESSAGES.invalid, {
        headers: wwwAuthenticate(true),
        cause: new Error(`Authorization header is not Bearer <token>: ${token.malformed}`),
      });
    }
    const claims = await auth.verify(token);
    const admin = auth.adminClaim !== undefined && claims[auth.adminClaim] === true;
    if (claims.sub !== req.params.userId && !admin) {
      throw new AppError(403, AUTH_MESSAGES.forbidden, {
        cause: new Error(`subject ${JSON.stringify(claims.sub)} is not the path's userId`),
      });
    }
    next();
  };
}

/** How /openapi.json describes the scheme (its 401/403/503 are TODOS_AUTH_RESPONSES in contracts). */
export const BEARER_SECURITY_SCHEME = {
  type: "http" as const,
  scheme: "bearer",
  bearerFormat: "JWT",
  description:
    "A JWT from the configured OpenID Connect provider (or signed with the shared HS256 secret) with the service's `iss` and `aud`, an `exp` and an `iat` (a lifetime `exp - iat` of at most the service's maximum, 24 h by default, and an `iat` not in the future), and `sub` equal to the path's `userId` (or the configured admin claim set to `true`).",
};
