import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { DECIDER_ERROR_STATUS } from "@localdecider/contracts/decider";
import { ConfigError, loadConfig } from "@localdecider/service-kit";
import { configSchema, invocationDir, withAbsolutePaths } from "../src/config";
import { AUTO_CONTEXT_TOKENS } from "../src/engine/llama-engine";
import { upstreamAddress, upstreamBaseURL } from "../src/upstream/address";
import { SERVICE_VERSION } from "../src/version";

describe("configSchema", () => {
  it("has the documented defaults", () => {
    expect(loadConfig(configSchema, {})).toStrictEqual({
      LOCALDECIDER_HOST: "127.0.0.1",
      LOCALDECIDER_PORT: 8080,
      LOCALDECIDER_UPSTREAM_MODEL: "qwen2.5-1.5b-instruct",
      LOCALDECIDER_UPSTREAM_PROTOCOL: "auto",
      LOCALDECIDER_MODEL: "hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF/qwen2.5-1.5b-instruct-q4_k_m.gguf",
      LOCALDECIDER_GPU: "auto",
      LOCALDECIDER_CONTEXT_SIZE: "auto",
      LOCALDECIDER_THREADS: 0,
      LOCALDECIDER_STATE_CACHE_MIB: 1024,
      LOCALDECIDER_TIMEOUT: 180,
      LOCALDECIDER_MAX_INFLIGHT: 2,
      LOCALDECIDER_MAX_QUEUE: 256,
      LOCALDECIDER_MAX_QUESTIONS: 4096,
      LOCALDECIDER_REDIS_PREFIX: "localdecider:",
      LOCALDECIDER_REDIS_LEASE_MS: 15000,
      LOCALDECIDER_MALFORMED_RETRIES: 2,
      LOCALDECIDER_MAX_OUTPUT_TOKENS: 2048,
      LOCALDECIDER_QUESTIONS_PER_CALL: 16,
      LOCALDECIDER_OUTCOMES_PER_CALL: 128,
      LOCALDECIDER_ALLOW_NO_LOGPROBS: false,
      LOCALDECIDER_PACK_PROMPTS: true,
      LOCALDECIDER_BODY_LIMIT: 1024 * 1024,
      LOCALDECIDER_HEADERS_TIMEOUT_MS: 20_000,
      LOCALDECIDER_REQUEST_TIMEOUT_MS: 30_000,
      LOCALDECIDER_IDLE_TIMEOUT_MS: 5_000,
      LOCALDECIDER_MAX_CONNECTIONS: 1_024,
      LOCALDECIDER_TIMEOUT_CHECK_MS: 5_000,
      LOG_LEVEL: "info",
      LOG_FORMAT: "json",
    });
  });

  it("lists exactly the variables the README documents", () => {
    expect(Object.keys(configSchema.shape)).toStrictEqual([
      "LOCALDECIDER_HOST",
      "LOCALDECIDER_PORT",
      "LOCALDECIDER_ALLOWED_HOSTS",
      "LOCALDECIDER_CORS_ORIGINS",
      "LOCALDECIDER_UPSTREAM",
      "LOCALDECIDER_UPSTREAM_MODEL",
      "LOCALDECIDER_UPSTREAM_PROTOCOL",
      "LOCALDECIDER_UPSTREAM_API_KEY",
      "LOCALDECIDER_MODEL",
      "LOCALDECIDER_MODELS_DIR",
      "LOCALDECIDER_MODEL_SHA256",
      "LOCALDECIDER_GPU",
      "LOCALDECIDER_CONTEXT_SIZE",
      "LOCALDECIDER_THREADS",
      "LOCALDECIDER_STATE_CACHE_MIB",
      "LOCALDECIDER_API_KEY",
      "LOCALDECIDER_TIMEOUT",
      "LOCALDECIDER_MAX_INFLIGHT",
      "LOCALDECIDER_MAX_QUEUE",
      "LOCALDECIDER_MAX_QUESTIONS",
      "LOCALDECIDER_REDIS_URL",
      "LOCALDECIDER_REDIS_PREFIX",
      "LOCALDECIDER_REDIS_LEASE_MS",
      "LOCALDECIDER_MALFORMED_RETRIES",
      "LOCALDECIDER_MAX_OUTPUT_TOKENS",
      "LOCALDECIDER_QUESTIONS_PER_CALL",
      "LOCALDECIDER_OUTCOMES_PER_CALL",
      "LOCALDECIDER_ALLOW_NO_LOGPROBS",
      "LOCALDECIDER_PACK_PROMPTS",
      "LOCALDECIDER_BODY_LIMIT",
      "LOCALDECIDER_CALIBRATION",
      "LOCALDECIDER_HEADERS_TIMEOUT_MS",
      "LOCALDECIDER_REQUEST_TIMEOUT_MS",
      "LOCALDECIDER_IDLE_TIMEOUT_MS",
      "LOCALDECIDER_MAX_CONNECTIONS",
      "LOCALDECIDER_TIMEOUT_CHECK_MS",
      "LOG_LEVEL",
      "LOG_FORMAT",
    ]);
    const readme = readFileSync(join(__dirname, "..", "README.md"), "utf8");
    for (const key of Object.keys(configSchema.shape)) expect(readme).toContain(`| \`${key}\``);
  });

  it("refuses bad values naming each variable", () => {
    expect(() =>
      loadConfig(configSchema, {
        LOCALDECIDER_PORT: "http",
        LOCALDECIDER_OUTCOMES_PER_CALL: "10",
        LOCALDECIDER_UPSTREAM: "nope",
      }),
    ).toThrow(ConfigError);
    try {
      loadConfig(configSchema, {
        LOCALDECIDER_PORT: "http",
        LOCALDECIDER_OUTCOMES_PER_CALL: "10",
        LOCALDECIDER_UPSTREAM: "nope",
      });
    } catch (err) {
      const problems = (err as ConfigError).problems.map((p) => p.split(":")[0]);
      expect(problems.sort()).toStrictEqual([
        "LOCALDECIDER_OUTCOMES_PER_CALL",
        "LOCALDECIDER_PORT",
        "LOCALDECIDER_UPSTREAM",
      ]);
    }
  });
});

describe("every variable refuses values that can never work, naming itself", () => {
  /** Variable -> [wrong value, the boot message's line for it]. */
  const wrong: Record<string, [string, string][]> = {
    // Any non-empty text can be a host or a name; empty counts as unset (the default).
    LOCALDECIDER_HOST: [],
    LOCALDECIDER_PORT: [
      ["http", '"http" is not a number: expected a TCP port, a whole number 0-65535 (default 8080)'],
      ["70000", '"70000" is out of range: expected a TCP port, a whole number 0-65535 (default 8080)'],
      ["-1", '"-1" is out of range: expected a TCP port, a whole number 0-65535 (default 8080)'],
    ],
    LOCALDECIDER_ALLOWED_HOSTS: [
      [
        "decider.example.com:8080",
        '"decider.example.com:8080" is not a host name or address: write host names or addresses without scheme or port (todos.example.com, 10.0.0.5, [fd00::1]), .example.com for a domain and every name under it, or * for any host',
      ],
      [
        "decider, http://decider",
        '"http://decider" is not a host name or address: write host names or addresses without scheme or port (todos.example.com, 10.0.0.5, [fd00::1]), .example.com for a domain and every name under it, or * for any host',
      ],
    ],
    LOCALDECIDER_CORS_ORIGINS: [
      [
        "*",
        '"*" is not an origin: write scheme://host[:port] with nothing after (https://app.example.com, http://localhost:5173); list each one, * is not accepted',
      ],
      [
        "https://app.example.com/path",
        '"https://app.example.com/path" is not an origin: write scheme://host[:port] with nothing after (https://app.example.com, http://localhost:5173); list each one, * is not accepted',
      ],
    ],
    LOCALDECIDER_UPSTREAM: [
      ["nope", "must be an http:// or https:// URL, or several separated by commas"],
      ["ftp://model:21", "must be an http:// or https:// URL, or several separated by commas"],
      [
        "http://a:8081,ftp://b:21",
        "must be an http:// or https:// URL, or several separated by commas (address 2 of 2)",
      ],
      ["http://a:8081,http://a:8081/", "lists http://a:8081 twice"],
      ["http://a:8081,", "must be an http:// or https:// URL, or several separated by commas (address 2 of 2)"],
      [Array.from({ length: 65 }, (_, i) => `http://m${i}:8081`).join(","), "lists more than 64 model servers"],
    ],
    LOCALDECIDER_UPSTREAM_MODEL: [],
    LOCALDECIDER_UPSTREAM_PROTOCOL: [["native", 'Invalid option: expected one of "auto"|"systemone"|"chat"']],
    // Alone it has nothing to go to: the embedded engine takes no key.
    LOCALDECIDER_UPSTREAM_API_KEY: [
      ["secret", "is set but LOCALDECIDER_UPSTREAM is not (the embedded engine takes no key): set both, or neither"],
    ],
    LOCALDECIDER_MODEL: [
      [
        "hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF:Q4_K_M",
        '"hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF:Q4_K_M" is not an hf: URI of one file: write hf:<user>/<repo>/<file>.gguf (optionally #<branch>)',
      ],
      [
        "s3://models/tiny.gguf",
        '"s3://models/tiny.gguf": only a file path, an http(s) URL or an hf: URI can be loaded',
      ],
      ["https://models.example/", '"https://models.example/" names no file'],
      // Never the password, in no message.
      ["https://me:s3cretpw@models.example/", '"https://models.example/" names no file'],
      ["https://me:s3cretpw@models.example:99999/m.gguf", '"https://models.example:99999/m.gguf" is not a valid URL'],
      [
        "s3://me:s3cretpw@bucket/m.gguf",
        '"s3://bucket/m.gguf": only a file path, an http(s) URL or an hf: URI can be loaded',
      ],
      [
        "http://models.example/%zz.gguf",
        '"http://models.example/%zz.gguf" has a malformed percent-escape: "%" must be followed by two hexadecimal digits',
      ],
      [
        "http://me:%zz@models.example/m.gguf",
        '"http://models.example/m.gguf" has a malformed percent-escape: "%" must be followed by two hexadecimal digits',
      ],
      [
        "hf:a/b/%zz.gguf",
        '"hf:a/b/%zz.gguf": the file\'s path may not have empty, "." or ".." parts, "%", "\\", "?", ":" or spaces',
      ],
      [
        "hf:a/b/m.gguf#main/../../c/d",
        '"hf:a/b/m.gguf#main/../../c/d": the branch must be a plain ref name (letters, digits, "_", "-", "." and "/" between parts; no "..", "%" or ":")',
      ],
    ],
    LOCALDECIDER_MODELS_DIR: [],
    LOCALDECIDER_MODEL_SHA256: [["abc123", "must be 64 hexadecimal digits"]],
    LOCALDECIDER_GPU: [["cuda", 'Invalid option: expected one of "auto"|"cpu"']],
    LOCALDECIDER_CONTEXT_SIZE: [
      ["100", "Too small: expected number to be >=256"],
      ["lots", 'expected "auto" or a whole number of tokens from 256 to 1048576'],
      ["4096.5", 'expected "auto" or a whole number of tokens from 256 to 1048576'],
    ],
    LOCALDECIDER_THREADS: [["-1", '"-1" is out of range: expected a whole number 0-1024 (default 0)']],
    LOCALDECIDER_STATE_CACHE_MIB: [["-1", '"-1" is out of range: expected a whole number 0-1048576 (default 1024)']],
    // A key no client could send as a bearer token (RFC 6750 b64token) stops the start.
    LOCALDECIDER_API_KEY: [
      [
        "two words",
        "cannot be sent as a bearer token: use letters, digits and - . _ ~ + / only, optionally ending in = (base64, base64url and hex keys all fit)",
      ],
      [
        "pa$$word",
        "cannot be sent as a bearer token: use letters, digits and - . _ ~ + / only, optionally ending in = (base64, base64url and hex keys all fit)",
      ],
    ],
    LOCALDECIDER_TIMEOUT: [
      ["0", '"0" is out of range: expected seconds, a number more than 0 and at most 86400 (default 180)'],
      ["soon", '"soon" is not a number: expected seconds, a number more than 0 and at most 86400 (default 180)'],
      [
        "3m",
        '"3m" is not a number (write seconds as a bare number, no "m"): expected seconds, a number more than 0 and at most 86400 (default 180)',
      ],
      ["100000", '"100000" is out of range: expected seconds, a number more than 0 and at most 86400 (default 180)'],
    ],
    LOCALDECIDER_MAX_INFLIGHT: [["0", '"0" is out of range: expected a whole number 1-1024 (default 2)']],
    LOCALDECIDER_MAX_QUEUE: [
      ["0", '"0" is out of range: expected a whole number 1-1000000 (default 256)'],
      ["2.5", '"2.5" is not a whole number: expected a whole number 1-1000000 (default 256)'],
    ],
    LOCALDECIDER_MAX_QUESTIONS: [
      ["0", '"0" is out of range: expected a whole number 1-1000000 (default 4096)'],
      ["many", '"many" is not a number: expected a whole number 1-1000000 (default 4096)'],
    ],
    LOCALDECIDER_REDIS_URL: [
      ["http://127.0.0.1:6379", "must be a redis:// or rediss:// URL"],
      // Alone it has no model server to share: the embedded engine runs in each replica.
      [
        "redis://127.0.0.1:6379",
        "is set but LOCALDECIDER_UPSTREAM is not: each replica's embedded engine is its own model server, so there is no shared one to limit",
      ],
    ],
    LOCALDECIDER_REDIS_PREFIX: [["my prefix", "must be 1-100 letters, digits, `_`, `-`, `.` or `:`"]],
    LOCALDECIDER_REDIS_LEASE_MS: [
      ["500", '"500" is out of range: expected milliseconds, a whole number 1000-600000 (default 15000)'],
      ["1000000", '"1000000" is out of range: expected milliseconds, a whole number 1000-600000 (default 15000)'],
    ],
    LOCALDECIDER_MALFORMED_RETRIES: [["-1", '"-1" is out of range: expected a whole number 0-10 (default 2)']],
    LOCALDECIDER_MAX_OUTPUT_TOKENS: [["8", '"8" is out of range: expected a whole number 16-1000000 (default 2048)']],
    LOCALDECIDER_QUESTIONS_PER_CALL: [["0", '"0" is out of range: expected a whole number 1-1000 (default 16)']],
    LOCALDECIDER_OUTCOMES_PER_CALL: [["10", '"10" is out of range: expected a whole number 20-100000 (default 128)']],
    LOCALDECIDER_ALLOW_NO_LOGPROBS: [
      [
        "maybe",
        'Invalid option: expected one of "true"|"1"|"yes"|"on"|"y"|"enabled"|"false"|"0"|"no"|"off"|"n"|"disabled"',
      ],
    ],
    LOCALDECIDER_PACK_PROMPTS: [
      [
        "sometimes",
        'Invalid option: expected one of "true"|"1"|"yes"|"on"|"y"|"enabled"|"false"|"0"|"no"|"off"|"n"|"disabled"',
      ],
    ],
    LOCALDECIDER_BODY_LIMIT: [
      ["2", '"2" is 2 bytes; at least 1024 bytes are needed (write units: 512kb, 2mb)'],
      ["2 bananas", 'not a size: write it like 512kb, 2mb or 1gb (got "2 bananas")'],
      ["-1mb", 'not a size: write it like 512kb, 2mb or 1gb (got "-1mb")'],
    ],
    // Any path is read at boot (a missing or malformed file stops it: calibration.test.ts); only its length is bounded.
    LOCALDECIDER_CALIBRATION: [["x".repeat(4097), "Too big: expected string to have <=4096 characters"]],
    LOCALDECIDER_HEADERS_TIMEOUT_MS: [
      ["999", '"999" is out of range: expected milliseconds, a whole number 1000-3600000 (default 20000)'],
      ["40000", "must not exceed the request timeout (30000 ms): the headers are part of the request"],
    ],
    LOCALDECIDER_REQUEST_TIMEOUT_MS: [
      ["3600001", '"3600001" is out of range: expected milliseconds, a whole number 1000-3600000 (default 30000)'],
      [
        "1m",
        '"1m" is not a number (write milliseconds as a bare number, no "m"): expected milliseconds, a whole number 1000-3600000 (default 30000)',
      ],
    ],
    LOCALDECIDER_IDLE_TIMEOUT_MS: [
      ["0", '"0" is out of range: expected milliseconds, a whole number 1000-600000 (default 5000)'],
    ],
    LOCALDECIDER_MAX_CONNECTIONS: [["0", '"0" is out of range: expected a whole number 1-1000000 (default 1024)']],
    LOCALDECIDER_TIMEOUT_CHECK_MS: [
      ["60001", '"60001" is out of range: expected milliseconds, a whole number 100-60000 (default 5000)'],
    ],
    LOG_LEVEL: [
      ["loud", 'Invalid option: expected one of "error"|"warn"|"info"|"http"|"verbose"|"debug"|"silly"|"silent"'],
    ],
    LOG_FORMAT: [["text", 'must be "json" or "pretty"']],
  };

  it("covers every variable of the schema", () => {
    expect(Object.keys(wrong)).toStrictEqual(Object.keys(configSchema.shape));
  });

  const cases = Object.entries(wrong).flatMap(([key, values]) =>
    values.map(([value, message]) => [key, value, message]),
  );
  it.each(cases)("%s=%j", (key, value, message) => {
    let error: unknown;
    try {
      loadConfig(configSchema, { [key as string]: value as string });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toStrictEqual([`${key}: ${message}`]);
  });

  it("reads sizes as people write them", () => {
    const limit = (v: string) => loadConfig(configSchema, { LOCALDECIDER_BODY_LIMIT: v }).LOCALDECIDER_BODY_LIMIT;
    expect([limit("2m"), limit("2MB"), limit("2mb"), limit("2 MB")]).toStrictEqual(new Array(4).fill(2 * 1024 ** 2));
    expect([limit("512kb"), limit("512K"), limit("1.5kb"), limit("4096")]).toStrictEqual([524288, 524288, 1536, 4096]);
  });
});

describe("relative paths in the environment", () => {
  it("are read from where the command was run: INIT_CWD when pnpm or npm set it, else the working directory", () => {
    expect(invocationDir({ INIT_CWD: "/home/u/project" }, "/home/u/project/services/decider")).toBe("/home/u/project");
    expect(invocationDir({}, "/srv/app")).toBe("/srv/app");
    expect(invocationDir({ INIT_CWD: "relative/nonsense" }, "/srv/app")).toBe("/srv/app");
  });

  it("makes a model file path and the models directory absolute, and leaves URLs and hf: URIs alone", () => {
    const config = loadConfig(configSchema, { LOCALDECIDER_MODEL: "models/m.gguf", LOCALDECIDER_MODELS_DIR: "cache" });
    expect(withAbsolutePaths(config, "/u/p")).toMatchObject({
      LOCALDECIDER_MODEL: "/u/p/models/m.gguf",
      LOCALDECIDER_MODELS_DIR: "/u/p/cache",
    });
    const remote = loadConfig(configSchema, { LOCALDECIDER_MODEL: "https://example.com/m.gguf" });
    expect(withAbsolutePaths(remote, "/u/p")).toStrictEqual(remote);
    expect(withAbsolutePaths(loadConfig(configSchema, {}), "/u/p").LOCALDECIDER_MODEL).toBe(
      "hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF/qwen2.5-1.5b-instruct-q4_k_m.gguf",
    );
  });
});

describe("the README's embedded-engine figures", () => {
  it("show the context `auto` gives the default model (trained on 32,768) and the KV cache of two such sequences", () => {
    const readme = readFileSync(join(__dirname, "..", "README.md"), "utf8");
    const auto = Math.min(32_768, AUTO_CONTEXT_TOKENS);
    expect(readme).toContain(`"context_size":${auto},"sequences":2,"train_context_size":32768`);
    // Qwen2.5-1.5B: 28 layers × 2 KV heads × 128 dimensions × key and value × 2 bytes per token.
    const mib = (28 * 2 * 128 * 2 * 2 * auto * 2) / 2 ** 20;
    expect(readme).toContain(`${mib} MiB for the default 2 sequences × ${auto} tokens`);
  });
});

describe("the README's error table", () => {
  it("lists every error code of the contracts with its status", () => {
    const readme = readFileSync(join(__dirname, "..", "README.md"), "utf8");
    for (const [code, status] of Object.entries(DECIDER_ERROR_STATUS)) {
      expect(readme).toMatch(new RegExp(`\\| ${status} +\\| \`${code}\` `));
    }
  });
});

describe("upstreamAddress", () => {
  it("takes credentials out of the URL into a basic auth header, and shows the address without them", () => {
    expect(upstreamAddress("http://me:p%40ss@model:8081/")).toStrictEqual({
      baseURL: "http://model:8081/v1",
      display: "http://model:8081",
      basicAuth: `Basic ${Buffer.from("me:p@ss").toString("base64")}`,
    });
    expect(upstreamAddress("http://127.0.0.1:8081")).toStrictEqual({
      baseURL: "http://127.0.0.1:8081/v1",
      display: "http://127.0.0.1:8081",
      basicAuth: undefined,
    });
  });
});

describe("upstreamBaseURL", () => {
  it("appends /v1 and accepts an address that already ends in /v1 or a slash", () => {
    expect(upstreamBaseURL("http://127.0.0.1:8081")).toBe("http://127.0.0.1:8081/v1");
    expect(upstreamBaseURL("http://127.0.0.1:8081/")).toBe("http://127.0.0.1:8081/v1");
    expect(upstreamBaseURL("http://127.0.0.1:8081/v1")).toBe("http://127.0.0.1:8081/v1");
    expect(upstreamBaseURL("http://127.0.0.1:8081/v1/")).toBe("http://127.0.0.1:8081/v1");
  });
});

describe("SERVICE_VERSION", () => {
  it("is package.json's version", () => {
    const pkg = JSON.parse(readFileSync(join(__dirname, "..", "package.json"), "utf8")) as { version: string };
    expect(SERVICE_VERSION).toBe(pkg.version);
  });
});

describe("the test environment", () => {
  it("refuses connections to anything but loopback", async () => {
    expect(() => connect(9, "192.0.2.1")).toThrow("only loopback is allowed in tests");
    const refused = await fetch("http://192.0.2.1:8081/").catch((err: unknown) => err);
    expect(String((refused as { cause?: unknown }).cause)).toContain("only loopback is allowed in tests");
  });
});
