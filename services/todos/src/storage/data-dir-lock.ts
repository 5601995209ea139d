import { randomBytes } from "node:crypto";
import { type FileHandle, link, open, readFile, readlink, rename, stat, unlink } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * PGlite has no lock of its own: two processes opening one data directory both start, each sees only its
 * own writes, and whichever flushes last silently overwrites the other (or corrupts the directory). This
 * lock makes the second one refuse to start instead.
 *
 * The lock is a file inside the data directory (the only writable place in the image) naming its owner:
 * host name, PID, the PID space it lives in (kernel boot + PID namespace) and a random token. It is written
 * to a private file first (named with the host and a random part: every container is PID 1, so a name by
 * PID alone is shared) and then hard-linked into place, which fails if a lock exists: so a lock is never
 * seen half-written, and only one contender can create it.
 *
 * The lock is a lease: its owner rewrites it every `renewMs` (10 s), which moves its modification time.
 * A lock that exists already is judged so:
 * - Its owner is in our PID space (same host, same container): the PID can be checked. A dead owner (a
 *   crash, `kill -9`) or our own PID (a previous incarnation: this process tracks its own locks) means it
 *   is stale and taken over at once; a live owner means it is held, unless not renewed for a lease.
 * - Otherwise (another container sharing the volume, another machine, an unreadable lock) the owner cannot
 *   be checked. Not renewed for `leaseMs` (30 s, by the file system's own clock or by watching it): stale,
 *   taken over. Younger: the starter waits, and refuses as soon as it sees the lock renewed. So a crashed
 *   container's replacement (a new host name on the same volume) starts by itself at most one lease after
 *   the crash, and a second live instance is refused within one renewal.
 * Taking over renames the lock aside first: a rename of one path succeeds for exactly one contender, so two
 * processes recovering at once cannot both win; what was moved is checked to be the lock judged stale,
 * not renewed since, else it is put back.
 *
 * At each renewal the owner checks that the lock file is still its own (the same file, which it keeps
 * open). If it was taken over (the owner stalled for longer than a lease) or deleted, the process must not
 * write another byte: by default it prints why and exits 1 at once, without closing the database (closing
 * writes). Releasing deletes the lock only if it is still this process's own.
 */
export const LOCK_FILE = "todos.lock";

/** Renewal period and lease of the lock; options of lockDataDir override them (tests only). */
export const LOCK_TIMINGS = { renewMs: 10_000, leaseMs: 30_000 } as const;

export interface LockOptions {
  /** How often the owner renews its lock. */
  renewMs?: number;
  /** How long a lock that is no longer renewed still counts as held (keep it several renewals long). */
  leaseMs?: number;
  /** Told once when the lock was found taken over or deleted at a renewal. Default: print, exit 1 at once. */
  onLost?: (err: DataDirLockLostError) => void;
  /** Told when this start waits for another's lock to be renewed or to expire. Default: stderr. */
  onWait?: (message: string) => void;
}

/** Lock paths this process holds: a second open in the same process is refused, not taken as stale. */
const held = new Set<string>();

interface Owner {
  host: string;
  pid: number;
  /** Processes with the same pidSpace see the same PIDs; undefined when unknown. */
  pidSpace?: string | undefined;
  token: string;
}

/** An existing lock file as read: its owner (undefined if unreadable), which file it is, its last renewal. */
interface SeenLock extends FileIdentity {
  owner: Owner | undefined;
  mtimeNs: bigint;
}

export class DataDirLockedError extends Error {
  constructor(dataDir: string, owner: Owner | undefined, leaseMs: number = LOCK_TIMINGS.leaseMs) {
    super(
      `The embedded database in ${dataDir} is in use by ${describeOwner(owner)}. Stop it first, or give this ` +
        `instance another TODOS_DATA_DIR (or a DATABASE_URL). A stopped instance's lock is taken over by the next ` +
        `start: at once if it ran in this container or on this host, else once ${leaseMs / 1000} s pass without renewal.`,
    );
    this.name = "DataDirLockedError";
  }
}

export class DataDirLockLostError extends Error {
  constructor(dataDir: string, options?: { cause?: unknown }) {
    super(
      `The lock on the embedded database in ${dataDir} (${path.join(dataDir, LOCK_FILE)}) was taken over by ` +
        `another process or deleted while this process held it; stopping at once, without writing anything ` +
        `more, so that the two do not overwrite each other's data.`,
      options,
    );
    this.name = "DataDirLockLostError";
  }
}

function describeOwner(owner: Owner | undefined): string {
  if (owner === undefined) return "another process";
  return owner.host === os.hostname() ? `process ${owner.pid}` : `process ${owner.pid} on ${owner.host}`;
}

/**
 * Takes the lock for this process, waiting up to about one lease when its current owner cannot be checked;
 * resolves to its release. Rejects with DataDirLockedError when the lock is held.
 */
export async function lockDataDir(dataDir: string, options: LockOptions = {}): Promise<() => Promise<void>> {
  const renewMs = options.renewMs ?? LOCK_TIMINGS.renewMs;
  const leaseMs = options.leaseMs ?? LOCK_TIMINGS.leaseMs;
  const lockPath = path.join(dataDir, LOCK_FILE);
  const me: Owner = {
    host: os.hostname(),
    pid: process.pid,
    pidSpace: await currentPidSpace(),
    token: randomBytes(8).toString("hex"),
  };
  if (held.has(lockPath)) throw new DataDirLockedError(dataDir, me, leaseMs);
  held.add(lockPath); // from now on, so that two opens in this process at once cannot both proceed
  const content = `${JSON.stringify(me)}\n`;
  const mine = `${lockPath}.${me.host.replace(/[^A-Za-z0-9.-]/g, "_")}.${me.token}`;
  let handle: FileHandle | undefined;
  try {
    handle = await open(mine, "wx");
    await handle.writeFile(content);
    const ours = await handle.stat({ bigint: true });
    const attempt = { dataDir, lockPath, mine, handle, content, me, renewMs, leaseMs, options };
    await acquire(attempt);
    return keep(attempt, ours);
  } catch (err) {
    held.delete(lockPath);
    await handle?.close().catch(() => undefined);
    throw err;
  } finally {
    // Once linked, the lock lives on as todos.lock (and as the handle this process keeps open).
    await unlink(mine).catch(() => undefined);
  }
}

interface Attempt {
  dataDir: string;
  lockPath: string;
  /** Our private lock file, complete; `handle` is open on it. */
  mine: string;
  handle: FileHandle;
  content: string;
  me: Owner;
  renewMs: number;
  leaseMs: number;
  options: LockOptions;
}

/** Links our lock into place, taking over a stale one; resolves once it is ours. */
async function acquire(attempt: Attempt): Promise<void> {
  const { dataDir, lockPath, mine, leaseMs } = attempt;
  const pollMs = Math.max(1, attempt.renewMs / 4);
  let watched: Watched | undefined;
  let seen: SeenLock | undefined;
  // Bounded: each lock file met (or vanished) counts, and waiting on one lock lasts at most its lease.
  for (let met = 0; met < 5; ) {
    try {
      await link(mine, lockPath);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    seen = await readLock(lockPath);
    if (seen === undefined) {
      met++; // released between our link and our read: try again
      continue;
    }
    if (watched === undefined || !sameFile(watched.lock, seen)) {
      met++;
      watched = { lock: seen, since: performance.now(), told: false };
    }
    const verdict = await judge(attempt, seen, watched);
    if (verdict === "held") throw new DataDirLockedError(dataDir, seen.owner, leaseMs);
    if (verdict === "wait") await sleep(pollMs);
    else await takeOver(attempt, seen);
  }
  throw new DataDirLockedError(dataDir, seen?.owner, leaseMs);
}

/** A lock being watched for a renewal: as first seen, since when (our clock), and whether we said so. */
interface Watched {
  lock: SeenLock;
  since: number;
  told: boolean;
}

async function judge(attempt: Attempt, seen: SeenLock, watched: Watched): Promise<"stale" | "held" | "wait"> {
  const { me, leaseMs } = attempt;
  const owner = seen.owner;
  // Age by the file system's clock (our own file was written just now), so hosts' clocks need not agree.
  await attempt.handle.write(attempt.content, 0);
  const now = (await attempt.handle.stat({ bigint: true })).mtimeNs;
  const expired = Number(now - seen.mtimeNs) / 1e6 > leaseMs;
  if (owner !== undefined && me.pidSpace !== undefined && owner.pidSpace === me.pidSpace) {
    if (owner.pid === me.pid || !isRunning(owner.pid)) return "stale";
    // A live process with that PID: the owner, unless the PID was reused after a crash a lease ago.
    return expired ? "stale" : "held";
  }
  if (expired) return "stale";
  // An owner we cannot check: held if we see it renew, stale once it was not renewed for a whole lease.
  if (seen.mtimeNs !== watched.lock.mtimeNs) return "held";
  if (performance.now() - watched.since > leaseMs) return "stale";
  if (!watched.told) {
    watched.told = true;
    (attempt.options.onWait ?? ((message) => console.error(message)))(
      `The embedded database in ${attempt.dataDir} is locked by ${describeOwner(owner)}, which cannot be ` +
        `checked from here; waiting up to ${leaseMs / 1000} s for it to renew the lock (then this start ` +
        `refuses) or not (then the lock is taken over).`,
    );
  }
  return "wait";
}

/** Moves the stale lock aside and deletes it, unless what was moved is not that lock as judged. */
async function takeOver(attempt: Attempt, stale: SeenLock): Promise<void> {
  const { dataDir, lockPath, leaseMs } = attempt;
  const aside = `${attempt.mine}.stale`;
  try {
    await rename(lockPath, aside);
  } catch (err) {
    // Another process took it over (or it was released) first; the next attempt sees what it left.
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  // Between our read and our rename the lock may have been replaced (a contender took it over) or renewed
  // (its owner was only slow): then it belongs to a live process. Put it back (link fails rather than
  // overwrite) and give way.
  const moved = await readLock(aside);
  if (moved !== undefined && (!sameFile(moved, stale) || moved.mtimeNs !== stale.mtimeNs)) {
    await link(aside, lockPath).catch(() => undefined);
    await unlink(aside);
    throw new DataDirLockedError(dataDir, moved.owner, leaseMs);
  }
  await unlink(aside);
}

/** Renews the lock we now hold (`ours` is its file) until it is released; returns the release. */
function keep(lock: Attempt, ours: FileIdentity): () => Promise<void> {
  const { dataDir, lockPath, handle, content, leaseMs } = lock;
  const onLost = lock.options.onLost ?? exitOnLost;
  let lastRenewed = performance.now();
  let state: "held" | "lost" | "released" = "held";
  let renewing = false;

  const lose = (cause?: unknown) => {
    if (state !== "held") return;
    state = "lost";
    clearInterval(timer);
    held.delete(lockPath);
    onLost(new DataDirLockLostError(dataDir, cause === undefined ? undefined : { cause }));
  };
  const renew = async () => {
    if (renewing || state !== "held") return;
    renewing = true;
    try {
      // Written through our own open file: if the lock was taken over, this touches only our old file.
      await handle.write(content, 0);
      await handle.datasync();
      if (!sameFile(await stat(lockPath, { bigint: true }), ours)) return lose();
      lastRenewed = performance.now();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return lose();
      // Anything else (an I/O error) is retried at the next renewal, until the lease is over.
      if (performance.now() - lastRenewed > leaseMs) lose(err);
    } finally {
      renewing = false;
    }
  };
  const timer = setInterval(() => void renew(), lock.renewMs);
  timer.unref();

  return async () => {
    if (state === "released") return;
    const wasHeld = state === "held";
    state = "released";
    clearInterval(timer);
    try {
      if (wasHeld) {
        held.delete(lockPath);
        // Only our own lock is deleted: a lock that was taken over belongs to a live process.
        const current = await stat(lockPath, { bigint: true }).catch(() => undefined);
        if (current !== undefined && sameFile(current, ours)) await unlink(lockPath);
      }
    } finally {
      await handle.close();
    }
  };
}

function exitOnLost(err: DataDirLockLostError): void {
  console.error(err.message);
  process.exit(1);
}

interface FileIdentity {
  dev: bigint;
  ino: bigint;
}

function sameFile(a: FileIdentity, b: FileIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino;
}

/** Reads a lock file's owner and its file identity and modification time (one open, so they agree). */
async function readLock(file: string): Promise<SeenLock | undefined> {
  let handle: FileHandle;
  try {
    handle = await open(file, "r");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  try {
    const { dev, ino, mtimeNs } = await handle.stat({ bigint: true });
    return { owner: parseOwner(await handle.readFile("utf8")), dev, ino, mtimeNs };
  } finally {
    await handle.close();
  }
}

function parseOwner(text: string): Owner | undefined {
  try {
    const value = JSON.parse(text) as Partial<Owner>;
    const { host, pid, pidSpace, token } = value;
    if (typeof host !== "string" || typeof token !== "string") return undefined;
    if (typeof pid !== "number" || !Number.isInteger(pid) || pid <= 0) return undefined;
    return { host, pid, pidSpace: typeof pidSpace === "string" ? pidSpace : undefined, token };
  } catch {
    return undefined;
  }
}

/**
 * Identifies the set of processes whose PIDs this process can check: the kernel boot and PID namespace on
 * Linux (each container has its own, even with the same host name), the machine elsewhere. Undefined when
 * it cannot be told, and then no PID is trusted.
 */
async function currentPidSpace(): Promise<string | undefined> {
  if (process.platform !== "linux") return `${process.platform}:${os.hostname()}`;
  try {
    const boot = (await readFile("/proc/sys/kernel/random/boot_id", "utf8")).trim();
    return `${boot}/${await readlink("/proc/self/ns/pid")}`;
  } catch {
    return undefined;
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
