import { type ChildProcess, execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rename, rm, utimes, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { spawnTracked } from "@localdecider/test-env/processes";
import {
  DataDirLockedError,
  DataDirLockLostError,
  LOCK_FILE,
  type LockOptions,
  lockDataDir,
} from "../src/storage/data-dir-lock";
import { openStorage } from "../src/storage/open-storage";

const MAIN = path.join(__dirname, "..", "dist", "main.js");
const LOCK_MODULE = path.join(__dirname, "..", "dist", "storage", "data-dir-lock.js");
const run = promisify(execFile);

/** What a process in a container sees differently: its host name, its PID (1) and its PID namespace. */
interface Container {
  host: string;
  pid: number;
  /** What /proc/self/ns/pid links to: distinct for every container, even with the same host name. */
  pidNamespace?: string;
}

interface ContenderOptions {
  /** Pretend to run in this container; unset: this machine as it is. */
  as?: Partial<Container>;
  /** Renewal and lease for the child (the defaults are 10 s / 30 s). */
  timings?: Pick<LockOptions, "renewMs" | "leaseMs">;
  /** Keep the module's own reaction to a lost lock (print, exit 1) instead of reporting it on stdout. */
  defaultOnLost?: boolean;
  /** Exit as soon as the lock is taken, without releasing it (like a process that crashed). */
  exitAfterWin?: boolean;
}

/**
 * A separate process taking the lock on `dir` with the built module, so that each one's checks see the
 * others as other processes. It reports on stdout: "waiting" when told to wait, then "won" or
 * "<error name>: <message>"; later "DataDirLockLostError: ..." if it loses the lock. The winner holds the
 * lock until `release()` (its stdin is closed).
 */
class Contender {
  readonly child: ChildProcess;
  readonly lines: string[] = [];
  stderr = "";
  readonly exited: Promise<number | null>;
  private readonly waiters: (() => void)[] = [];

  constructor(dir: string, options: ContenderOptions = {}) {
    const script = `
      const os = require("node:os");
      const fsp = require("node:fs/promises");
      const as = ${JSON.stringify(options.as ?? {})};
      if (as.pid !== undefined) Object.defineProperty(process, "pid", { value: as.pid });
      if (as.host !== undefined) os.hostname = () => as.host;
      if (as.pidNamespace !== undefined) {
        const readlink = fsp.readlink;
        fsp.readlink = (p, ...rest) => (p === "/proc/self/ns/pid" ? Promise.resolve(as.pidNamespace) : readlink(p, ...rest));
      }
      const say = (line) => process.stdout.write(line + "\\n");
      const options = { ...${JSON.stringify(options.timings ?? {})}, onWait: () => say("waiting") };
      if (!${options.defaultOnLost === true}) options.onLost = (e) => say(e.name + ": " + e.message);
      require(${JSON.stringify(LOCK_MODULE)}).lockDataDir(${JSON.stringify(dir)}, options).then(
        (release) => {
          say("won");
          if (${options.exitAfterWin === true}) process.exit(0);
          process.stdin.resume();
          process.stdin.on("end", () => release().then(() => process.exit(0)));
        },
        (e) => { say(e.name + ": " + e.message); process.exit(0); });`;
    this.child = spawnTracked(process.execPath, ["-e", script], { stdio: ["pipe", "pipe", "pipe"] });
    this.exited = new Promise((resolve) => this.child.once("exit", (code) => resolve(code)));
    let partial = "";
    this.child.stdout?.on("data", (chunk: Buffer) => {
      const parts = (partial + chunk.toString()).split("\n");
      partial = parts.pop() ?? "";
      this.lines.push(...parts);
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.child.stderr?.on("data", (chunk: Buffer) => {
      this.stderr += chunk.toString();
    });
    void this.exited.then(() => {
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  get pid(): number {
    return this.child.pid as number;
  }

  /** The first line reported that matches, once there is one; rejects if the process exits first. */
  async line(matches: (line: string) => boolean): Promise<string> {
    for (;;) {
      const found = this.lines.find(matches);
      if (found !== undefined) return found;
      if (this.child.exitCode !== null || this.child.signalCode !== null) {
        throw new Error(`contender exited (${this.child.exitCode}) with ${JSON.stringify(this.lines)}: ${this.stderr}`);
      }
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  /** How its attempt ended: "won", or the error's name and message. */
  outcome(): Promise<string> {
    return this.line((l) => l !== "waiting");
  }

  /** Lets the winner release the lock and exit; resolves with its exit code. */
  async release(): Promise<number | null> {
    this.child.stdin?.end();
    return this.exited;
  }

  /** Kills it the way a crash or `docker kill` does: no release. */
  async kill(): Promise<void> {
    this.child.kill("SIGKILL");
    await this.exited;
  }
}

/** Two containers' renewal and lease in these tests: renewals often, a lease long enough never to lapse. */
const LIVE = { renewMs: 50, leaseMs: 10_000 };

describe("the PGlite data directory lock", () => {
  let dir: string;
  let lockPath: string;
  const contenders: Contender[] = [];
  const contender = (options?: ContenderOptions) => {
    const started = new Contender(dir, options);
    contenders.push(started);
    return started;
  };
  const lockOwner = async () => JSON.parse(await readFile(lockPath, "utf8")) as { host: string; pid: number };

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "todos-lock-"));
    lockPath = path.join(dir, LOCK_FILE);
  });
  afterEach(async () => {
    await Promise.all(contenders.splice(0).map((c) => c.kill()));
    await rm(dir, { recursive: true, force: true });
  });

  it("when a second service process starts on a directory in use, it exits 1 naming the directory and the owner, and the first keeps its data", async () => {
    expect(existsSync(MAIN)).toBe(true);
    const env = { ...process.env, TODOS_PORT: "0", TODOS_DATA_DIR: dir, LOG_LEVEL: "info", DATABASE_URL: "" };
    const first = spawnTracked(process.execPath, [MAIN], { env, stdio: ["ignore", "pipe", "pipe"] });
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
      expect(second.stderr).toContain(`The embedded database in ${dir} is in use by process ${first.pid}.`);

      const list = (await (await fetch(`${base}/users/owner/todos`)).json()) as { todoItems: { title: string }[] };
      expect(list.todoItems.map((item) => item.title)).toStrictEqual(["kept"]);
    } finally {
      first.kill("SIGTERM");
      await new Promise((resolve) => first.once("exit", resolve));
    }
    expect(existsSync(lockPath)).toBe(false);
  });

  it("when the directory's storage is closed, the lock is released and the directory can be opened again", async () => {
    const first = await openStorage({ dataDir: dir });
    await expect(openStorage({ dataDir: dir })).rejects.toThrow(DataDirLockedError);
    await first.close();
    expect(existsSync(lockPath)).toBe(false);
    const again = await openStorage({ dataDir: dir });
    await again.close();
  });

  describe("on one host (one PID namespace)", () => {
    it("when another live process holds the lock, taking it fails at once and leaves that lock untouched", async () => {
      const holder = contender();
      expect(await holder.outcome()).toBe("won");
      const before = await readFile(lockPath, "utf8");
      const onWait = jest.fn();
      await expect(lockDataDir(dir, { onWait })).rejects.toThrow(`is in use by process ${holder.pid}.`);
      expect(onWait).not.toHaveBeenCalled();
      expect(await readFile(lockPath, "utf8")).toBe(before);
      expect(await holder.release()).toBe(0);
      expect(existsSync(lockPath)).toBe(false);
    });

    it("when the lock was left by a process that has died, it is taken over at once and released again", async () => {
      const crashed = contender();
      expect(await crashed.outcome()).toBe("won");
      await crashed.kill();
      const onWait = jest.fn();
      const release = await lockDataDir(dir, { onWait });
      expect(onWait).not.toHaveBeenCalled();
      expect(await lockOwner()).toMatchObject({ host: os.hostname(), pid: process.pid });
      await release();
      expect(await readdir(dir)).toStrictEqual([]);
    });

    it("when the lock names this process's own PID but this process does not hold it (an earlier process with our PID), it is stale and taken over", async () => {
      const earlier = contender({ as: { pid: process.pid }, exitAfterWin: true });
      expect(await earlier.outcome()).toBe("won");
      await earlier.exited;
      const release = await lockDataDir(dir);
      await expect(lockDataDir(dir)).rejects.toThrow(DataDirLockedError);
      await release();
    });

    it("when several contenders race for a stale lock, exactly one wins", async () => {
      const crashed = contender();
      expect(await crashed.outcome()).toBe("won");
      await crashed.kill();
      const racers = Array.from({ length: 4 }, () => contender());
      const results = await Promise.all(racers.map((r) => r.outcome()));
      expect(results.filter((r) => r === "won")).toHaveLength(1);
      expect(results.filter((r) => r.startsWith("DataDirLockedError: "))).toHaveLength(3);
      expect(await readdir(dir)).toStrictEqual([LOCK_FILE]);
    });
  });

  describe("between containers sharing the volume (each PID 1 in its own PID namespace)", () => {
    const container = (host: string, n: number): Container => ({ host, pid: 1, pidNamespace: `pid:[40265320${n}]` });

    it("when four containers, all PID 1, start at the same moment, exactly one gets the lock and the others refuse", async () => {
      // The interleavings that matter are a matter of luck: each round is a fresh race on a fresh directory.
      for (let round = 0; round < 5; round++) {
        const hosts = ["todos-a", "todos-b", "todos-c", "todos-d"];
        const racers = hosts.map((host, n) => contender({ as: container(host, n), timings: LIVE }));
        const results = await Promise.all(racers.map((r) => r.outcome()));
        expect(results.filter((r) => r === "won")).toHaveLength(1);
        expect(results.filter((r) => r.startsWith("DataDirLockedError: "))).toHaveLength(3);
        expect(await readFile(lockPath, "utf8")).toContain(hosts[results.indexOf("won")]);
        expect(await readdir(dir)).toStrictEqual([LOCK_FILE]);
        await Promise.all(racers.map((r) => r.release()));
        await rm(dir, { recursive: true, force: true });
        dir = await mkdtemp(path.join(os.tmpdir(), "todos-lock-"));
        lockPath = path.join(dir, LOCK_FILE);
      }
    });

    it("when the two have the same host name too (two containers of one pod), the second refuses and the first keeps the lock", async () => {
      const first = contender({ as: container("todos", 1), timings: LIVE });
      expect(await first.outcome()).toBe("won");
      const second = contender({ as: container("todos", 2), timings: LIVE });
      expect(await second.outcome()).toBe(
        `DataDirLockedError: The embedded database in ${dir} is in use by process 1. Stop it first, or give this ` +
          "instance another TODOS_DATA_DIR (or a DATABASE_URL). A stopped instance's lock is taken over by the next " +
          "start: at once if it ran in this container or on this host, else once 10 s pass without renewal.",
      );
      expect(await lockOwner()).toMatchObject({ host: "todos", pid: 1 });
      expect(await first.release()).toBe(0);
      expect(first.lines).toStrictEqual(["won"]);
      expect(await readdir(dir)).toStrictEqual([]);
    });

    it("when the owner is alive in another container, a newcomer refuses once it sees the lock renewed, naming that host", async () => {
      const owner = contender({ as: container("todos-a", 1), timings: LIVE });
      expect(await owner.outcome()).toBe("won");
      const newcomer = contender({ as: container("todos-b", 2), timings: LIVE });
      expect(await newcomer.outcome()).toContain(`is in use by process 1 on todos-a.`);
      expect(await lockOwner()).toMatchObject({ host: "todos-a", pid: 1 });
      expect(await owner.release()).toBe(0);
      expect(owner.lines).toStrictEqual(["won"]);
    });

    it("when a container was killed uncleanly and is recreated under a new host name, the new one takes the lock over by itself once the lease has passed", async () => {
      const timings = { renewMs: 50, leaseMs: 500 };
      const crashed = contender({ as: container("todos-5f2c", 1), timings });
      expect(await crashed.outcome()).toBe("won");
      await crashed.kill();
      const recreated = contender({ as: container("todos-9a7e", 2), timings });
      expect(await recreated.outcome()).toBe("won");
      expect(await lockOwner()).toMatchObject({ host: "todos-9a7e", pid: 1 });
      expect(await recreated.release()).toBe(0);
      expect(await readdir(dir)).toStrictEqual([]);
    });
  });

  describe("an unreadable lock file (no owner named)", () => {
    it("when it was last written more than a lease ago, it is taken over at once", async () => {
      await writeFile(lockPath, "not a lock");
      const anHourAgo = new Date(Date.now() - 3_600_000);
      await utimes(lockPath, anHourAgo, anHourAgo);
      const onWait = jest.fn();
      const release = await lockDataDir(dir, { onWait });
      expect(onWait).not.toHaveBeenCalled();
      expect(await lockOwner()).toMatchObject({ host: os.hostname(), pid: process.pid });
      await release();
    });

    it("when it is recent, it is taken over once it has not been renewed for a whole lease", async () => {
      await writeFile(lockPath, "not a lock");
      const release = await lockDataDir(dir, { renewMs: 20, leaseMs: 300, onWait: () => undefined });
      expect(await lockOwner()).toMatchObject({ host: os.hostname(), pid: process.pid });
      await release();
    });
  });

  describe("a held lock that someone else replaces (its owner stalled past the lease, or the file was deleted)", () => {
    /** What a process that took the lock over leaves in place of ours. */
    const replaceLock = async () => {
      await rename(lockPath, `${lockPath}.moved-aside`);
      await rm(`${lockPath}.moved-aside`);
      await writeFile(lockPath, "the new owner's lock\n");
    };

    it("when it is released, the other's lock is left in place", async () => {
      const release = await lockDataDir(dir, { onLost: () => undefined });
      await replaceLock();
      await release();
      expect(await readFile(lockPath, "utf8")).toBe("the new owner's lock\n");
    });

    it("when it is renewed next, the owner learns that it lost the lock", async () => {
      let lost: (err: DataDirLockLostError) => void = () => undefined;
      const told = new Promise<DataDirLockLostError>((resolve) => {
        lost = resolve;
      });
      const release = await lockDataDir(dir, { renewMs: 20, onLost: (err) => lost(err) });
      await replaceLock();
      const err = await told;
      expect(err).toBeInstanceOf(DataDirLockLostError);
      expect(err.message).toBe(
        `The lock on the embedded database in ${dir} (${lockPath}) was taken over by another process or deleted ` +
          "while this process held it; stopping at once, without writing anything more, so that the two do not " +
          "overwrite each other's data.",
      );
      await release();
      expect(await readFile(lockPath, "utf8")).toBe("the new owner's lock\n");
    });

    it("when the owner is a process left to the defaults, it exits 1 at its next renewal saying why", async () => {
      const owner = contender({ timings: { renewMs: 50 }, defaultOnLost: true });
      expect(await owner.outcome()).toBe("won");
      await replaceLock();
      expect(await owner.exited).toBe(1);
      expect(owner.stderr).toContain(`The lock on the embedded database in ${dir} (${lockPath}) was taken over`);
      expect(await readFile(lockPath, "utf8")).toBe("the new owner's lock\n");
    });
  });
});
