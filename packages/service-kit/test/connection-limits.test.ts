import { connect, type Socket } from "node:net";
import express from "express";
import { z } from "zod";
import {
  CONNECTION_LIMITS,
  type ConnectionLimits,
  connectionLimit,
  connectionLimitsProblem,
  DEFAULT_CONNECTION_LIMITS,
  loadConfig,
  type RunningServer,
  serve,
} from "../src";
import { captureLogger } from "./capture-logger";

/** Small limits, so that a trickling client meets them within the test's default 5 s. */
const SMALL: Partial<ConnectionLimits> = {
  headersTimeoutMs: 300,
  requestTimeoutMs: 600,
  keepAliveTimeoutMs: 300,
  connectionsCheckingIntervalMs: 50,
};

let running: RunningServer | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

async function start(connections: Partial<ConnectionLimits>) {
  const { logger, lines } = captureLogger();
  const app = express();
  app.get("/ok", (_req, res) => {
    res.json({ ok: true });
  });
  app.post("/echo", express.text({ type: "*/*" }), (req, res) => {
    res.json({ bytes: String(req.body).length });
  });
  running = await serve(app, { host: "127.0.0.1", port: 0, logger, connections });
  return { port: running.port, lines };
}

/** Opens a raw connection and sends nothing: everything the server sent before it closed the connection. */
function silentClient(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    let received = "";
    socket.on("data", (chunk) => {
      received += String(chunk);
    });
    socket.on("error", () => undefined);
    socket.on("close", () => resolve(received));
  });
}

interface Ending {
  /** Everything the server sent before it closed the connection. */
  received: string;
  /** How many pieces the client had sent by then. */
  sent: number;
}

/**
 * Opens a raw connection, sends `first`, then one more byte of `drip` every 50 ms until the server closes
 * the connection (at most 200 bytes: a server that never closes fails the test rather than running on).
 */
function trickle(port: number, first: string, drip: string): Promise<Ending> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connect(port, "127.0.0.1");
    let received = "";
    let sent = 0;
    const timer = setInterval(() => {
      if (sent >= 200) {
        clearInterval(timer);
        socket.destroy();
        reject(new Error(`the server kept a trickling connection open after ${sent} bytes`));
        return;
      }
      socket.write(drip);
      sent++;
    }, 50);
    socket.on("connect", () => {
      if (first !== "") socket.write(first);
    });
    socket.on("data", (chunk) => {
      received += String(chunk);
    });
    socket.on("error", () => undefined);
    socket.on("close", () => {
      clearInterval(timer);
      resolve({ received, sent });
    });
  });
}

describe("serve's connection limits", () => {
  it("answers 408 and closes a connection that trickles its headers", async () => {
    const { port } = await start(SMALL);
    const ending = await trickle(port, "GET /ok HTTP/1.1\r\nHost: localhost\r\nX-Slow: ", "a");
    expect(ending.received).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
  });

  it("answers 408 and closes a connection that trickles its body", async () => {
    const { port } = await start(SMALL);
    const head = "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n";
    const ending = await trickle(port, head, "a");
    expect(ending.received).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    // The headers were in long before: it is the request timeout, not the headers', that closed it.
    expect(ending.sent).toBeGreaterThan(0);
  });

  it("answers 408 and closes a connection that opens and sends nothing", async () => {
    const { port } = await start(SMALL);
    const silent = await silentClient(port);
    expect(silent).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
  });

  it("closes a kept-alive connection left idle after its answer", async () => {
    const { port } = await start(SMALL);
    const idle = await new Promise<string>((resolve) => {
      const socket = connect(port, "127.0.0.1", () => socket.write("GET /ok HTTP/1.1\r\nHost: localhost\r\n\r\n"));
      let received = "";
      socket.on("data", (chunk) => {
        received += String(chunk);
      });
      socket.on("error", () => undefined);
      socket.on("close", () => resolve(received));
    });
    expect(idle).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\{"ok":true\}$/);
  });

  it("still answers a request that arrives whole, and one whose answer takes longer than the timeouts", async () => {
    const { logger } = captureLogger();
    const app = express();
    // Longer than requestTimeoutMs: the timeouts bound receiving the request, never the work on it.
    app.get("/slow", (_req, res) => {
      setTimeout(() => res.json({ slow: true }), 900);
    });
    running = await serve(app, { host: "127.0.0.1", port: 0, logger, connections: SMALL });
    const answer = await fetch(`http://127.0.0.1:${running.port}/slow`);
    expect(answer.status).toBe(200);
    expect(await answer.json()).toStrictEqual({ slow: true });
  });

  it("closes connections past maxConnections as they open, says so once, and accepts again when one closes", async () => {
    const { port, lines } = await start({ maxConnections: 2 });
    const held: Socket[] = [];
    const opened = (socket: Socket) => new Promise<void>((resolve) => socket.on("connect", () => resolve()));
    for (let i = 0; i < 2; i++) {
      const socket = connect(port, "127.0.0.1");
      held.push(socket);
      await opened(socket);
      // A request in progress (headers not yet complete) keeps each connection busy.
      socket.write("GET /ok HTTP/1.1\r\n");
    }
    const refused = await silentClient(port);
    expect(refused).toBe("");
    const closed = new Promise((resolve) => held[0]?.on("close", resolve));
    held[0]?.destroy();
    await closed;
    // The server counts the closed connection out once it has seen it close; retry until it has.
    let answer: Response | undefined;
    for (let attempt = 0; answer === undefined && attempt < 50; attempt++) {
      answer = await fetch(`http://127.0.0.1:${port}/ok`, { headers: { connection: "close" } }).catch(() => undefined);
    }
    expect(answer?.status).toBe(200);
    for (const socket of held) socket.destroy();
    const warnings = lines.filter((l) => l.message === "connections refused: the connection cap is reached");
    expect(warnings.map((w) => [w.level, w.maxConnections])).toStrictEqual([["warn", 2]]);
  });

  it("refuses limits whose headers timeout exceeds the request timeout", async () => {
    const { logger } = captureLogger();
    await expect(
      serve(express(), {
        host: "127.0.0.1",
        port: 0,
        logger,
        connections: { headersTimeoutMs: 2000, requestTimeoutMs: 1000 },
      }),
    ).rejects.toThrow(/must not exceed the request timeout/);
  });
});

describe("connection limits as config variables", () => {
  const schema = z.object({ HEADERS: connectionLimit("headersTimeoutMs"), MAX: connectionLimit("maxConnections") });

  it("defaults each to a value that closes a trickling client within a minute", () => {
    expect(loadConfig(schema, {})).toStrictEqual({ HEADERS: 20_000, MAX: 1_024 });
    const d = DEFAULT_CONNECTION_LIMITS;
    expect(d.headersTimeoutMs + d.connectionsCheckingIntervalMs).toBeLessThanOrEqual(60_000);
    expect(d.requestTimeoutMs + d.connectionsCheckingIntervalMs).toBeLessThanOrEqual(60_000);
    expect(connectionLimitsProblem(d)).toBeUndefined();
  });

  it("refuses a value outside its bounds, and decimals", () => {
    expect(() => loadConfig(schema, { HEADERS: String(CONNECTION_LIMITS.headersTimeoutMs.min - 1) })).toThrow(
      /HEADERS/,
    );
    expect(() => loadConfig(schema, { MAX: "0" })).toThrow(/MAX/);
    expect(() => loadConfig(schema, { MAX: "1.5" })).toThrow(/MAX/);
  });
});
