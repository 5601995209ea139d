import { ConfigError, createLogger, currentRequestId, ECHO_LIMITS, loadConfig } from "@localdecider/service-kit";
import request from "supertest";
import { createApp } from "../src/app";
import { configSchema } from "../src/config";
import type { TodoRepository } from "../src/storage/repository";
import { defaultHosts } from "./support/storage-modes";

describe("configSchema", () => {
  it("when nothing is set, takes the documented defaults", () => {
    expect(loadConfig(configSchema, {})).toStrictEqual({
      TODOS_HOST: "127.0.0.1",
      TODOS_PORT: 3000,
      TODOS_DATA_DIR: "./data/todos",
      TODOS_MAX_ITEMS_PER_USER: 10_000,
      TODOS_LIST_MAX_ITEMS: 1_000,
      TODOS_LIST_MAX_BYTES: 1024 * 1024,
      LOG_LEVEL: "info",
      LOG_FORMAT: "json",
      TODOS_HEADERS_TIMEOUT_MS: 20_000,
      TODOS_REQUEST_TIMEOUT_MS: 30_000,
      TODOS_IDLE_TIMEOUT_MS: 5_000,
      TODOS_MAX_CONNECTIONS: 1_024,
      TODOS_TIMEOUT_CHECK_MS: 5_000,
      TODOS_AUTH: "off",
    });
  });

  it("when every variable is set, uses them", () => {
    expect(
      loadConfig(configSchema, {
        TODOS_HOST: "0.0.0.0",
        TODOS_PORT: "8080",
        TODOS_ALLOWED_HOSTS: "todos, Todos.Example.com,.svc.cluster.local",
        DATABASE_URL: "postgresql://u@db:5432/todos",
        TODOS_DATA_DIR: "/var/lib/todos",
        LOG_LEVEL: "debug",
        LOG_FORMAT: "pretty",
        TODOS_CORS_ORIGINS: "https://app.example.com, http://localhost:5173/",
        TODOS_AUTH: "jwt",
        TODOS_JWT_JWKS_URL: "https://issuer.example/.well-known/jwks.json",
        TODOS_JWT_ISSUER: "https://issuer.example/",
        TODOS_JWT_AUDIENCE: "todos",
        TODOS_JWT_ADMIN_CLAIM: "todos_admin",
        TODOS_JWT_MAX_LIFETIME: "3600",
        TODOS_JWT_MAX_FUTURE_IAT: "30",
        TODOS_MAX_ITEMS_PER_USER: "500",
        TODOS_LIST_MAX_ITEMS: "200",
        TODOS_LIST_MAX_BYTES: "2mb",
        TODOS_HEADERS_TIMEOUT_MS: "10000",
        TODOS_REQUEST_TIMEOUT_MS: "15000",
        TODOS_IDLE_TIMEOUT_MS: "65000",
        TODOS_MAX_CONNECTIONS: "200",
        TODOS_TIMEOUT_CHECK_MS: "1000",
      }),
    ).toStrictEqual({
      TODOS_HOST: "0.0.0.0",
      TODOS_PORT: 8080,
      TODOS_ALLOWED_HOSTS: { any: false, names: ["todos", "todos.example.com"], domains: ["svc.cluster.local"] },
      DATABASE_URL: "postgresql://u@db:5432/todos",
      TODOS_DATA_DIR: "/var/lib/todos",
      LOG_LEVEL: "debug",
      LOG_FORMAT: "pretty",
      TODOS_CORS_ORIGINS: ["https://app.example.com", "http://localhost:5173"],
      TODOS_AUTH: "jwt",
      TODOS_JWT_JWKS_URL: "https://issuer.example/.well-known/jwks.json",
      TODOS_JWT_ISSUER: "https://issuer.example/",
      TODOS_JWT_AUDIENCE: "todos",
      TODOS_JWT_ADMIN_CLAIM: "todos_admin",
      TODOS_JWT_MAX_LIFETIME: 3600,
      TODOS_JWT_MAX_FUTURE_IAT: 30,
      TODOS_MAX_ITEMS_PER_USER: 500,
      TODOS_LIST_MAX_ITEMS: 200,
      TODOS_LIST_MAX_BYTES: 2 * 1024 * 1024,
      TODOS_HEADERS_TIMEOUT_MS: 10_000,
      TODOS_REQUEST_TIMEOUT_MS: 15_000,
      TODOS_IDLE_TIMEOUT_MS: 65_000,
      TODOS_MAX_CONNECTIONS: 200,
      TODOS_TIMEOUT_CHECK_MS: 1_000,
    });
  });

  it("when values are invalid, refuses naming each variable", () => {
    const bad = { TODOS_PORT: "70000", DATABASE_URL: "mysql://x", LOG_LEVEL: "loud" };
    let thrown: unknown;
    try {
      loadConfig(configSchema, bad);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).problems.map((p) => p.split(":")[0]).sort()).toStrictEqual([
      "DATABASE_URL",
      "LOG_LEVEL",
      "TODOS_PORT",
    ]);
  });

  it("when a variable is set but empty, falls back to its default", () => {
    expect(loadConfig(configSchema, { TODOS_PORT: "", DATABASE_URL: "" })).toStrictEqual(loadConfig(configSchema, {}));
  });
});

/** A repository whose every call fails: the storage fault path without a database. */
const failingRepository: TodoRepository = {
  kind: "postgres",
  list: () => Promise.reject(new Error("connection refused at 10.0.0.1 (secret detail)")),
  create: () => Promise.reject(new Error("boom")),
  get: () => Promise.reject(new Error("boom")),
  update: () => Promise.reject(new Error("boom")),
  delete: () => Promise.reject(new Error("boom")),
  ping: () => Promise.reject(new Error("boom")),
  close: () => Promise.resolve(),
};

describe("logging", () => {
  function capturingApp() {
    const logger = createLogger({ service: "todos", level: "http" });
    for (const transport of logger.transports) transport.silent = true;
    const lines: Record<string, unknown>[] = [];
    logger.on("data", (info: Record<string, unknown>) => lines.push(info));
    return { app: createApp({ repository: failingRepository, logger, allowedHosts: defaultHosts() }), lines };
  }

  it("when storage fails, answers 500 without internals and logs the error with the request id", async () => {
    const { app, lines } = capturingApp();
    const res = await request(app).get("/users/u/todos").set("x-request-id", "req-storage-1").expect(500);
    expect(res.body).toStrictEqual({ error: "Internal server error" });
    expect(JSON.stringify(res.body)).not.toContain("secret");
    expect(lines.map((l) => [l.level, l.message, l.requestId])).toStrictEqual([
      ["error", "unhandled error", "req-storage-1"],
      ["http", "request", "req-storage-1"],
    ]);
  });

  it("runs the storage call outside any async context (no promise hooks) and still logs the request id", async () => {
    // The request id reaches the log lines through res.locals, not AsyncLocalStorage, whose promise hooks
    // cost ~10% of the CPU of a list request on Node 20 (README, "Performance").
    const logger = createLogger({ service: "todos", level: "http" });
    for (const transport of logger.transports) transport.silent = true;
    const lines: Record<string, unknown>[] = [];
    logger.on("data", (info: Record<string, unknown>) => lines.push(info));
    const seen: (string | undefined)[] = [];
    const repository: TodoRepository = {
      ...failingRepository,
      list: async () => {
        seen.push(currentRequestId());
        return [];
      },
    };
    await request(createApp({ repository, logger, allowedHosts: defaultHosts() }))
      .get("/users/u/todos")
      .set("x-request-id", "req-context-1")
      .expect(200, { todoItems: [] });
    expect(seen).toStrictEqual([undefined]);
    expect(lines.map((l) => [l.level, l.message, l.requestId])).toStrictEqual([["http", "request", "req-context-1"]]);
  });

  it("when the body is not JSON, logs it as a client error (warn), not as a server fault", async () => {
    const { app, lines } = capturingApp();
    await request(app)
      .post("/users/u/todos")
      .set("x-request-id", "req-json-1")
      .set("content-type", "application/json")
      .send("{nope")
      .expect(500, { error: "Internal server error" });
    expect(lines.map((l) => [l.level, l.requestId])).toStrictEqual([
      ["warn", "req-json-1"],
      ["http", "req-json-1"],
    ]);
  });

  it("when a request's path or a storage error repeats kilobytes of the request, logs each clipped", async () => {
    const logger = createLogger({ service: "todos", level: "http" });
    for (const transport of logger.transports) transport.silent = true;
    const lines: Record<string, unknown>[] = [];
    logger.on("data", (info: Record<string, unknown>) => lines.push(info));
    // A driver error quoting the value it refused, as PostgreSQL's DETAIL lines do.
    const repository: TodoRepository = {
      ...failingRepository,
      create: (_userId, input) => Promise.reject(new Error(`value refused: ${input.title.repeat(120)}`)),
    };
    const app = createApp({ repository, logger, allowedHosts: defaultHosts() });
    await request(app)
      .post("/users/u/todos")
      .send({ title: "t".repeat(500) })
      .expect(500, { error: "Internal server error" });
    await request(app).get(`/users/${"u".repeat(12_000)}/todos`);
    expect(lines.map((l) => l.message)).toStrictEqual(["unhandled error", "request", "request failed", "request"]);
    const longest = Math.max(...lines.flatMap((l) => Object.values(l).map((v) => (JSON.stringify(v) ?? "").length)));
    expect(longest).toBeLessThanOrEqual(ECHO_LIMITS.text + 40);
    expect(String(lines[0]?.error)).toMatch(/^value refused: t{4081}… \(55919 more characters\)$/);
    expect(String(lines[3]?.path)).toMatch(/^\/users\/u+… \(\d+ more characters\)$/);
  });
});
