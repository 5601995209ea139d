import { link, readFile, rename, unlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

/**
 * PGlite has no lock of its own: two processes opening one data directory both start, each sees only its
 * own writes, and whichever flushes last silently overwrites the other (or corrupts the directory). This
 * lock makes the second one refuse to start instead.
 *
 * The lock is a file inside the data directory (the only writable place in the image) holding the owner's
 * host name and PID. It is written to a private file first and then hard-linked into place, which fails if
 * a lock exists: so a lock is never seen half-written, and only one contender can create it. A lock whose
 * process is gone (a crash, `kill -9`) is stale and is taken over by renaming it away first: rename of one
 * path succeeds for exactly one contender, so two processes recovering at once cannot both win.
 *
 * Containers make PIDs ambiguous: the service is PID 1 in every incarnation, so a lock naming our own PID
 * that this process does not hold is a previous incarnation's and stale (this process tracks its own
 * locks). A lock from another host (another container sharing the volume) cannot be checked and counts as
 * held; the error says how to clear it if that instance is gone.
 */
export const LOCK_FILE = "todos.lock";

/** Lock paths this process holds: a second open in the same process is refused, not taken as stale. */
const held = new Set<string>();

interface Owner {
  host: string;
  pid: number;
}

export class DataDirLockedError extends Error {
  constructor(dataDir: string, owner: Owner | undefined) {
    const who =
      owner === undefined
        ? "another process"
        : owner.host === os.hostname()
          ? `process ${owner.pid}`
          : `process ${owner.pid} on ${owner.host}`;
    super(
      `The embedded database in ${dataDir} is in use by ${who}. Stop it first, or give this instance ` +
        `another TODOS_DATA_DIR (or a DATABASE_URL). If no such process is running, delete ` +
        `${path.join(dataDir, LOCK_FILE)}.`,
    );
    this.name = "DataDirLockedError";
  }
}

/** Takes the lock for this process; resolves to its release. Rejects with DataDirLockedError when held. */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const lockPath = path.join(dataDir, LOCK_FILE);
  if (held.has(lockPath)) throw new DataDirLockedError(dataDir, { host: os.hostname(), pid: process.pid });
  const mine = `${lockPath}.${process.pid}`;
  await writeFile(mine, `${os.hostname()} ${process.pid}\n`);
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await link(mine, lockPath);
        held.add(lockPath);
        return async () => {
          held.delete(lockPath);
          await unlink(lockPath).catch(() => undefined);
        };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
      const owner = await readOwner(lockPath);
      if (owner !== undefined && isHeld(owner)) throw new DataDirLockedError(dataDir, owner);
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
      if (moved !== undefined && !sameOwner(moved, owner) && isHeld(moved)) {
        await link(aside, lockPath).catch(() => undefined);
        await unlink(aside);
        throw new DataDirLockedError(dataDir, moved);
      }
      await unlink(aside);
    }
    throw new DataDirLockedError(dataDir, await readOwner(lockPath));
  } finally {
    await unlink(mine).catch(() => undefined);
  }
}

async function readOwner(lockPath: string): Promise<Owner | undefined> {
  try {
    const [host, pidText] = (await readFile(lockPath, "utf8")).trim().split(" ");
    const pid = Number(pidText);
    return host !== undefined && Number.isInteger(pid) && pid > 0 ? { host, pid } : undefined;
  } catch {
    return undefined;
  }
}

function sameOwner(a: Owner, b: Owner | undefined): boolean {
  return b !== undefined && a.host === b.host && a.pid === b.pid;
}

/** Whether the lock's owner may still be running (see the module comment for our own PID and other hosts). */
function isHeld(owner: Owner): boolean {
  if (owner.host !== os.hostname()) return true;
  if (owner.pid === process.pid) return false;
  try {
    process.kill(owner.pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
