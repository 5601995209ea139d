import type { ChildProcess } from "node:child_process";
import path from "node:path";
import { createInterface } from "node:readline";
import { spawnTracked } from "@localdecider/test-env/processes";
import { REPO_ROOT } from "../../src/repo";

/**
 * The real services, started from their built dist/main.js exactly as their images run them (config from
 * the environment, the same wiring), each on a free loopback port: their /docs must show every operation
 * of their own /openapi.json. A child process rather than the app in Jest's VM, because PGlite's CommonJS
 * build cannot load its wasm helpers there without transforming it, and main.js is what ships.
 */
export interface RunningService {
  url: string;
  stop(): Promise<void>;
}

export async function startService(service: "todos" | "decider", env: Record<string, string>): Promise<RunningService> {
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => key === "PATH" || key === "HOME" || key === "TMPDIR"),
  );
  const child: ChildProcess = spawnTracked(
    process.execPath,
    [path.join(REPO_ROOT, "services", service, "dist/main.js")],
    {
      cwd: path.join(REPO_ROOT, "services", service),
      env: { ...inherited, LOG_LEVEL: "info", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const port = await new Promise<number>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on("line", (line) => {
      try {
        const entry = JSON.parse(line) as { message?: string; port?: number };
        if (entry.message?.endsWith("listening") && typeof entry.port === "number") resolve(entry.port);
      } catch {
        // not a log line
      }
    });
    child.once("exit", (code) => reject(new Error(`${service} exited with ${code} before listening: ${stderr}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}
