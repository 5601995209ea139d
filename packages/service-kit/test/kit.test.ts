import express from "express";
import request from "supertest";
import type winston from "winston";
import { z } from "zod";
import {
  AppError,
  accessLog,
  ConfigError,
  createLogger,
  currentRequestId,
  errorHandler,
  jsonBody,
  loadConfig,
  prettyLine,
  requestId,
  serve,
  unknownVariables,
  validationDetails,
  warnUnknownVariables,
} from "../src";
import { captureLogger } from "./capture-logger";

function appWith(logger: winston.Logger) {
  const app = express();
  app.use(requestId({ echoHeaders: ["x-typesafe-request-id"], asyncContext: true }));
  app.use(jsonBody({ limit: "1kb" }));
  app.post("/echo", (req, res) => {
    logger.info("handling", { seen: currentRequestId() });
    res.json({ body: req.body });
  });
  app.get("/fail", () => {
    throw new AppError(409, "Conflict here", { code: "conflict", details: [{ path: "x", message: "y" }] });
  });
  app.get("/contract-500", () => {
    throw new AppError(500, "Internal server error", { logLevel: "warn" });
  });
  app.get("/upstream-502", () => {
    throw new AppError(502, "Bad gateway");
  });
  app.get("/boom", () => {
    throw new Error("secret internals");
  });
  app.use(errorHandler({ logger }));
  return app;
}

describe("requestId + jsonBody", () => {
  it("echoes a client id in both headers and keeps it in log lines written after body parsing", async () => {
    const { logger, lines } = captureLogger();
    const res = await request(appWith(logger)).post("/echo").set("x-request-id", "abc-123").send({ a: 1 });
    expect(res.status).toBe(200);
    expect(res.headers["x-request-id"]).toBe("abc-123");
    expect(res.headers["x-typesafe-request-id"]).toBe("abc-123");
    expect(lines.find((l) => l.message === "handling")).toMatchObject({ requestId: "abc-123", seen: "abc-123" });
  });

  it("without asyncContext, sets no context (no promise hooks) but still echoes the id and logs it from res.locals", async () => {
    const { logger, lines } = captureLogger();
    const app = express();
    app.use(requestId());
    app.use(accessLog(logger));
    app.use(jsonBody({ limit: "1kb" }));
    app.post("/echo", (req, res) => {
      logger.info("handling", { seen: currentRequestId() ?? null, local: res.locals.requestId });
      res.json({ body: req.body });
    });
    const res = await request(app).post("/echo").set("x-request-id", "abc-456").send({ a: 1 });
    expect(res.status).toBe(200);
    expect(res.body).toStrictEqual({ body: { a: 1 } });
    expect(res.headers["x-request-id"]).toBe("abc-456");
    expect(lines.find((l) => l.message === "handling")).toMatchObject({ seen: null, local: "abc-456" });
    expect(lines.find((l) => l.message === "handling")).not.toHaveProperty("requestId");
    expect(lines.find((l) => l.message === "request")).toMatchObject({ requestId: "abc-456", status: 200 });
  });

  it("replaces an unsafe client id with a generated uuid", async () => {
    const { logger } = captureLogger();
    const res = await request(appWith(logger)).post("/echo").set("x-request-id", "bad id\twith spaces").send({});
    expect(res.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe("accessLog", () => {
  function loggedApp(logger: winston.Logger) {
    const app = express();
    app.use(requestId());
    app.use(accessLog(logger));
    app.get("/items/:id", (_req, res) => {
      res.status(201).json({ ok: true });
    });
    return app;
  }

  it("writes one http line with id, method, path without query and status when the level shows http", async () => {
    const { logger, lines } = captureLogger();
    await request(loggedApp(logger)).get("/items/7?secret=1").set("x-request-id", "req-1").expect(201);
    const access = lines.filter((l) => l.message === "request");
    expect(access).toHaveLength(1);
    expect(access[0]).toMatchObject({
      level: "http",
      requestId: "req-1",
      method: "GET",
      path: "/items/7",
      status: 201,
    });
    expect(typeof access[0]?.durationMs).toBe("number");
  });

  it("does not build or hand a line to winston when the level is above http", async () => {
    const { logger, lines } = captureLogger();
    logger.level = "info";
    const http = jest.spyOn(logger, "http");
    await request(loggedApp(logger)).get("/items/7").expect(201);
    expect(http).not.toHaveBeenCalled();
    expect(lines).toStrictEqual([]);
  });
});

describe("errorHandler", () => {
  it("answers an AppError with its status and whole body", async () => {
    const { logger } = captureLogger();
    const res = await request(appWith(logger)).get("/fail");
    expect(res.status).toBe(409);
    expect(res.body).toStrictEqual({
      error: "Conflict here",
      code: "conflict",
      details: [{ path: "x", message: "y" }],
    });
  });

  it("logs a 5xx AppError at error and a 4xx at info, unless the error names its own level", async () => {
    const { logger, lines } = captureLogger();
    const app = appWith(logger);
    await request(app).get("/upstream-502").expect(502);
    await request(app).get("/fail").expect(409);
    await request(app).get("/contract-500").expect(500, { error: "Internal server error" });
    expect(lines.filter((l) => l.message === "request failed").map((l) => [l.level, l.status])).toStrictEqual([
      ["error", 502],
      ["info", 409],
      ["warn", 500],
    ]);
  });

  it("answers an unknown throw with a generic 500 and logs the stack", async () => {
    const { logger, lines } = captureLogger();
    const res = await request(appWith(logger)).get("/boom");
    expect(res.status).toBe(500);
    expect(res.body).toStrictEqual({ error: "Internal server error" });
    expect(JSON.stringify(lines)).toContain("secret internals");
  });

  it("maps malformed JSON to 400 and an oversized body to 413", async () => {
    const { logger } = captureLogger();
    const app = appWith(logger);
    const bad = await request(app).post("/echo").set("content-type", "application/json").send("{nope");
    expect(bad.status).toBe(400);
    expect(bad.body).toStrictEqual({ error: "Request body is not valid JSON", code: "invalid_json" });
    const big = await request(app)
      .post("/echo")
      .send({ s: "x".repeat(2000) });
    expect(big.status).toBe(413);
    expect(big.body).toStrictEqual({ error: "Request body too large", code: "payload_too_large" });
  });
});

describe("loadConfig", () => {
  const schema = z.object({ PORT: z.coerce.number().int().min(0).max(65535).default(3000) });

  it("treats empty strings as unset so defaults apply", () => {
    expect(loadConfig(schema, { PORT: "" })).toStrictEqual({ PORT: 3000 });
  });

  it("names the offending variable", () => {
    expect(() => loadConfig(schema, { PORT: "99999" })).toThrow(ConfigError);
    expect(() => loadConfig(schema, { PORT: "99999" })).toThrow(/PORT/);
  });

  describe("a number that is not one, not whole or out of range", () => {
    const numbers = z
      .object({
        APP_PORT: z.coerce.number().int().min(0).max(65535).default(3000),
        APP_TIMEOUT: z.coerce.number().positive().max(86_400).default(180),
        APP_LEASE_MS: z.coerce.number().int().min(1000).default(15_000),
        APP_WORKERS: z.coerce.number().int().min(1).max(64).optional(),
        APP_RATIO: z.coerce.number().min(0).max(1).default(0.5),
        APP_NAME: z.string().min(3).default("app"),
      })
      .superRefine(() => undefined);
    const problem = (env: Record<string, string>, units?: Record<string, string>) => {
      try {
        loadConfig(numbers, env, units === undefined ? {} : { units });
      } catch (err) {
        return (err as ConfigError).problems;
      }
      return [];
    };

    it("shows the value, the unit, whole or not, the range and the default", () => {
      expect(problem({ APP_PORT: "abc" })).toStrictEqual([
        'APP_PORT: "abc" is not a number: expected a TCP port, a whole number 0-65535 (default 3000)',
      ]);
      expect(problem({ APP_TIMEOUT: "3m" })).toStrictEqual([
        'APP_TIMEOUT: "3m" is not a number (write seconds as a bare number, no "m"): expected seconds, a number more than 0 and at most 86400 (default 180)',
      ]);
      expect(problem({ APP_LEASE_MS: "2.5" })).toStrictEqual([
        'APP_LEASE_MS: "2.5" is not a whole number: expected milliseconds, a whole number at least 1000 (default 15000)',
      ]);
      expect(problem({ APP_WORKERS: "65" })).toStrictEqual([
        'APP_WORKERS: "65" is out of range: expected a whole number 1-64',
      ]);
      expect(problem({ APP_RATIO: "2" }, { APP_RATIO: "a fraction" })).toStrictEqual([
        'APP_RATIO: "2" is out of range: expected a fraction, a number at least 0 and at most 1 (default 0.5)',
      ]);
    });

    it("leaves other problems with their own message, and names every variable at once", () => {
      expect(problem({ APP_NAME: "x", APP_PORT: "-1" })).toStrictEqual([
        'APP_PORT: "-1" is out of range: expected a TCP port, a whole number 0-65535 (default 3000)',
        "APP_NAME: Too small: expected string to have >=3 characters",
      ]);
    });
  });
});

describe("unknownVariables", () => {
  const schema = z
    .object({ APP_PORT: z.string().optional(), APP_HOST: z.string().optional(), APP_MAX_QUEUE: z.string().optional() })
    .superRefine(() => undefined);

  it("lists the service's prefixed variables its schema lacks, with the closest known name when one is close", () => {
    const env = {
      APP_PROT: "1",
      APP_HOST: "x",
      APP_MAXQUEUE: "3",
      APP_SOMETHING_ELSE_ENTIRELY: "y",
      OTHER_PROT: "1",
      PATH: "/bin",
    };
    expect(unknownVariables(schema, ["APP_"], env)).toStrictEqual([
      { variable: "APP_MAXQUEUE", closest: "APP_MAX_QUEUE" },
      { variable: "APP_PROT", closest: "APP_PORT" },
      { variable: "APP_SOMETHING_ELSE_ENTIRELY" },
    ]);
  });

  it("ignores the test tooling's variables, which share the prefixes", () => {
    const env = { LOCALDECIDER_TEST_REDIS_URL: "x", LOCALDECIDER_STATIC_CHECKS: "done", TODOS_TEST_ADMIN_URL: "y" };
    expect(unknownVariables(schema, ["LOCALDECIDER_", "TODOS_"], env)).toStrictEqual([]);
  });

  it("warns once per unknown variable, naming the suggestion", () => {
    const lines: [string, object][] = [];
    warnUnknownVariables({ warn: (m: string, meta: object) => lines.push([m, meta]) }, schema, ["APP_"], {
      APP_PROT: "1",
      APP_PORT: "2",
    });
    expect(lines).toStrictEqual([
      [
        "APP_PROT is not a variable of this service: ignored (did you mean APP_PORT?)",
        { variable: "APP_PROT", closest: "APP_PORT" },
      ],
    ]);
  });
});

describe("serve", () => {
  it("lets an in-flight request finish after close() and then runs onClose", async () => {
    const { logger } = captureLogger();
    const app = express();
    let release: () => void = () => undefined;
    app.get("/slow", (_req, res) => {
      release = () => res.json({ done: true });
    });
    let closed = false;
    const running = await serve(app, {
      host: "127.0.0.1",
      port: 0,
      logger,
      onClose: async () => {
        closed = true;
      },
    });
    const pending = fetch(`http://127.0.0.1:${running.port}/slow`).then((r) => r.json());
    await new Promise((r) => setTimeout(r, 50));
    const closing = running.close();
    expect(closed).toBe(false);
    release();
    await expect(pending).resolves.toStrictEqual({ done: true });
    await closing;
    expect(closed).toBe(true);
  });
});

describe("validationDetails", () => {
  it("gives dotted paths, names the root as asked, and explains a bad record key by its key schema", () => {
    const schema = z.object({ items: z.record(z.string().regex(/^[a-z]+$/, "lowercase letters only"), z.number()) });
    const nested = schema.safeParse({ items: { ok: "one", BAD: 2 } });
    expect(nested.success).toBe(false);
    if (nested.success) return;
    expect(validationDetails(nested.error, { root: "body" })).toStrictEqual([
      { path: "items.ok", message: "Invalid input: expected number, received string" },
      { path: "items.BAD", message: "lowercase letters only" },
    ]);
    const whole = schema.safeParse(null);
    if (whole.success) return;
    expect(validationDetails(whole.error, { root: "" }).map((d) => d.path)).toStrictEqual([""]);
    expect(validationDetails(whole.error, { root: "body" }).map((d) => d.path)).toStrictEqual(["body"]);
  });
});

describe("LOG_FORMAT=pretty", () => {
  it("writes one readable line a record: time, level, message, fields, the request id last; a stack below", () => {
    const info = {
      level: "info",
      message: "listening",
      timestamp: "2026-11-27T10:00:01.234Z",
      service: "todos",
      port: 3000,
      host: "127.0.0.1",
      allowedHosts: ["localhost", "[::1]"],
      note: "two words",
      requestId: "req-1",
    };
    expect(prettyLine(info, false)).toBe(
      '10:00:01.234 info  listening port=3000 host=127.0.0.1 allowedHosts=["localhost","[::1]"] note="two words" requestId=req-1',
    );
    const coloured = prettyLine({ ...info, level: "error", stack: "Error: x\n    at y" }, true);
    expect(coloured.startsWith("10:00:01.234 \u001b[31merror\u001b[0m listening ")).toBe(true);
    expect(coloured.endsWith("\nError: x\n    at y")).toBe(true);
  });

  it("is what createLogger writes with format pretty, and JSON without it", () => {
    // The line a transport writes is the formatted record's MESSAGE (winston's triple-beam symbol).
    const written = (format?: "pretty") => {
      const logger = createLogger({ service: "t", level: "info", ...(format === undefined ? {} : { format }) });
      const info = logger.format.transform({ level: "info", message: "hello", n: 1, service: "t" }) as Record<
        symbol,
        string
      >;
      return info[Symbol.for("message")] as string;
    };
    expect(written("pretty")).toMatch(/^\d{2}:\d{2}:\d{2}\.\d{3} info {2}hello n=1$/);
    expect(JSON.parse(written())).toMatchObject({ level: "info", message: "hello", n: 1, service: "t" });
  });
});
