import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { spawnTracked } from "@localdecider/test-env/processes";
import { storageStartupError } from "../src/startup-errors";
import { ADMIN_URL } from "./support/postgres";
import { MAIN, pgliteEnv, startService } from "./support/service-process";

/** Runs dist/main.js until it exits; resolves its exit code, stderr and parsed stdout lines. */
function runToExit(
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stderr: string; lines: Record<string, unknown>[] }> {
  const child = spawnTracked(process.execPath, [MAIN], { env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr?.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  return new Promise((resolve) =>
    child.on("exit", (code) =>
      resolve({
        code,
        stderr,
        lines: stdout
          .split("\n")
          .filter(Boolean)
          .map((l) => JSON.parse(l) as Record<string, unknown>),
      }),
    ),
  );
}

async function listeningServer(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, port: (server.address() as { port: number }).port };
}

describe("todos start-up failures name the variable and say what to do", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "todos-startup-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const base = () => ({ PATH: process.env.PATH, TODOS_PORT: "0", LOG_LEVEL: "info" });

  it("nothing listening at DATABASE_URL's address", async () => {
    const { server, port } = await listeningServer();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const url = `postgresql://postgres:secret@127.0.0.1:${port}/todos`;
    const run = await runToExit({ ...base(), DATABASE_URL: url });
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `todos failed to start: DATABASE_URL=postgresql://postgres:***@127.0.0.1:${port}/todos: connect ECONNREFUSED 127.0.0.1:${port}: nothing accepts connections at 127.0.0.1:${port}: is PostgreSQL running there, and is DATABASE_URL's host and port right?\n`,
    );
  });

  it("a database that does not exist on a server that answers", async () => {
    const name = `todos_missing_${randomUUID().slice(0, 8)}`;
    const url = new URL(ADMIN_URL);
    url.pathname = `/${name}`;
    const run = await runToExit({ ...base(), DATABASE_URL: url.toString() });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      new RegExp(
        `^todos failed to start: DATABASE_URL=\\S+/${name}: database "${name}" does not exist: create it on ${url.hostname}:${url.port || 5432} \\(\`createdb ${name}\`, or CREATE DATABASE\\) or name an existing one in DATABASE_URL\\n$`,
      ),
    );
    expect(run.stderr).not.toContain(decodeURIComponent(url.password || "no-password-here"));
  });

  it("a host name that does not resolve, and a server that refuses the password (classified from the driver's codes)", () => {
    const where = { databaseUrl: "postgresql://app:pw@db.example.invalid:5433/todos", dataDir: "unused" };
    const notFound = Object.assign(new Error("getaddrinfo ENOTFOUND db.example.invalid"), { code: "ENOTFOUND" });
    expect(storageStartupError(notFound, where).message).toBe(
      "DATABASE_URL=postgresql://app:***@db.example.invalid:5433/todos: getaddrinfo ENOTFOUND db.example.invalid: the host in DATABASE_URL (db.example.invalid:5433) cannot be resolved: check its spelling, or use an IP address",
    );
    const refused = Object.assign(new Error('password authentication failed for user "app"'), { code: "28P01" });
    expect(storageStartupError(refused, where).message).toMatch(/refused the user or password in DATABASE_URL/);
    expect(storageStartupError(new Error("disk full"), { databaseUrl: undefined, dataDir: "/data" }).message).toBe(
      "TODOS_DATA_DIR=/data: the embedded database could not be opened: disk full (check that the directory is writable, or set DATABASE_URL to use PostgreSQL)",
    );
  });

  it("a port already in use, with the storage closed again (its lock released for the next start)", async () => {
    const { server, port } = await listeningServer();
    try {
      const dataDir = path.join(dir, "in-use");
      const run = await runToExit({ ...pgliteEnv(dataDir), TODOS_PORT: String(port) });
      expect(run.code).toBe(1);
      expect(run.stderr).toBe(
        `todos failed to start: TODOS_PORT=${port}: 127.0.0.1:${port} is already in use by another process: stop it, or set TODOS_PORT to a free port (0 picks one)\n`,
      );
      const next = await startService(pgliteEnv(dataDir));
      next.child.kill("SIGTERM");
      expect(await next.exited).toBe(0);
    } finally {
      server.close();
    }
  });

  it("a number that is not one, with its value and unit, and a misspelt variable warned about with the closest name", async () => {
    const bad = await runToExit({ ...base(), TODOS_PORT: "abc" });
    expect([bad.code, bad.stderr]).toStrictEqual([
      1,
      'todos failed to start: Invalid configuration:\n  - TODOS_PORT: "abc" is not a number: expected a TCP port, a whole number 0-65535 (default 3000)\n',
    ]);
    const service = await startService({ ...pgliteEnv(path.join(dir, "typo")), TODOS_PROT: "3001" });
    service.child.kill("SIGTERM");
    expect(await service.exited).toBe(0);
    expect(service.lines.filter((l) => l.level === "warn")).toStrictEqual([
      expect.objectContaining({
        message: "TODOS_PROT is not a variable of this service: ignored (did you mean TODOS_PORT?)",
        variable: "TODOS_PROT",
        closest: "TODOS_PORT",
      }),
    ]);
  });
});

describe("the embedded database's start", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "todos-pglite-start-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("says it is opening PGlite before the seconds that takes, then that storage is ready", async () => {
    const service = await startService(pgliteEnv(path.join(dir, "say")));
    service.child.kill("SIGTERM");
    expect(await service.exited).toBe(0);
    const messages = service.lines.map((l) => l.message);
    expect(messages.indexOf("opening the embedded database (PGlite): this takes a few seconds")).toBeLessThan(
      messages.indexOf("storage ready"),
    );
    expect(service.lines.find((l) => String(l.message).startsWith("opening"))).toMatchObject({
      dataDir: path.join(dir, "say"),
    });
  });

  it("a SIGTERM while it opens stops cleanly: 'shutting down', the database closed, exit 0, and the next start works", async () => {
    const dataDir = path.join(dir, "term");
    const child = spawnTracked(process.execPath, [MAIN], {
      env: pgliteEnv(dataDir),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr?.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    let stdout = "";
    let signalled = false;
    child.stdout?.on("data", (c: Buffer) => {
      stdout += c.toString();
      if (!signalled && stdout.includes("opening the embedded database")) {
        signalled = true;
        child.kill("SIGTERM");
      }
    });
    const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
    const lines = stdout
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect([code, stderr]).toStrictEqual([0, ""]);
    expect(lines.map((l) => l.message)).toStrictEqual([
      "sign-in off: per-user routes are open to anyone who can reach them",
      "opening the embedded database (PGlite): this takes a few seconds",
      "shutting down",
      "stopped",
    ]);
    expect(lines[2]).toMatchObject({ signal: "SIGTERM", while: "opening storage" });
    const next = await startService(pgliteEnv(dataDir));
    next.child.kill("SIGTERM");
    expect(await next.exited).toBe(0);
  });
});
