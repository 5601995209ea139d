import { link, readFile, rename, unlink, writeFile } from "node:fs/promises";
import path from "node:path";

/**
 * PGlite has no lock of its own: two processes opening one data directory both start, each sees only its
 * own writes, and whichever flushes last silently overwrites the other (or corrupts the directory). This
 * lock makes the second one refuse to start instead.
 *
 * The lock is a file inside the data directory (the only writable place in the image) holding the owner's
 * PID. It is written to a private file first and then hard-linked into place, which fails if a lock exists:
 * so a lock is never seen half-written, and only one contender can create it. A lock whose process is gone (a crash, `kill -9`) is stale and is taken
 * over by renaming it away first: rename of one path succeeds for exactly one contender, so two processes
 * recovering at once cannot both win.
 */
export const LOCK_FILE = "todos.lock";

export class DataDirLockedError extends Error {
  constructor(dataDir: string, pid: number) {
    super(
      `The embedded database in ${dataDir} is in use by process ${pid}. Stop it first, or give this instance ` +
        `another TODOS_DATA_DIR (or a DATABASE_URL). If no such process is running, delete ` +
        `${path.join(dataDir, LOCK_FILE)}.`,
    );
    this.name = "DataDirLockedError";
  }
}

/** Takes the lock for this process; resolves to its release. Rejects with DataDirLockedError when held. */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const lockPath = path.join(dataDir, LOCK_FILE);
  const mine = `${lockPath}.${process.pid}`;
  await writeFile(mine, `${process.pid}\n`);
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await link(mine, lockPath);
        return () => unlink(lockPath).catch(() => undefined);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
      const owner = await readOwner(lockPath);
      if (owner !== undefined && isAlive(owner)) throw new DataDirLockedError(dataDir, owner);
      // Stale, or released between our link and our read: move it aside, then try again.
      const aside = `${lockPath}.stale-${process.pid}`;
      try {
        await rename(lockPath, aside);
      } catch (err) {
        // Another process took it over (or released it) first; the next attempt sees what it left.
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
        continue;
      }
      // A contender may have replaced the stale lock with its own between our read and our rename: if what
      // we moved belongs to a live process, put it back (link fails rather than overwrite) and give way.
      const moved = await readOwner(aside);
      if (moved !== undefined && moved !== owner && isAlive(moved)) {
        await link(aside, lockPath).catch(() => undefined);
        await unlink(aside);
        throw new DataDirLockedError(dataDir, moved);
      }
      await unlink(aside);
    }
    const owner = await readOwner(lockPath);
    throw new DataDirLockedError(dataDir, owner ?? -1);
  } finally {
    await unlink(mine).catch(() => undefined);
  }
}

async function readOwner(lockPath: string): Promise<number | undefined> {
  try {
    const pid = Number.parseInt(await readFile(lockPath, "utf8"), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
