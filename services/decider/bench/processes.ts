/** The benchmarks' processes: deciders (their own built main.js) and fake model servers, on loopback. */
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { freePort, stopProcess, waitUntilOk } from "../test/engine/backends";

/** The first line a child prints on stdout (the servers print their address), or why it exited first. */
export function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    if (child.stdout === null) return reject(new Error("no stdout"));
    child.once("exit", (code) => reject(new Error(`exited with ${code} before it was ready`)));
    createInterface({ input: child.stdout }).once("line", resolve);
  });
}

export interface Decider {
  url: string;
  child: ChildProcess;
}

/**
 * A decider on a free port with `env` on top of this process's environment; resolves once /ready is 200.
 * Its log lines (stdout) are dropped, and its stderr is this process's, unless `logFile` is given: then both
 * go to that file (appended).
 */
export async function startDecider(env: Record<string, string>, logFile?: string): Promise<Decider> {
  const port = await freePort();
  const log = logFile === undefined ? undefined : openSync(logFile, "a");
  const child = spawn(process.execPath, [path.join(__dirname, "..", "src", "main.js")], {
    stdio: ["ignore", log ?? "ignore", log ?? "inherit"],
    env: { ...process.env, LOCALDECIDER_PORT: String(port), LOG_LEVEL: "error", ...env },
  });
  // The child holds its own copy of the file.
  if (log !== undefined) closeSync(log);
  const url = `http://127.0.0.1:${port}`;
  await waitUntilOk(`${url}/ready`, () => child.exitCode !== null);
  return { url, child };
}

/** A decider in front of fake model servers (the model they list, MAX_INFLIGHT 4), `extra` on top. */
export function deciderOnFake(upstream: string, extra: Record<string, string> = {}): Promise<Decider> {
  return startDecider({
    LOCALDECIDER_UPSTREAM: upstream,
    LOCALDECIDER_UPSTREAM_MODEL: "test-model",
    LOCALDECIDER_MAX_INFLIGHT: "4",
    ...extra,
  });
}

/** What a fake model server process counts (bench/fake-upstream.main.ts answers these over IPC). */
export interface UpstreamStats {
  /** Chat calls since the last reset. */
  calls: number;
  /** Most chat calls in flight at once since the last reset. */
  peak: number;
}

export interface FakeUpstreamProcess {
  url: string;
  child: ChildProcess;
  stats(): Promise<UpstreamStats>;
  /** Starts counting again (and drops what the fake keeps of past calls). */
  reset(): Promise<UpstreamStats>;
  stop(): Promise<void>;
}

/** The test suite's fake model server in a process of its own, every call taking `latencyMs`. */
export async function startFakeUpstream(
  latencyMs: number,
  flavour: "vllm" | "llama" = "vllm",
): Promise<FakeUpstreamProcess> {
  const main = path.join(__dirname, "fake-upstream.main.js");
  const child = spawn(process.execPath, [main, String(latencyMs), flavour], {
    stdio: ["ignore", "pipe", "inherit", "ipc"],
  });
  // One question at a time is all the benchmarks ask, so the next message is the answer.
  const ask = (question: "stats" | "reset") =>
    new Promise<UpstreamStats>((resolve) => {
      child.once("message", (answer) => resolve(answer as UpstreamStats));
      child.send(question);
    });
  return {
    url: await firstLine(child),
    child,
    stats: () => ask("stats"),
    reset: () => ask("reset"),
    stop: () => stopProcess(child),
  };
}

/** Milliseconds of CPU (user + system) a process has used, from /proc (Linux: 100 ticks per second). */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name, which may hold spaces: state is the 3rd field, utime the 14th.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * Nanoseconds of CPU a process's threads have run (/proc/<pid>/task/<tid>/schedstat: nanosecond resolution,
 * where /proc/<pid>/stat counts 10 ms ticks); 0 where there is no /proc. A thread that ended is not counted.
 */
export function cpuNs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    return readdirSync(`/proc/${pid}/task`).reduce((sum, tid) => {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8");
      return sum + Number(stat.split(" ")[0]);
    }, 0);
  } catch {
    return 0;
  }
}
