import type { ChildProcess } from "node:child_process";
import path from "node:path";
import { spawnTracked } from "@localdecider/test-env/processes";

/** The built service as a real process (dist/main.js, built by `pnpm test` before Jest runs). */
export const MAIN = path.join(__dirname, "..", "..", "dist", "main.js");

/** The environment of a built service on the embedded PGlite database in `dataDir`, on a free port. */
export function pgliteEnv(dataDir: string): NodeJS.ProcessEnv {
  return { ...process.env, TODOS_PORT: "0", TODOS_DATA_DIR: dataDir, LOG_LEVEL: "info", DATABASE_URL: "" };
}

export interface RunningService {
  child: ChildProcess;
  port: number;
  exited: Promise<number | null>;
  /** Every log line so far, parsed. */
  lines: Record<string, unknown>[];
  /** Resolves with the first log line (already seen or still to come) whose message is `message`. */
  logged(message: string): Promise<Record<string, unknown>>;
}

/**
 * Starts dist/main.js with this environment and resolves once it logs "listening" (rejects if it exits
 * first). Every JSON log line it writes on stdout is kept in `lines`.
 */
export async function startService(env: NodeJS.ProcessEnv): Promise<RunningService> {
  const child = spawnTracked(process.execPath, [MAIN], { env, stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const lines: Record<string, unknown>[] = [];
  const waiters: { message: string; resolve: (line: Record<string, unknown>) => void }[] = [];
  let partial = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    const parts = (partial + chunk.toString()).split("\n");
    partial = parts.pop() ?? "";
    for (const text of parts) {
      const line = JSON.parse(text) as Record<string, unknown>;
      lines.push(line);
      for (const w of waiters.filter((w) => w.message === line.message)) w.resolve(line);
    }
  });
  const logged = (message: string) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const seen = lines.find((l) => l.message === message);
      if (seen) resolve(seen);
      else waiters.push({ message, resolve });
      exited.then((code) => reject(new Error(`service exited with ${code} before logging "${message}"`)));
    });
  const listening = await logged("listening");
  return { child, port: Number(listening.port), exited, lines, logged };
}
