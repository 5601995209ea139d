import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { spawnTracked, stopChild } from "@localdecider/test-env/processes";
import { REPO_ROOT, readRepoFile } from "../src/repo";

/** A loopback port nothing listens on (bound, then released): the decider's model server there never answers. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("pnpm start: stopping it", () => {
  // The README's `pnpm start` ends in `pnpm -r --parallel start`; pnpm runs each package's script through a
  // shell. A shell left between pnpm and node dies of the SIGTERM (or Ctrl-C's SIGINT) that reaches the whole
  // process group, while node drains and exits 0, so pnpm printed `start: Failed` after a clean stop.
  it("every start script execs node, and the root's last step execs pnpm: no shell is left to die of the signal", () => {
    const root = JSON.parse(readRepoFile("package.json")) as { scripts: Record<string, string> };
    expect(root.scripts.start).toMatch(/&& exec pnpm -r --parallel start$/);
    for (const service of ["decider", "todos"]) {
      const manifest = JSON.parse(readRepoFile("services", service, "package.json")) as {
        scripts: Record<string, string>;
      };
      expect(manifest.scripts.start).toBe("exec node dist/main.js");
    }
  });

  it("a SIGTERM to the process group stops both services cleanly: each says Done, none Failed, exit 0", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "start-command-"));
    const child = spawnTracked("pnpm", ["-r", "--parallel", "start"], {
      cwd: REPO_ROOT,
      group: true, // as a terminal's foreground job: the signal reaches pnpm, the shells and node alike
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        TODOS_PORT: "0",
        TODOS_DATA_DIR: path.join(dir, "todos"),
        LOCALDECIDER_PORT: "0",
        LOCALDECIDER_UPSTREAM: `http://127.0.0.1:${await closedPort()}/v1`,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    try {
      for (let i = 0; i < 600 && !(/"decider listening"/.test(output) && /"listening"/.test(output)); i++) {
        if (child.exitCode !== null) throw new Error(`pnpm start exited early:\n${output}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(output).toMatch(/"message":"listening"/);
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
      process.kill(-(child.pid as number), "SIGTERM");
      expect(await exited).toBe(0);
      expect(output).toMatch(/services\/todos start: Done/);
      expect(output).toMatch(/services\/decider start: Done/);
      expect(output).not.toMatch(/Failed/);
    } finally {
      await stopChild(child, "SIGKILL");
      await rm(dir, { recursive: true, force: true });
    }
  });
});
