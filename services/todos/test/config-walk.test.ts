import { ConfigError, loadConfig } from "@localdecider/service-kit";
import { configSchema } from "../src/config";

/** A valid sign-in setup, so that one sign-in variable at a time can be made wrong. */
const SIGN_IN = {
  TODOS_AUTH: "jwt",
  TODOS_JWT_SECRET: "s".repeat(32),
  TODOS_JWT_ISSUER: "https://issuer.example",
  TODOS_JWT_AUDIENCE: "todos",
};

/** Variable -> [wrong value, other variables set, the boot message's line for it]. */
const WRONG: Record<string, [string | undefined, Record<string, string>, string][]> = {
  // Any non-empty text can be a host or a directory; empty counts as unset (the default).
  TODOS_HOST: [],
  TODOS_PORT: [
    ["http", {}, 'TODOS_PORT: "http" is not a number: expected a TCP port, a whole number 0-65535 (default 3000)'],
    ["70000", {}, 'TODOS_PORT: "70000" is out of range: expected a TCP port, a whole number 0-65535 (default 3000)'],
    ["abc", {}, 'TODOS_PORT: "abc" is not a number: expected a TCP port, a whole number 0-65535 (default 3000)'],
  ],
  TODOS_ALLOWED_HOSTS: [
    [
      "todos.example.com:3000",
      {},
      'TODOS_ALLOWED_HOSTS: "todos.example.com:3000" is not a host name or address: write host names or addresses without scheme or port (todos.example.com, 10.0.0.5, [fd00::1]), .example.com for a domain and every name under it, or * for any host',
    ],
    [
      "https://todos.example.com",
      {},
      'TODOS_ALLOWED_HOSTS: "https://todos.example.com" is not a host name or address: write host names or addresses without scheme or port (todos.example.com, 10.0.0.5, [fd00::1]), .example.com for a domain and every name under it, or * for any host',
    ],
  ],
  TODOS_CORS_ORIGINS: [
    [
      "app.example.com",
      {},
      'TODOS_CORS_ORIGINS: "app.example.com" is not an origin: write scheme://host[:port] with nothing after (https://app.example.com, http://localhost:5173); list each one, * is not accepted',
    ],
  ],
  DATABASE_URL: [["mysql://db/todos", {}, "DATABASE_URL: must be a postgres:// or postgresql:// URL"]],
  TODOS_DATA_DIR: [],
  TODOS_MAX_ITEMS_PER_USER: [
    ["0", {}, 'TODOS_MAX_ITEMS_PER_USER: "0" is out of range: expected a whole number 1-1000000 (default 10000)'],
    [
      "1000001",
      {},
      'TODOS_MAX_ITEMS_PER_USER: "1000001" is out of range: expected a whole number 1-1000000 (default 10000)',
    ],
    [
      "1.5",
      {},
      'TODOS_MAX_ITEMS_PER_USER: "1.5" is not a whole number: expected a whole number 1-1000000 (default 10000)',
    ],
    ["lots", {}, 'TODOS_MAX_ITEMS_PER_USER: "lots" is not a number: expected a whole number 1-1000000 (default 10000)'],
  ],
  TODOS_LIST_MAX_ITEMS: [
    ["0", {}, 'TODOS_LIST_MAX_ITEMS: "0" is out of range: expected a whole number 1-100000 (default 1000)'],
    ["100001", {}, 'TODOS_LIST_MAX_ITEMS: "100001" is out of range: expected a whole number 1-100000 (default 1000)'],
  ],
  TODOS_LIST_MAX_BYTES: [
    [
      "100kb",
      {},
      'TODOS_LIST_MAX_BYTES: "100kb" is 102400 bytes; at least 524288 bytes are needed (write units: 512kb, 2mb)',
    ],
    ["lots", {}, 'TODOS_LIST_MAX_BYTES: not a size: write it like 512kb, 2mb or 1gb (got "lots")'],
  ],
  TODOS_HEADERS_TIMEOUT_MS: [
    [
      "999",
      {},
      'TODOS_HEADERS_TIMEOUT_MS: "999" is out of range: expected milliseconds, a whole number 1000-3600000 (default 20000)',
    ],
    [
      "40000",
      {},
      "TODOS_HEADERS_TIMEOUT_MS: must not exceed the request timeout (30000 ms): the headers are part of the request",
    ],
  ],
  TODOS_REQUEST_TIMEOUT_MS: [
    [
      "3600001",
      {},
      'TODOS_REQUEST_TIMEOUT_MS: "3600001" is out of range: expected milliseconds, a whole number 1000-3600000 (default 30000)',
    ],
    [
      "1m",
      {},
      'TODOS_REQUEST_TIMEOUT_MS: "1m" is not a number (write milliseconds as a bare number, no "m"): expected milliseconds, a whole number 1000-3600000 (default 30000)',
    ],
  ],
  TODOS_IDLE_TIMEOUT_MS: [
    [
      "0",
      {},
      'TODOS_IDLE_TIMEOUT_MS: "0" is out of range: expected milliseconds, a whole number 1000-600000 (default 5000)',
    ],
  ],
  TODOS_MAX_CONNECTIONS: [
    ["0", {}, 'TODOS_MAX_CONNECTIONS: "0" is out of range: expected a whole number 1-1000000 (default 1024)'],
  ],
  TODOS_TIMEOUT_CHECK_MS: [
    [
      "60001",
      {},
      'TODOS_TIMEOUT_CHECK_MS: "60001" is out of range: expected milliseconds, a whole number 100-60000 (default 5000)',
    ],
  ],
  LOG_LEVEL: [
    [
      "loud",
      {},
      'LOG_LEVEL: Invalid option: expected one of "error"|"warn"|"info"|"http"|"verbose"|"debug"|"silly"|"silent"',
    ],
  ],
  LOG_FORMAT: [["text", {}, 'LOG_FORMAT: must be "json" or "pretty"']],
  TODOS_AUTH: [
    ["yes", {}, 'TODOS_AUTH: must be "off" or "jwt"'],
    [
      "off",
      { TODOS_JWT_ISSUER: "https://issuer.example" },
      'TODOS_AUTH: must be "jwt" when TODOS_JWT_ISSUER is set (it is "off")',
    ],
  ],
  TODOS_JWT_JWKS_URL: [
    [
      "http://keys.example/jwks.json",
      { ...SIGN_IN, TODOS_JWT_SECRET: "" },
      "TODOS_JWT_JWKS_URL: must be an https:// URL (http:// only to localhost, 127.0.0.1 or [::1])",
    ],
    [
      undefined,
      { ...SIGN_IN, TODOS_JWT_SECRET: "" },
      "TODOS_JWT_JWKS_URL: is required when TODOS_AUTH=jwt, unless TODOS_JWT_SECRET is set instead",
    ],
  ],
  TODOS_JWT_SECRET: [
    ["too short", SIGN_IN, "TODOS_JWT_SECRET: must be at least 32 bytes"],
    [
      "s".repeat(32),
      { ...SIGN_IN, TODOS_JWT_JWKS_URL: "https://keys.example/jwks.json" },
      "TODOS_JWT_SECRET: must not be set together with TODOS_JWT_JWKS_URL: choose one key source",
    ],
  ],
  TODOS_JWT_ISSUER: [[undefined, SIGN_IN, "TODOS_JWT_ISSUER: is required when TODOS_AUTH=jwt"]],
  TODOS_JWT_AUDIENCE: [[undefined, SIGN_IN, "TODOS_JWT_AUDIENCE: is required when TODOS_AUTH=jwt"]],
  TODOS_JWT_ADMIN_CLAIM: [
    ["sub", SIGN_IN, "TODOS_JWT_ADMIN_CLAIM: must not be a registered claim (iss, sub, aud, exp, nbf, iat, jti)"],
  ],
  TODOS_JWT_MAX_LIFETIME: [
    ["0", SIGN_IN, "TODOS_JWT_MAX_LIFETIME: must be 60-31536000 seconds"],
    ["86400000", SIGN_IN, "TODOS_JWT_MAX_LIFETIME: must be 60-31536000 seconds"],
    ["1d", SIGN_IN, "TODOS_JWT_MAX_LIFETIME: must be a whole number of seconds (60-31536000)"],
  ],
  TODOS_JWT_MAX_FUTURE_IAT: [
    ["3601", SIGN_IN, "TODOS_JWT_MAX_FUTURE_IAT: must be 0-3600 seconds"],
    ["60", {}, 'TODOS_AUTH: must be "jwt" when TODOS_JWT_MAX_FUTURE_IAT is set (it is "off")'],
  ],
};

describe("every todos variable refuses values that can never work, naming itself", () => {
  it("covers every variable of the schema", () => {
    expect(Object.keys(WRONG).sort()).toStrictEqual(Object.keys(configSchema.shape).sort());
  });

  const cases = Object.entries(WRONG).flatMap(([name, list]) =>
    list.map(([value, others, line]) => [`${name}=${JSON.stringify(value)}`, name, value, others, line] as const),
  );
  it.each(cases)("%s", (_title, name, value, others, line) => {
    const env: Record<string, string> = { ...others };
    if (value === undefined) delete env[name];
    else env[name] = value;
    let error: unknown;
    try {
      loadConfig(configSchema, env);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toContain(line);
    // The secret is never repeated in the message.
    expect((error as Error).message).not.toContain("s".repeat(32));
  });
});
