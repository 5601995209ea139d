import { type ChildProcess, execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { spawnTracked } from "@localdecider/test-env/processes";
import { type RedisPrograms, redisProgramsFromEnv } from "@localdecider/test-env/redis";
import { type FakeModelServer, startFakeModelServer } from "../src/fake-model-server";
import { interpolate, loadCompose, mergeCompose, REPO_ROOT } from "../src/repo";

// docker/compose.scale.yml's Redis and the deciders' way to it, run as Compose would run them but without
// Docker (docs/deploy.md says what ran under Docker): the redis service's own command and healthcheck, with
// compose's interpolation and a REDIS_PASSWORD as .env would give it, through `sh` on a loopback port of the
// test's own (the machine's Redis at 6379 stays untouched); and the built decider with the
// LOCALDECIDER_REDIS_URL compose gives it, its host `redis` read as that port, in front of a fake model server.
// redis-server and redis-cli are the ones the global setup found (the machine's, or Debian's packages:
// test/setup/global.ts), put first on PATH as the container's would be.
const run = promisify(execFile);
const stack = mergeCompose(loadCompose("docker-compose.yml"), loadCompose("docker/compose.scale.yml"));
const redisService = stack.services.redis;
const deciderService = stack.services.decider;
const DECIDER_MAIN = path.join(REPO_ROOT, "services", "decider", "dist", "main.js");

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function waitFor(what: string, check: () => boolean | Promise<boolean>, attempts = 200): Promise<void> {
  for (let i = 0; i < attempts; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`gave up waiting for ${what}`);
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

/** SIGTERM, then SIGKILL after 10 s; resolves once the process is gone. */
async function stop(child: ChildProcess): Promise<void> {
  const gone = exited(child);
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await gone;
  clearTimeout(timer);
}

/** PATH and library path under which `redis-server` and `redis-cli` are the prepared programs. */
function programsEnv(programs: RedisPrograms): Record<string, string> {
  return { PATH: `${programs.binDir}${path.delimiter}${process.env.PATH ?? ""}`, ...programs.env };
}

/** The redis service's command as compose runs it (the image's entrypoint execs it), on a port of the test's. */
async function startComposeRedis(env: Record<string, string>, port: number, dir: string, programs: RedisPrograms) {
  const [command, ...args] = (redisService?.command ?? []).map((arg) => interpolate(arg, env));
  expect(command).toBe("sh");
  // Later options win: the test's port on loopback only, instead of 6379 on every interface.
  const child = spawnTracked(String(command), [...args, "--port", String(port), "--bind", "127.0.0.1"], {
    cwd: dir,
    group: true,
    env: { ...programsEnv(programs), ...containerEnv(env) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  child.once("error", (err) => {
    output += `\n${err.message}`;
  });
  await waitFor(
    "redis-server from the compose command",
    () => /Ready to accept connections/.test(output) || child.exitCode !== null,
  );
  if (child.exitCode !== null) throw new Error(`redis-server exited (is it installed?): ${output}`);
  return { child, output: () => output };
}

/** The redis container's environment as compose sets it from `env` (.env). */
function containerEnv(env: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(redisService?.environment ?? {}).map(([key, value]) => [key, interpolate(String(value), env)]),
  );
}

/** The healthcheck's CMD-SHELL line run in the redis container's environment, pointed at the test's port. */
async function healthcheck(
  containerEnvironment: Record<string, string>,
  port: number,
  programs: RedisPrograms,
): Promise<number> {
  const test = redisService?.healthcheck?.test ?? [];
  expect(test[0]).toBe("CMD-SHELL");
  // Compose turns $$ into $; the container's shell expands the rest.
  const line = interpolate(String(test[1]), {}).replace("redis-cli", `redis-cli -p ${port}`);
  return run("sh", ["-c", line], { env: { ...programsEnv(programs), ...containerEnvironment } }).then(
    () => 0,
    (err: { code?: number }) => err.code ?? 1,
  );
}

/** The built decider (dist/main.js) with compose's environment for it, its stdout and stderr kept whole. */
async function startDecider(redisUrl: string, upstream: FakeModelServer) {
  const child = spawnTracked(process.execPath, [DECIDER_MAIN], {
    env: {
      PATH: process.env.PATH,
      LOCALDECIDER_HOST: "127.0.0.1",
      LOCALDECIDER_PORT: "0",
      LOCALDECIDER_UPSTREAM: upstream.url,
      LOCALDECIDER_UPSTREAM_MODEL: upstream.model,
      LOCALDECIDER_REDIS_URL: redisUrl,
      LOCALDECIDER_REDIS_PREFIX: `deploy-checks:${randomBytes(4).toString("hex")}:`,
      // Every line the decider has: the most a password could leak through.
      LOG_LEVEL: "silly",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output = { stdout: "", stderr: "" };
  child.stdout?.on("data", (chunk: Buffer) => {
    output.stdout += chunk.toString("utf8");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output.stderr += chunk.toString("utf8");
  });
  await waitFor("the decider listening", () => /"decider listening"/.test(output.stdout) || child.exitCode !== null);
  const listening = output.stdout
    .split("\n")
    .filter((line) => line.includes('"decider listening"'))
    .map((line) => JSON.parse(line) as { port: number })[0];
  if (listening === undefined) throw new Error(`the decider exited: ${output.stderr}`);
  return { child, output, base: `http://127.0.0.1:${listening.port}` };
}

/** compose's LOCALDECIDER_REDIS_URL for the deciders, with .env's password, its host read as the test's port. */
function deciderRedisUrl(env: Record<string, string>, port: number): string {
  const url = new URL(interpolate(String(deciderService?.environment?.LOCALDECIDER_REDIS_URL), env));
  expect(url.host).toBe("redis:6379");
  url.host = `127.0.0.1:${port}`;
  return url.toString();
}

async function ready(base: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${base}/ready`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe("the scaled-out stack's Redis, started from its compose command", () => {
  // A password as the docs say to make one (`openssl rand -hex 32`).
  const password = randomBytes(32).toString("hex");
  const dotEnv = { REDIS_PASSWORD: password };
  let dir: string;
  let port: number;
  let redis: Awaited<ReturnType<typeof startComposeRedis>>;
  let upstream: FakeModelServer;
  let programs: RedisPrograms;

  beforeAll(async () => {
    programs = redisProgramsFromEnv();
    dir = await mkdtemp(path.join(tmpdir(), "localdecider-compose-redis-"));
    port = await freePort();
    redis = await startComposeRedis(dotEnv, port, dir, programs);
    upstream = await startFakeModelServer();
  });

  afterAll(async () => {
    if (redis !== undefined) await stop(redis.child);
    await upstream?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("refuses a client without the password (NOAUTH) and one with another password; answers the password", async () => {
    const cli = (extra: Record<string, string>) =>
      run("redis-cli", ["-p", String(port), "ping"], { env: { ...programsEnv(programs), ...extra } }).then(
        (r) => `${r.stdout}${r.stderr}`,
      );
    expect(await cli({})).toMatch(/^NOAUTH Authentication required/);
    // redis-cli reports the refused AUTH, then the PING it sent anyway is refused too.
    const wrong = await cli({ REDISCLI_AUTH: "not-the-password" });
    expect(wrong).toMatch(/WRONGPASS|invalid password/);
    expect(wrong).toMatch(/NOAUTH Authentication required/);
    expect((await cli({ REDISCLI_AUTH: password })).trim()).toBe("PONG");
  });

  it("passes its healthcheck with the container's environment, and fails it without the password or with another", async () => {
    expect(await healthcheck(containerEnv(dotEnv), port, programs)).toBe(0);
    expect(await healthcheck({}, port, programs)).toBe(1);
    expect(await healthcheck({ REDIS_PASSWORD: "not-the-password" }, port, programs)).toBe(1);
  });

  it("a decider with compose's URL reaches it (/ready 200), and no line it writes holds the password", async () => {
    const decider = await startDecider(deciderRedisUrl(dotEnv, port), upstream);
    try {
      // Ready only once a heartbeat (a script run on Redis, so authenticated) has gone through.
      await waitFor("/ready 200", async () => (await ready(decider.base)).status === 200);
      // The line that says so names the Redis without the password.
      const answers = decider.output.stdout
        .split("\n")
        .filter((line) => line.includes('"shared limits: Redis answers"'))
        .map((line) => (JSON.parse(line) as { redis?: string }).redis);
      expect(answers[0]).toBe(`redis://127.0.0.1:${port}`);
    } finally {
      await stop(decider.child);
    }
    const lines = `${decider.output.stdout}\n${decider.output.stderr}`.split("\n");
    expect(lines.length).toBeGreaterThan(3);
    expect(lines.filter((line) => line.includes(password))).toStrictEqual([]);
  });

  it("a decider given another password (Redis not restarted after .env changed) is not ready, and names neither password", async () => {
    const other = randomBytes(32).toString("hex");
    const decider = await startDecider(deciderRedisUrl({ REDIS_PASSWORD: other }, port), upstream);
    let last: Awaited<ReturnType<typeof ready>> | undefined;
    try {
      await waitFor("/ready to report the refused Redis", async () => {
        last = await ready(decider.base);
        return last.body.code === "limiter_unavailable";
      });
      // /ready is open: it names no address; the log does.
      expect(last).toStrictEqual({
        status: 503,
        body: { code: "limiter_unavailable", error: "the shared limits' Redis is unreachable" },
      });
      expect(decider.output.stdout).toContain(`the shared limits' Redis at redis://127.0.0.1:${port} is unreachable`);
      // The log says why, for the operator: Redis refused the password.
      expect(decider.output.stdout).toMatch(/"reason":"[^"]*WRONGPASS/);
    } finally {
      await stop(decider.child);
    }
    const text = `${decider.output.stdout}\n${decider.output.stderr}\n${JSON.stringify(last)}`;
    expect([password, other].filter((secret) => text.includes(secret))).toStrictEqual([]);
  });
});
