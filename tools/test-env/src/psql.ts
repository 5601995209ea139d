/**
 * psql, PostgreSQL's command line client, for the tests that run an SQL script as an operator would (psql's
 * own meta-commands: \getenv, \gexec, \if): the machine's on PATH; otherwise, on Debian and Ubuntu, Debian's
 * `postgresql-client` and its libraries, fetched with apt-get into the test cache as Redis is (redis.ts).
 * The embedded PostgreSQL from npm ships the server only.
 */
import path from "node:path";
import { cacheDir } from "./npm-package";
import { type DebianPrograms, debianLibraryPath, onPath, unpackDebianPrograms } from "./redis";
import { sayer } from "./say";

export interface PsqlProgram {
  /** Absolute path of psql. */
  psql: string;
  /** Extra environment it needs (LD_LIBRARY_PATH for Debian's packages); empty for the machine's. */
  env: Record<string, string>;
  source: "PATH" | "debian packages";
}

export const DEBIAN_PSQL: DebianPrograms = {
  folder: "debian-psql",
  root: "postgresql-client",
  // The real program, not Debian's version-picking wrapper /usr/bin/psql (a Perl script).
  links: { psql: "usr/lib/postgresql/*/bin/psql" },
};

/** One preparation per cache folder at a time in this process (parallel callers share it). */
const preparing = new Map<string, Promise<string>>();

export async function ensurePsql(
  options: { cache?: string; say?: (message: string) => void; pathVariable?: string } = {},
): Promise<PsqlProgram> {
  const dir = onPath("psql", options.pathVariable);
  if (dir !== undefined) return { psql: path.join(dir, "psql"), env: {}, source: "PATH" };
  if (process.platform !== "linux" || onPath("apt-get") === undefined || onPath("dpkg-deb") === undefined) {
    throw new Error(
      "no psql on PATH: install PostgreSQL's client (`brew install libpq`, `apt-get install postgresql-client`)",
    );
  }
  const cache = options.cache ?? cacheDir();
  let pending = preparing.get(cache);
  if (pending === undefined) {
    pending = unpackDebianPrograms(DEBIAN_PSQL, cache, options.say ?? sayer("psql"));
    preparing.set(cache, pending);
    pending.catch(() => preparing.delete(cache));
  }
  const root = await pending;
  return {
    psql: path.join(root, "bin", "psql"),
    env: { LD_LIBRARY_PATH: debianLibraryPath(root) },
    source: "debian packages",
  };
}

/** For a global setup: psql's path and environment in this process's environment, for the test files. */
export async function exportPsql(options: { cache?: string; say?: (message: string) => void } = {}): Promise<void> {
  try {
    const found = await ensurePsql(options);
    process.env.LOCALDECIDER_TEST_PSQL = found.psql;
    if (found.env.LD_LIBRARY_PATH !== undefined)
      process.env.LOCALDECIDER_TEST_PSQL_LD_LIBRARY_PATH = found.env.LD_LIBRARY_PATH;
  } catch (err) {
    process.env.LOCALDECIDER_TEST_PSQL_PROBLEM = (err as Error).message;
  }
}

/** In a test file: the psql a global setup exported (exportPsql), or its reason for having none. */
export function psqlFromEnv(env: NodeJS.ProcessEnv = process.env): { psql: string; env: Record<string, string> } {
  const psql = env.LOCALDECIDER_TEST_PSQL;
  if (psql === undefined) {
    throw new Error(
      env.LOCALDECIDER_TEST_PSQL_PROBLEM ??
        "no psql was prepared for this test: run it through jest (its global setup finds one)",
    );
  }
  const libraries = env.LOCALDECIDER_TEST_PSQL_LD_LIBRARY_PATH;
  return { psql, env: libraries === undefined ? {} : { LD_LIBRARY_PATH: libraries } };
}
