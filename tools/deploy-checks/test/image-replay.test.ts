import { type ChildProcess, execFile, spawn } from "node:child_process";
import { cp, mkdtemp, readdir, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { type RuntimeStage, runtimeStage } from "../src/dockerfile";
import { REPO_ROOT, readRepoFile } from "../src/repo";

// No Docker engine here, so each Dockerfile's final stage is replayed by hand: `pnpm deploy --prod` (the
// build stage's last step, on the already built workspace), then only the files the final stage copies,
// started with the image's ENTRYPOINT and ENV and probed with the image's own HEALTHCHECK command.
const run = promisify(execFile);

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Runs the image's HEALTHCHECK command until it passes, at most `attempts` times; returns the last exit code. */
async function healthcheck(stage: RuntimeStage, env: NodeJS.ProcessEnv, attempts: number): Promise<number> {
  const [command, ...args] = stage.healthcheck;
  let code = 1;
  for (let i = 0; i < attempts; i++) {
    code = await run(command === "node" ? process.execPath : String(command), args, { env }).then(
      () => 0,
      (err: { code?: number }) => err.code ?? 1,
    );
    if (code === 0) return 0;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return code;
}

function exitCode(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.once("exit", (code) => resolve(code));
  });
}

const SERVICES = [
  { service: "todos", portVar: "TODOS_PORT", hostVar: "TODOS_HOST", others: ["openai", "bottleneck"] },
  { service: "decider", portVar: "LOCALDECIDER_PORT", hostVar: "LOCALDECIDER_HOST", others: ["@prisma", "pg"] },
] as const;

describe.each(SERVICES)("$service image, replayed without Docker", ({ service, portVar, hostVar, others }) => {
  const stage = runtimeStage(readRepoFile("services", service, "Dockerfile"));
  let dir: string;
  let app: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), `image-${service}-`));
    const out = path.join(dir, "out");
    await run("pnpm", ["--filter", `@localdecider/${service}`, "deploy", "--prod", out], {
      cwd: REPO_ROOT,
      env: { ...process.env, CI: "true" },
    });
    app = path.join(dir, "app");
    for (const copy of stage.copies) {
      expect(copy).toMatchObject({ from: "build", src: expect.stringMatching(/^\/out\//) });
      await cp(path.join(out, copy.src.slice("/out/".length)), path.resolve(app, copy.dest), {
        recursive: true,
        verbatimSymlinks: true,
      });
    }
  }, 120_000);

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("holds the service, the contracts and the service kit with production dependencies only", async () => {
    expect((await readdir(path.join(app, "node_modules", "@localdecider"))).sort()).toStrictEqual([
      "contracts",
      "service-kit",
    ]);
    // (@types/* may stay: some runtime packages declare them as dependencies, e.g. winston's triple-beam.)
    const installed = await readdir(path.join(app, "node_modules", ".pnpm"));
    const devOnly = installed.filter((name) =>
      /^(jest|typescript|@swc|supertest|fast-check|autocannon|prisma@|@typesafe-ai|ts-jest|@biomejs)/.test(name),
    );
    expect(devOnly).toStrictEqual([]);
    // Nothing of the other service.
    const top = await readdir(path.join(app, "node_modules"));
    expect(top.filter((name) => (others as readonly string[]).includes(name))).toStrictEqual([]);
  });

  it("starts from its ENTRYPOINT with the image's ENV, passes its HEALTHCHECK, and exits 0 on SIGTERM", async () => {
    let upstream: Server | undefined;
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      ...stage.env,
      // Loopback only in a test; the image itself listens on 0.0.0.0 (its ENV, checked in lint.test.ts).
      [hostVar]: "127.0.0.1",
      [portVar]: String(await freePort()),
      LOG_LEVEL: "warn",
    };
    if (service === "todos") env.TODOS_DATA_DIR = path.join(dir, "data");
    if (service === "decider") {
      // The decider is ready when its model server lists the configured model.
      upstream = createServer((req, res) => {
        res.setHeader("content-type", "application/json");
        if (req.url === "/v1/models") res.end(JSON.stringify({ object: "list", data: [{ id: "m", object: "model" }] }));
        else res.writeHead(404).end("{}");
      });
      await new Promise<void>((resolve) => upstream?.listen(0, "127.0.0.1", resolve));
      env.LOCALDECIDER_UPSTREAM = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
      env.LOCALDECIDER_UPSTREAM_MODEL = "m";
    }
    const [command, ...args] = stage.entrypoint;
    expect(command).toBe("node");
    const child = spawn(process.execPath, args, { cwd: app, env, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr?.on("data", (chunk) => {
      stderr += String(chunk);
    });
    try {
      expect({ healthcheck: await healthcheck(stage, env, 80), stderr }).toStrictEqual({ healthcheck: 0, stderr: "" });
      child.kill("SIGTERM");
      expect(await exitCode(child)).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
      await new Promise<void>((resolve) => (upstream ? upstream.close(() => resolve()) : resolve()));
    }
  }, 60_000);
});
