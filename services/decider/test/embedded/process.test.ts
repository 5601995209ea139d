import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { stopProcess } from "../engine/backends";
import { tinyModelPath } from "../engine/tiny-model";
import { waitFor } from "../helpers";
import { ModelFileServer, readModel } from "./model-server";

/**
 * The built service (`dist/main.js`, as `pnpm start` runs it) with no LOCALDECIDER_UPSTREAM: it listens at
 * once, says on /ready how the download goes, loads the model and answers decisions from it.
 */

jest.setTimeout(120_000);

const MAIN = path.join(__dirname, "..", "..", "dist", "main.js");

describe("the built service on its embedded engine", () => {
  let server: ModelFileServer;
  let dir: string;
  let child: ChildProcess | undefined;
  beforeAll(async () => {
    if (!fs.existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`pnpm build\` first`);
    server = new ModelFileServer();
    await server.start();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "decider-process-"));
  });
  afterAll(async () => {
    if (child !== undefined) await stopProcess(child);
    await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("listens at once, reports the download on /ready, then answers from the loaded model", async () => {
    const model = readModel(tinyModelPath());
    server.serve("/tiny.gguf", { bytes: model, holdAfter: model.length / 2 });
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      LOCALDECIDER_PORT: "0",
      LOCALDECIDER_MODEL: `${server.url}/tiny.gguf`,
      LOCALDECIDER_MODELS_DIR: dir,
      LOCALDECIDER_GPU: "cpu",
      LOCALDECIDER_THREADS: "1",
      LOCALDECIDER_CONTEXT_SIZE: "2048",
      LOG_LEVEL: "info",
    };
    child = spawn(process.execPath, [MAIN], { env, stdio: ["ignore", "pipe", "pipe"] });
    const lines: Record<string, unknown>[] = [];
    let stderr = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      for (const line of chunk.toString("utf8").split("\n")) {
        if (line.trim() !== "") lines.push(JSON.parse(line) as Record<string, unknown>);
      }
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    await waitFor(() => lines.some((l) => l.message === "decider listening") || child?.exitCode !== null, "listening");
    const listening = lines.find((l) => l.message === "decider listening");
    if (listening === undefined) throw new Error(`the service exited: ${stderr}`);
    expect(listening).toMatchObject({ upstream: "embedded", upstreamModel: "tiny" });
    const base = `http://127.0.0.1:${listening.port as number}`;

    let ready = await (await fetch(`${base}/ready`)).json();
    const holding = { error: "downloading model (50 %)", code: "backend_not_ready" };
    for (let i = 0; i < 200 && JSON.stringify(ready) !== JSON.stringify(holding); i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      ready = await (await fetch(`${base}/ready`)).json();
    }
    expect(ready).toStrictEqual(holding);

    server.release();
    let status = 503;
    for (let i = 0; i < 400 && status !== 200; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      status = (await fetch(`${base}/ready`)).status;
    }
    expect(status).toBe(200);

    const res = await fetch(`${base}/v1/systemone`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "jev-latest", state: "s", questions: { a: { type: "noul" } } }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { model: string; answers: { a: { noul: number } } };
    expect(body.model).toBe("localdecider-0.1.0/tiny");
    expect(body.answers.a.noul).toBeGreaterThan(0);
    expect(body.answers.a.noul).toBeLessThan(1);
    const models = (await (await fetch(`${base}/v1/models`)).json()) as { backend: Record<string, unknown> };
    expect(models.backend).toMatchObject({ kind: "embedded", state: "ready", gpu: "cpu" });
    expect(lines.find((l) => l.message === "model loaded")).toMatchObject({ backend: "cpu", quantization: "F16" });

    await stopProcess(child);
    // Drained and exited by itself (node-llama-cpp loads signal-exit, which must not cut the drain short).
    expect(child.exitCode).toBe(0);
    expect(lines.map((l) => l.message).slice(-2)).toStrictEqual(["shutting down", "stopped"]);
    child = undefined;
  });
});
