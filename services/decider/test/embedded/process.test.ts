import type { ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { selfSignedCertificate as makeCertificate } from "@localdecider/test-env/certificate";
import { spawnTracked } from "@localdecider/test-env/processes";
import { stopProcess } from "../engine/backends";
import { tinyModelPath } from "../engine/tiny-model";
import { waitFor } from "../helpers";
import { ModelFileServer, readModel, sha256 } from "./model-server";

/**
 * The built service (`dist/main.js`, as `pnpm start` runs it) with no LOCALDECIDER_UPSTREAM: it listens at
 * once, says on /ready how the download goes, loads the model and answers decisions from it; and, as an
 * operator would meet them, a model URL with a password and a download that is redirected from https to http.
 */

jest.setTimeout(120_000);

const MAIN = path.join(__dirname, "..", "..", "dist", "main.js");

interface Service {
  child: ChildProcess;
  base: string;
  /** Its stdout, one parsed JSON object per line. */
  lines: Record<string, unknown>[];
  /** Everything it wrote, stdout and stderr. */
  output: () => string;
}

describe("the built service on its embedded engine", () => {
  let server: ModelFileServer;
  let dir: string;
  const children: ChildProcess[] = [];
  beforeAll(() => {
    if (!fs.existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`pnpm build\` first`);
  });
  beforeEach(async () => {
    server = new ModelFileServer();
    await server.start();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "decider-process-"));
  });
  afterEach(async () => {
    for (const child of children.splice(0)) await stopProcess(child);
    await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Starts dist/main.js with the embedded engine on `model` and waits until it listens. */
  async function startService(model: string, env: NodeJS.ProcessEnv = {}): Promise<Service> {
    const child = spawnTracked(process.execPath, [MAIN], {
      env: {
        PATH: process.env.PATH,
        LOCALDECIDER_PORT: "0",
        LOCALDECIDER_MODEL: model,
        LOCALDECIDER_MODELS_DIR: dir,
        LOCALDECIDER_GPU: "cpu",
        LOCALDECIDER_THREADS: "1",
        LOCALDECIDER_CONTEXT_SIZE: "2048",
        LOG_LEVEL: "info",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(child);
    const lines: Record<string, unknown>[] = [];
    let all = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      all += chunk.toString("utf8");
      for (const line of chunk.toString("utf8").split("\n")) {
        if (line.trim() !== "") lines.push(JSON.parse(line) as Record<string, unknown>);
      }
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      all += chunk.toString("utf8");
    });
    await waitFor(() => lines.some((l) => l.message === "decider listening") || child.exitCode !== null, "listening");
    const listening = lines.find((l) => l.message === "decider listening");
    if (listening === undefined) throw new Error(`the service exited: ${all}`);
    return { child, base: `http://127.0.0.1:${listening.port as number}`, lines, output: () => all };
  }

  /** Polls /ready (no API key) until its body is not about the download under way. */
  async function settledReady(base: string): Promise<{ status: number; body: unknown }> {
    for (let i = 0; i < 400; i++) {
      const res = await fetch(`${base}/ready`);
      const body = (await res.json()) as { error?: string };
      if (
        res.status === 200 ||
        !/^(starting the engine|(downloading|loading|verifying) model)/.test(body.error ?? "")
      ) {
        return { status: res.status, body };
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error("/ready never settled");
  }

  it("listens at once, reports the download on /ready, then answers from the loaded model", async () => {
    const model = readModel(tinyModelPath());
    server.serve("/tiny.gguf", { bytes: model, holdAfter: model.length / 2 });
    const { child, base, lines } = await startService(`${server.url}/tiny.gguf`);
    expect(lines.find((l) => l.message === "decider listening")).toMatchObject({
      upstream: "embedded",
      upstreamModel: "tiny",
    });

    let ready = await (await fetch(`${base}/ready`)).json();
    const holding = { error: "downloading model (50 %)", code: "backend_not_ready" };
    for (let i = 0; i < 200 && JSON.stringify(ready) !== JSON.stringify(holding); i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      ready = await (await fetch(`${base}/ready`)).json();
    }
    expect(ready).toStrictEqual(holding);

    server.release();
    expect((await settledReady(base)).status).toBe(200);

    const res = await fetch(`${base}/v1/systemone`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "jev-latest",
        state: "s",
        questions: { a: { type: "noul", instructions: "Is it?" } },
      }),
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
  });

  it("with a password in LOCALDECIDER_MODEL and an API key set, sends it as basic auth and shows it nowhere: not on /ready, not in any output line", async () => {
    // The server wants another password: the download fails at once (401), and the failure is what /ready shows.
    server.serve("/private/m.gguf", { bytes: Buffer.from("GGUF"), authorization: "Basic b3RoZXI6b3RoZXI=" });
    const port = new URL(server.url).port;
    const { base, output } = await startService(`http://user:s3cretpw@127.0.0.1:${port}/private/m.gguf`, {
      LOCALDECIDER_API_KEY: "topkey",
    });
    const ready = await settledReady(base);
    expect(ready).toStrictEqual({
      status: 503,
      body: {
        error: `model download failed: http://127.0.0.1:${port}/private/m.gguf: HTTP 401 Unauthorized`,
        code: "backend_not_ready",
      },
    });
    expect(server.requests.map((r) => r.authorization)).toStrictEqual([
      `Basic ${Buffer.from("user:s3cretpw").toString("base64")}`,
    ]);
    expect(output()).toContain("model download failed");
    expect(output()).not.toContain("s3cretpw");
  });

  it("refuses a model download that is redirected from https to http, and says so on /ready", async () => {
    const tls = selfSignedCertificate(dir);
    const secure = new ModelFileServer(tls);
    await secure.start();
    try {
      const model = readModel(tinyModelPath());
      secure.redirect("/m.gguf", `${server.url}/m.gguf`, { "x-linked-etag": `"${sha256(model)}"` });
      server.serve("/m.gguf", { bytes: model });
      // The service trusts the test's certificate as an operator's would trust their own CA.
      const { base } = await startService(`${secure.url}/m.gguf`, { NODE_EXTRA_CA_CERTS: tls.certFile });
      expect(await settledReady(base)).toStrictEqual({
        status: 503,
        body: {
          error: `model download failed: ${secure.url}/m.gguf: the server redirected from https to http (${new URL(server.url).host}); refused`,
          code: "backend_not_ready",
        },
      });
      expect(secure.requests).toHaveLength(1);
      expect(server.requests).toStrictEqual([]);
    } finally {
      await secure.stop();
    }
  });
});

/** A throwaway certificate for 127.0.0.1 (node:crypto, no openssl command), its PEM also written to a file. */
function selfSignedCertificate(dir: string): { key: string; cert: string; certFile: string } {
  const { key, cert } = makeCertificate({ ipAddresses: ["127.0.0.1"] });
  const certFile = path.join(dir, "cert.pem");
  fs.writeFileSync(certFile, cert);
  return { key, cert, certFile };
}
