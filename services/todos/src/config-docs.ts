import { sharedConfigDocs } from "@localdecider/service-kit";
import type { configSchema } from "./config";

/**
 * What each variable of the todos config schema means, for people: the one text of the configuration
 * reference, docs/configuration.md, which `pnpm docs:gen` writes from this map and the schema (name, default,
 * accepted values). Keyed by the schema's own variables, so a variable added to the schema without a line
 * here, or a line left after its variable went, fails the typecheck. Links are relative to docs/.
 */
export const CONFIG_DOCS: Record<keyof typeof configSchema.shape, string> = {
  TODOS_HOST: "Interface to listen on.",
  TODOS_PORT: "TCP port (0-65535; 0 picks a free one).",
  TODOS_ALLOWED_HOSTS:
    "Host names the service answers for besides `localhost`, `127.0.0.1`, `[::1]` and a specific `TODOS_HOST` (never `0.0.0.0`/`::`), each with any port: a comma list of names (`todos`, `todos.example.com`), addresses (`10.0.0.5`, `[fd00::1]`) and domains (`.example.com`: it and every name under it), or `*` for any name. A request for another name gets 421 (not `/health`, `/ready`, `/metrics`): with sign-in off it keeps a web page on a rebound DNS name from reading and writing every list through a browser (see [Host check](security.md#the-todos-host-check)). On with `TODOS_AUTH=off`; with `jwt` only when this is set.",
  TODOS_CORS_ORIGINS:
    "Browser origins that may call the API from a web page (CORS): a comma list of exact origins, `scheme://host[:port]` (`https://app.example.com`, `http://localhost:5173`); `*` and paths are refused. A listed origin gets `Access-Control-Allow-Origin` (its own), its preflights 204 with the methods and headers allowed (`authorization`, `content-type`, `x-request-id`), and may read `x-request-id`, `Location`, `Retry-After`, `WWW-Authenticate`, `Allow`. Unset (the default): no CORS header at all. No credentials mode (bearer tokens, never cookies).",
  DATABASE_URL: "`postgres://` or `postgresql://` URL. Unset: embedded PGlite in `TODOS_DATA_DIR`.",
  TODOS_DATA_DIR:
    "PGlite directory, relative to the working directory (with `pnpm --filter ... start` that is `services/todos/`, so `services/todos/data/todos`, gitignored). Created if missing. Locked (`todos.lock` inside it): a second process on the same directory exits 1 naming the owner, instead of silently losing writes. Ignored when `DATABASE_URL` is set.",
  TODOS_MAX_ITEMS_PER_USER:
    "Items one user may hold, 1 to 1,000,000. A create past it answers 409 and changes nothing, also when creates race for the last place (see [Limits](todos-api.md#limits)). Lowering it refuses creates for lists over it until they are under it; nothing is deleted.",
  TODOS_LIST_MAX_ITEMS:
    'Items in one list answer without `limit`/`page` (1 to 100,000); the rest is behind `Link: <…>; rel="next"` (see [the API](todos-api.md)).',
  TODOS_LIST_MAX_BYTES:
    "Bytes of items, as JSON, in one list answer without `limit`/`page`, with units like `LOCALDECIDER_BODY_LIMIT` (`512kb`, `2mb`); at least 512 KiB, so a page of 100 items is never cut.",
  LOG_LEVEL:
    "`error`, `warn`, `info`, `http` (adds one access line per request), `verbose`, `debug`, `silly`, `silent`.",
  TODOS_AUTH:
    "Sign-in (see [Sign-in](security.md#sign-in-optional-off-by-default)): `off`, no authentication (anyone who reaches the port can read and write every list: keep it on loopback or behind a proxy that authenticates), or `jwt`, every per-user route then requires a bearer JWT whose `sub` is the path's `userId`. With `off`, setting any `TODOS_JWT_*` variable stops the start naming `TODOS_AUTH`, so a half-done setup never runs open.",
  TODOS_JWT_JWKS_URL:
    "`jwt`: the provider's JSON Web Key Set, e.g. `https://issuer.example/.well-known/jwks.json` (the `jwks_uri` of its `/.well-known/openid-configuration`). `https://` only (`http://` just to `localhost`, `127.0.0.1`, `[::1]`). Tokens must then be RS/PS/ES 256/384/512 or EdDSA. Exactly one of this and `TODOS_JWT_SECRET`.",
  TODOS_JWT_SECRET:
    "`jwt`: an HS256 shared secret instead of a key set, used as its UTF-8 bytes (not base64-decoded); at least 32 bytes, e.g. `openssl rand -base64 48`. Only HS256 tokens are then accepted. Never logged.",
  TODOS_JWT_ISSUER:
    "`jwt`, required: the exact `iss` every token must carry (the provider's issuer, trailing slash included when it writes one).",
  TODOS_JWT_AUDIENCE:
    "`jwt`, required: the `aud` every token must carry (or hold, when `aud` is an array), e.g. the API identifier or client id the provider puts there.",
  TODOS_JWT_ADMIN_CLAIM:
    '`jwt`: name of a claim (e.g. `todos_admin`) that, when it is the JSON boolean `true`, lets the token act on any `userId`. The string `"true"`, `1` and the like do not count; a registered claim name (`sub`, `exp`, ...) is refused. Unset: no token acts for another user.',
  TODOS_JWT_MAX_LIFETIME:
    "`jwt`: the longest lifetime a token may declare, `exp - iat` in seconds, 60 to 31,536,000 (a year); unset: 86,400 (24 h). A token without `iat`, or with a longer lifetime, is refused (401). See [Sign-in](security.md#sign-in-optional-off-by-default).",
  TODOS_JWT_MAX_FUTURE_IAT:
    "`jwt`: how many seconds, 0 to 3,600, a token's `iat` may lie ahead of this host's clock (the provider's clock running ahead); unset: 60. A token issued further in the future is refused (401).",
  ...sharedConfigDocs("TODOS"),
};
