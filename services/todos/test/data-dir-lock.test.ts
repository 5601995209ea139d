import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { DataDirLockedError, LOCK_FILE, lockDataDir } from "../src/storage/data-dir-lock";
import { openStorage } from "../src/storage/open-storage";

const MAIN = path.join(__dirname, "..", "dist", "main.js");
const run = promisify(execFile);

/** A real process that stays alive until killed: the "other instance" holding a lock. */
function liveProcess(): ChildProcess {
  return spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
}

/** The PID of a process that has exited: what a crashed instance leaves in its lock. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((resolve) => child.once("exit", resolve));
  return child.pid as number;
}

describe("the PGlite data directory lock", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "todos-lock-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("when a second service process starts on a directory in use, it exits 1 naming the directory and the owner, and the first keeps its data", async () => {
    expect(existsSync(MAIN)).toBe(true);
    const env = { ...process.env, TODOS_PORT: "0", TODOS_DATA_DIR: dir, LOG_LEVEL: "info", DATABASE_URL: "" };
    const first = spawn(process.execPath, [MAIN], { env, stdio: ["ignore", "pipe", "pipe"] });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        let out = "";
        first.stdout?.on("data", (chunk: Buffer) => {
          out += chunk.toString();
          const match = /"message":"listening","port":(\d+)/.exec(out);
          if (match) resolve(Number(match[1]));
        });
        first.once("exit", (code) => reject(new Error(`first instance exited with ${code}`)));
      });
      const base = `http://127.0.0.1:${port}`;
      const created = await fetch(`${base}/users/owner/todos`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ title: "kept" }),
      });
      expect(created.status).toBe(201);

      const second = await run(process.execPath, [MAIN], { env }).then(
        () => ({ code: 0, stderr: "" }),
        (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
      );
      expect(second.code).toBe(1);
      expect(second.stderr).toContain(`The embedded database in ${dir} is in use by process ${first.pid}`);

      const list = (await (await fetch(`${base}/users/owner/todos`)).json()) as { todoItems: { title: string }[] };
      expect(list.todoItems.map((item) => item.title)).toStrictEqual(["kept"]);
    } finally {
      first.kill("SIGTERM");
      await new Promise((resolve) => first.once("exit", resolve));
    }
    expect(existsSync(path.join(dir, LOCK_FILE))).toBe(false);
  });

  it("when the directory's storage is closed, the lock is released and the directory can be opened again", async () => {
    const first = await openStorage({ dataDir: dir });
    await expect(openStorage({ dataDir: dir })).rejects.toThrow(DataDirLockedError);
    await first.close();
    expect(existsSync(path.join(dir, LOCK_FILE))).toBe(false);
    const again = await openStorage({ dataDir: dir });
    await again.close();
  });

  it("when another live process holds the lock, taking it fails and leaves that lock untouched", async () => {
    const other = liveProcess();
    try {
      await writeFile(path.join(dir, LOCK_FILE), `${os.hostname()} ${other.pid}\n`);
      await expect(lockDataDir(dir)).rejects.toThrow(`is in use by process ${other.pid}.`);
      expect(await readFile(path.join(dir, LOCK_FILE), "utf8")).toBe(`${os.hostname()} ${other.pid}\n`);
    } finally {
      other.kill();
    }
  });

  it("when the lock was left by a process that has died, it is taken over and released again", async () => {
    await writeFile(path.join(dir, LOCK_FILE), `${os.hostname()} ${await deadPid()}\n`);
    const release = await lockDataDir(dir);
    expect(await readFile(path.join(dir, LOCK_FILE), "utf8")).toBe(`${os.hostname()} ${process.pid}\n`);
    await release();
    expect(existsSync(path.join(dir, LOCK_FILE))).toBe(false);
  });

  it("when the lock names this process's own PID but this process does not hold it (a restarted container is PID 1 again), it is stale and taken over", async () => {
    await writeFile(path.join(dir, LOCK_FILE), `${os.hostname()} ${process.pid}\n`);
    const release = await lockDataDir(dir);
    await expect(lockDataDir(dir)).rejects.toThrow(DataDirLockedError);
    await release();
  });

  it("when the lock belongs to another host (a container sharing the volume), it counts as held and the error names that host", async () => {
    await writeFile(path.join(dir, LOCK_FILE), `other-host-${os.hostname()} 1\n`);
    await expect(lockDataDir(dir)).rejects.toThrow(`is in use by process 1 on other-host-${os.hostname()}.`);
  });

  it("when the lock file holds no process id, it counts as stale and is taken over", async () => {
    await writeFile(path.join(dir, LOCK_FILE), "not a pid");
    const release = await lockDataDir(dir);
    expect(await readFile(path.join(dir, LOCK_FILE), "utf8")).toBe(`${os.hostname()} ${process.pid}\n`);
    await release();
  });

  it("when several contenders race for a stale lock, exactly one wins", async () => {
    await writeFile(path.join(dir, LOCK_FILE), `${os.hostname()} ${await deadPid()}\n`);
    // Separate processes, so that each one's liveness check sees the others as live owners.
    const lockModule = path.join(__dirname, "..", "dist", "storage", "data-dir-lock.js");
    // The winner holds the lock until the test closes its stdin, i.e. until every contender has answered.
    const contender = `require(${JSON.stringify(lockModule)}).lockDataDir(${JSON.stringify(dir)}).then(
      () => { console.log("won"); process.stdin.resume(); process.stdin.on("end", () => process.exit(0)); },
      (e) => { console.log(e.name); process.exit(0); })`;
    const children = Array.from({ length: 4 }, () =>
      spawn(process.execPath, ["-e", contender], { stdio: ["pipe", "pipe", "inherit"] }),
    );
    // Listened for from the start: a losing contender exits as soon as it has answered.
    const exited = children.map((child) => new Promise((resolve) => child.once("exit", resolve)));
    const results = await Promise.all(
      children.map(
        (child) =>
          new Promise<string>((resolve) => {
            let out = "";
            child.stdout?.on("data", (chunk: Buffer) => {
              out += chunk.toString();
              if (out.includes("\n")) resolve(out.trim());
            });
          }),
      ),
    );
    for (const child of children) child.stdin?.end();
    await Promise.all(exited);
    expect(results.filter((r) => r === "won")).toHaveLength(1);
    expect(results.filter((r) => r === "DataDirLockedError")).toHaveLength(3);
  });
});
