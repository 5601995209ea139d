/**
 * Child processes started by tests, none left behind: every child started through spawnTracked is killed (its
 * whole process group, when it was started as a group's leader) by reapChildren, which the `reap` setup file
 * runs after each test file whatever happened in it (a failed beforeAll, a test that threw before its
 * finally, a helper that started three processes and failed on the fourth), and at this process's exit.
 * A test still stops its children itself, gracefully; this is the net under it.
 */
import { type ChildProcess, type SpawnOptions, spawn } from "node:child_process";

const live = new Set<ChildProcess>();

function signalChild(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  try {
    // A negative pid signals the whole group: a shell's children (`sh -c "redis-server ..."`) go too.
    if (groupLeaders.has(child)) process.kill(-child.pid, signal);
    else child.kill(signal);
  } catch {
    // Already gone.
  }
}

const groupLeaders = new WeakSet<ChildProcess>();

/** Kills every child still running at this process's exit (no await possible there: SIGKILL). */
function killAllNow(): void {
  for (const child of live) signalChild(child, "SIGKILL");
}
let exitHookInstalled = false;

/** Starts a process the way child_process.spawn does, and keeps it on the list reapChildren empties. */
export function spawnTracked(
  command: string,
  args: readonly string[],
  options: SpawnOptions & {
    /** Leads a process group of its own, so that stopping it stops what it started (a shell's commands). */
    group?: boolean;
  } = {},
): ChildProcess {
  const { group, ...spawnOptions } = options;
  const child = spawn(command, args, { ...spawnOptions, ...(group === true ? { detached: true } : {}) });
  return track(child, group === true);
}

/** Keeps an already started child on the list (`group`: it leads its own process group). */
export function track(child: ChildProcess, group = false): ChildProcess {
  if (group) groupLeaders.add(child);
  if (!exitHookInstalled) {
    process.on("exit", killAllNow);
    exitHookInstalled = true;
  }
  live.add(child);
  child.once("exit", () => live.delete(child));
  child.once("error", () => live.delete(child));
  return child;
}

/** Signals a child (and its group, when it leads one) and resolves once it has exited. */
export async function stopChild(child: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  signalChild(child, signal);
  await exited;
}

/** The tracked children still running. */
export function liveChildren(): ChildProcess[] {
  return [...live].filter((c) => c.exitCode === null && c.signalCode === null);
}

/**
 * Kills (SIGKILL) every tracked child still running and waits until each has exited; returns how many there
 * were, with the command lines, so that a setup file can say which test left them.
 */
export async function reapChildren(): Promise<string[]> {
  const left = liveChildren();
  await Promise.all(left.map((child) => stopChild(child, "SIGKILL")));
  for (const child of left) live.delete(child);
  return left.map((child) => child.spawnargs.join(" "));
}
