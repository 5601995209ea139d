/**
 * A Redis server for the suites that need one (the decider's shared limits, deploy-checks' compose Redis),
 * found or started, and the `redis-server` / `redis-cli` programs for the tests that start Redis servers of
 * their own:
 *
 * 1. the server at LOCALDECIDER_TEST_REDIS_URL, else the machine's at 127.0.0.1:6379, when it answers PING;
 * 2. else `redis-server` on PATH, started on a free loopback port (nothing kept on disk);
 * 3. else, on Debian and Ubuntu, Redis from the distribution's own packages: `apt-get download` (the
 *    ordinary client, with a package index of our own in the cache, so it runs unprivileged and leaves the
 *    machine's apt state alone) fetches `redis-tools` and the libraries it links, apt checks them against
 *    the signed archive index, and `dpkg-deb -x` unpacks them into the cache; started as in 2.
 *
 * No package on the npm registry ships prebuilt redis-server binaries (checked 2026-11: redis-prebuilt and
 * redis-memory-server download or compile at install time from hosts other than the registry), so unlike
 * PostgreSQL and Chromium there is no npm fallback; elsewhere the error says what to install.
 */
import { type ChildProcess, execFile } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { cacheDir } from "./npm-package";
import { freePort } from "./ports";
import { spawnTracked, stopChild } from "./processes";
import { sayer } from "./say";

const run = promisify(execFile);

/** Where the suites look first: the machine's Redis. */
export const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379";

/** The programs the tests start, and the environment they need (a library path for the unpacked packages). */
export interface RedisPrograms {
  /** Absolute path of redis-server. */
  server: string;
  /** Absolute path of redis-cli, or undefined when the machine's redis-server came without it. */
  cli: string | undefined;
  /** The folder holding both (prepend it to PATH for scripts that call them by name). */
  binDir: string;
  /** Extra environment for running them (LD_LIBRARY_PATH for unpacked packages); empty for the machine's. */
  env: Record<string, string>;
  source: "PATH" | "debian packages";
}

export interface RedisServer {
  /** redis://127.0.0.1:<port> of the server the suites share (each test under a key prefix of its own). */
  url: string;
  source: "running" | "started";
  /** Stops a server this run started; nothing for one it found. */
  stop(): Promise<void>;
}

/**
 * Whether a Redis server answers PING with PONG at host:port (RESP inline command). A server that wants a
 * password (`-NOAUTH`), another protocol, silence or a refused connection is no: the suites cannot use it.
 */
export function redisAnswers(host: string, port: number, timeoutMs = 2_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let reply = "";
    const done = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk: Buffer) => {
      reply += chunk.toString("latin1");
      if (reply.includes("\r\n")) done(reply.startsWith("+PONG\r\n"));
    });
    socket.once("close", () => done(false));
  });
}

/** The folder on PATH holding `command`, if any. */
export function onPath(command: string, pathVariable = process.env.PATH ?? ""): string | undefined {
  return pathVariable.split(path.delimiter).find((dir) => dir !== "" && existsSync(path.join(dir, command)));
}

/** The Debian packages holding redis-server and redis-cli (the server is a name of redis-check-rdb there). */
export const DEBIAN_REDIS_PACKAGE = "redis-tools";

/**
 * Which packages of a dependency closure to fetch beside the program's own: the libraries (`lib*`), except the
 * C library, the compiler runtime and systemd's, which every Debian system has and which must match the
 * system's own loader. Reads `apt-cache depends --recurse` (package names at the line start, `Depends:` lines
 * under them); alternatives (`|Depends:`) count, virtual names (`<name>`) do not.
 */
export function libraryDepends(aptCacheDepends: string): string[] {
  const names = new Set<string>();
  for (const line of aptCacheDepends.split("\n")) {
    const match = /^(?:\s+\|?Depends: )?([^<>\s]+)$/.exec(line);
    const name = match?.[1]?.replace(/:any$/, "");
    if (name === undefined || !name.startsWith("lib")) continue;
    if (/^libc6(-|$)/.test(name) || /^libsystemd/.test(name) || /^libgcc-s|^libstdc\+\+/.test(name)) continue;
    names.add(name);
  }
  return [...names].sort();
}

/** apt with a package index of its own under `dir`: unprivileged, and the machine's apt state untouched. */
function aptOptions(dir: string): string[] {
  return [
    "-o",
    `Dir::State::Lists=${path.join(dir, "lists")}`,
    "-o",
    `Dir::Cache=${path.join(dir, "cache")}`,
    "-o",
    "Debug::NoLocking=1",
    // Downloads run as this user: apt's _apt sandbox user could not write into our cache.
    "-o",
    "APT::Sandbox::User=",
    "-q",
  ];
}

const READY = ".localdecider-ready";

/** What to fetch from Debian: the package holding the programs, and where each program is inside it. */
export interface DebianPrograms {
  /** The folder under the cache (`debian-redis`). */
  folder: string;
  /** The package to install (its library closure comes with it). */
  root: string;
  /** Links to make in the folder's `bin/`: name -> path inside the unpacked tree (a glob's `*` allowed once). */
  links: Record<string, string>;
}

export const DEBIAN_REDIS: DebianPrograms = {
  folder: "debian-redis",
  root: DEBIAN_REDIS_PACKAGE,
  // redis-server is redis-check-rdb under another name.
  links: { "redis-server": "usr/bin/redis-check-rdb", "redis-cli": "usr/bin/redis-cli" },
};

/** The unpacked path a link names, the one `*` in it matched against the folders there (the newest). */
function resolveInside(root: string, target: string): string {
  const star = target.indexOf("*");
  if (star === -1) return target;
  const parent = target.slice(0, target.lastIndexOf("/", star));
  const rest = target.slice(target.indexOf("/", star));
  const found = readdirSync(path.join(root, parent)).sort((a, b) => Number(b) - Number(a))[0];
  if (found === undefined) throw new Error(`nothing unpacked matches ${target}`);
  return `${parent}/${found}${rest}`;
}

/**
 * Fetches a Debian package and the libraries of its dependency closure with `apt-get download` (a package
 * index of its own in the cache: unprivileged, the machine's apt state untouched; each .deb checked against
 * the signed index), unpacks them with `dpkg-deb -x` and links the programs into `bin/`. Once per cache: the
 * folder is published complete, with a marker, by a rename.
 */
export async function unpackDebianPrograms(
  what: DebianPrograms,
  cache: string,
  say: (m: string) => void,
): Promise<string> {
  const final = path.join(cache, what.folder);
  if (existsSync(path.join(final, READY))) return final;
  await mkdir(cache, { recursive: true });
  const work = await mkdtemp(path.join(cache, `.partial-${what.folder}-`));
  try {
    const apt = path.join(work, "apt");
    for (const dir of ["lists/partial", "cache/archives/partial"])
      await mkdir(path.join(apt, dir), { recursive: true });
    say(`not on this machine: fetching Debian's ${what.root} with apt-get (once; kept in ${cache})`);
    await run("apt-get", [...aptOptions(apt), "update"], { maxBuffer: 16 * 1024 * 1024 });
    const closure = ["--recurse", "--no-recommends", "--no-suggests", "--no-conflicts", "--no-breaks"];
    closure.push("--no-replaces", "--no-enhances");
    const depends = await run("apt-cache", [...aptOptions(apt), "depends", ...closure, what.root], {
      maxBuffer: 16 * 1024 * 1024,
    });
    // The root's own versioned package (postgresql-client -> postgresql-client-15) comes along.
    const versioned = depends.stdout
      .split("\n")
      .filter((line) => new RegExp(`^${what.root.replace(/[.+]/g, "\\$&")}-[0-9.]+$`).test(line));
    const packages = [what.root, ...versioned, ...libraryDepends(depends.stdout)];
    const debs = path.join(work, "debs");
    await mkdir(debs);
    // apt-get download checks each .deb against the signed index (Release -> Packages -> SHA256).
    await run("apt-get", [...aptOptions(apt), "download", ...packages], { cwd: debs, maxBuffer: 16 * 1024 * 1024 });
    const root = path.join(work, "root");
    await mkdir(root);
    for (const deb of readdirSync(debs).filter((f) => f.endsWith(".deb"))) {
      await run("dpkg-deb", ["-x", path.join(debs, deb), root]);
    }
    // The names the tests call, beside the unpacked files; relative links, so the folder works where published.
    await mkdir(path.join(root, "bin"));
    for (const [name, target] of Object.entries(what.links)) {
      await symlink(path.join("..", resolveInside(root, target)), path.join(root, "bin", name));
    }
    await writeFile(path.join(root, READY), `${readdirSync(debs).join("\n")}\n`);
    // A folder left by an older version of this tooling (no marker) is replaced.
    if (existsSync(final) && !existsSync(path.join(final, READY))) await rm(final, { recursive: true, force: true });
    try {
      await rename(root, final);
    } catch (err) {
      // Another run published it first: use theirs.
      if (!existsSync(path.join(final, READY))) throw err;
    }
    say(`unpacked ${readdirSync(debs).length} packages: ${packages.join(", ")}`);
    return final;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** The library path for programs unpacked under `root`: Debian's folders named for the architecture. */
export function debianLibraryPath(root: string): string {
  const inherited = process.env.LD_LIBRARY_PATH;
  const dirs = ["usr/lib", "lib"]
    .map((d) => path.join(root, d))
    .filter((d) => existsSync(d))
    .flatMap((d) =>
      readdirSync(d)
        .filter((name) => name.endsWith("-linux-gnu"))
        .map((name) => path.join(d, name)),
    );
  return [...dirs, ...(inherited ? [inherited] : [])].join(":");
}

/** One preparation per cache folder at a time in this process (parallel callers share it). */
const preparing = new Map<string, Promise<string>>();

/**
 * redis-server and redis-cli: the machine's (on PATH), else Debian's packages unpacked into the cache.
 * Throws, saying what to install, where neither is possible.
 */
export async function ensureRedisPrograms(
  options: { cache?: string; say?: (message: string) => void; pathVariable?: string } = {},
): Promise<RedisPrograms> {
  const say = options.say ?? sayer("redis");
  const dir = onPath("redis-server", options.pathVariable);
  if (dir !== undefined) {
    const cli = onPath("redis-cli", options.pathVariable);
    return {
      server: path.join(dir, "redis-server"),
      cli: cli === undefined ? undefined : path.join(cli, "redis-cli"),
      binDir: dir,
      env: {},
      source: "PATH",
    };
  }
  if (process.platform !== "linux" || onPath("apt-get") === undefined || onPath("dpkg-deb") === undefined) {
    throw new Error(
      "no redis-server on PATH and no Redis answering at 127.0.0.1:6379: install Redis (e.g. `brew install redis`, " +
        "`apt-get install redis-server`) or set LOCALDECIDER_TEST_REDIS_URL to a Redis the tests may use",
    );
  }
  const cache = options.cache ?? cacheDir();
  let pending = preparing.get(cache);
  if (pending === undefined) {
    pending = unpackDebianPrograms(DEBIAN_REDIS, cache, say);
    preparing.set(cache, pending);
    pending.catch(() => preparing.delete(cache));
  }
  const root = await pending;
  const binDir = path.join(root, "bin");
  return {
    server: path.join(binDir, "redis-server"),
    cli: path.join(binDir, "redis-cli"),
    binDir,
    env: { LD_LIBRARY_PATH: debianLibraryPath(root) },
    source: "debian packages",
  };
}

/** A started redis-server: loopback only, nothing on disk, killed with this process if it dies first. */
export interface StartedRedis {
  port: number;
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Starts redis-server on a loopback port (free one by default), keeping nothing on disk, and resolves once it
 * answers PING. `extraArgs` come last (later options win in Redis).
 */
export async function startRedis(
  programs: RedisPrograms,
  options: { port?: number; extraArgs?: string[] } = {},
): Promise<StartedRedis> {
  const port = options.port ?? (await freePort());
  const dir = await mkdtemp(path.join(tmpdir(), "localdecider-redis-"));
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir];
  const child = spawnTracked(programs.server, [...args, ...(options.extraArgs ?? [])], {
    env: { ...process.env, ...programs.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  const keep = (chunk: Buffer) => {
    log = (log + chunk.toString("utf8")).slice(-4_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  child.once("error", (err) => {
    log += `\n${err.message}`;
  });
  const stop = async () => {
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await stopChild(child);
    clearTimeout(timer);
    await rm(dir, { recursive: true, force: true });
  };
  for (let i = 0; ; i++) {
    if (child.exitCode !== null || child.signalCode !== null) {
      await stop();
      throw new Error(`redis-server (${programs.server}) exited while starting:\n${log}`);
    }
    if (await redisAnswers("127.0.0.1", port, 500)) break;
    if (i === 200) {
      await stop();
      throw new Error(`redis-server (${programs.server}) not answering on 127.0.0.1:${port} after 20 s:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { port, url: `redis://127.0.0.1:${port}`, child, stop };
}

/**
 * Finds or starts the Redis the suites share, saying what it does. `url` defaults to
 * `LOCALDECIDER_TEST_REDIS_URL`, else 127.0.0.1:6379.
 */
export async function ensureRedis(
  options: { url?: string; cache?: string; say?: (message: string) => void } = {},
): Promise<RedisServer> {
  const say = options.say ?? sayer("redis");
  const url = new URL(options.url ?? process.env.LOCALDECIDER_TEST_REDIS_URL ?? DEFAULT_REDIS_URL);
  const port = Number(url.port || 6379);
  if (await redisAnswers(url.hostname, port)) {
    say(`using the Redis at ${url.hostname}:${port}`);
    return { url: url.toString().replace(/\/$/, ""), source: "running", stop: async () => undefined };
  }
  const programs = await ensureRedisPrograms({ ...options, say });
  const started = await startRedis(programs);
  say(`nothing answers at ${url.hostname}:${port}; started ${programs.server} (${programs.source}) at ${started.url}`);
  return { url: started.url, source: "started", stop: started.stop };
}

/** The variables through which a Jest global setup hands the programs to its test files (workers inherit them). */
const PROGRAM_VARIABLES = {
  server: "LOCALDECIDER_TEST_REDIS_SERVER",
  cli: "LOCALDECIDER_TEST_REDIS_CLI",
  libraries: "LOCALDECIDER_TEST_REDIS_LD_LIBRARY_PATH",
  problem: "LOCALDECIDER_TEST_REDIS_PROGRAMS_PROBLEM",
} as const;

/**
 * For a global setup: finds the programs and puts them in this process's environment for the test files;
 * where none can be had, puts the reason there instead, so that only the tests that start a Redis of their
 * own fail (with that reason), not the whole run.
 */
export async function exportRedisPrograms(options: { cache?: string; say?: (message: string) => void } = {}) {
  try {
    const programs = await ensureRedisPrograms(options);
    process.env[PROGRAM_VARIABLES.server] = programs.server;
    if (programs.cli !== undefined) process.env[PROGRAM_VARIABLES.cli] = programs.cli;
    if (programs.env.LD_LIBRARY_PATH !== undefined) {
      process.env[PROGRAM_VARIABLES.libraries] = programs.env.LD_LIBRARY_PATH;
    }
    return programs;
  } catch (err) {
    process.env[PROGRAM_VARIABLES.problem] = (err as Error).message;
    return undefined;
  }
}

/** In a test file: the programs a global setup exported (exportRedisPrograms), or its reason for having none. */
export function redisProgramsFromEnv(env: NodeJS.ProcessEnv = process.env): RedisPrograms {
  const server = env[PROGRAM_VARIABLES.server];
  if (server === undefined) {
    throw new Error(
      env[PROGRAM_VARIABLES.problem] ??
        "no redis-server was prepared for this test: run it through jest (its global setup finds one)",
    );
  }
  const libraries = env[PROGRAM_VARIABLES.libraries];
  return {
    server,
    cli: env[PROGRAM_VARIABLES.cli],
    binDir: path.dirname(server),
    env: libraries === undefined ? {} : { LD_LIBRARY_PATH: libraries },
    source: libraries === undefined ? "PATH" : "debian packages",
  };
}
