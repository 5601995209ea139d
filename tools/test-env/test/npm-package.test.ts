import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import {
  cacheDir,
  checkTarball,
  fileIntegrity,
  IntegrityError,
  type NpmPackage,
  packageDir,
  unpackNpmPackage,
} from "../src/npm-package";

const run = promisify(execFile);

describe("the test cache", () => {
  it("is LOCALDECIDER_TEST_CACHE when set", () => {
    expect(cacheDir({ LOCALDECIDER_TEST_CACHE: "/srv/cache" }, 1000)).toBe(path.resolve("/srv/cache"));
  });

  it("is under XDG_CACHE_HOME for a user, and in /var/cache for root (whose home the postgres user cannot enter)", () => {
    expect(cacheDir({ XDG_CACHE_HOME: "/home/u/.cache" }, 1000)).toBe(path.join("/home/u/.cache", "localdecider-test"));
    expect(cacheDir({}, 0)).toBe("/var/cache/localdecider-test");
  });

  it("keeps one folder per exact package version", () => {
    expect(packageDir({ name: "@sparticuz/chromium", version: "153.0.0" }, "/c")).toBe(
      path.join("/c", "@sparticuz+chromium@153.0.0"),
    );
  });
});

const NAME = "@localdecider-test/fixture";
const VERSION = "1.0.0";

/** A package tarball as npm publishes one (`package/` inside a gzipped tar), holding `hello.txt`. */
async function makeTarball(dir: string, label: string, hello: string): Promise<Buffer> {
  const root = path.join(dir, label);
  await mkdir(path.join(root, "package"), { recursive: true });
  await writeFile(path.join(root, "package", "package.json"), JSON.stringify({ name: NAME, version: VERSION }));
  await writeFile(path.join(root, "package", "hello.txt"), hello);
  const file = path.join(dir, `${label}.tgz`);
  await run("tar", ["-czf", file, "-C", root, "package"]);
  return readFile(file);
}

const sri = (bytes: Buffer) => `sha512-${createHash("sha512").update(bytes).digest("base64")}`;

/**
 * A stand-in for the npm registry on 127.0.0.1: the package's metadata and one tarball, whatever `serving`
 * holds, with a `dist.integrity` that matches those bytes (as a compromised registry or mirror would serve
 * it), so npm itself accepts them. Counts the requests it answers.
 */
async function standInRegistry(serving: { tarball: Buffer }) {
  let requests = 0;
  const server = http.createServer((req, res) => {
    requests++;
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const url = decodeURIComponent(req.url ?? "");
    if (url === `/${NAME}`) {
      const bytes = serving.tarball;
      const dist = {
        tarball: `${base}/fixture-${VERSION}.tgz`,
        integrity: sri(bytes),
        shasum: createHash("sha1").update(bytes).digest("hex"),
      };
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({
          name: NAME,
          "dist-tags": { latest: VERSION },
          versions: { [VERSION]: { name: NAME, version: VERSION, dist } },
        }),
      );
    } else if (url === `/fixture-${VERSION}.tgz`) {
      res.setHeader("content-type", "application/octet-stream");
      res.end(serving.tarball);
    } else {
      res.writeHead(404).end("{}");
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    requests: () => requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe("unpackNpmPackage against a stand-in registry", () => {
  let dir: string;
  let genuine: Buffer;
  let tampered: Buffer;
  let pinned: NpmPackage;
  let npmEnv: NodeJS.ProcessEnv;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "localdecider-npm-package-"));
    genuine = await makeTarball(dir, "genuine", "the published bytes\n");
    tampered = await makeTarball(dir, "tampered", "other bytes\n");
    pinned = { name: NAME, version: VERSION, integrity: sri(genuine) };
    const userconfig = path.join(dir, "npmrc");
    await writeFile(userconfig, "");
    npmEnv = {
      ...process.env,
      // Only the stand-in: an npm cache of the test's own, no user configuration, nothing else contacted.
      npm_config_userconfig: userconfig,
      npm_config_cache: path.join(dir, "npm-cache"),
      npm_config_audit: "false",
      npm_config_fund: "false",
      npm_config_update_notifier: "false",
      npm_config_fetch_retries: "0",
    };
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** A fresh cache folder of the tooling's own and an empty npm cache, so each test fetches. */
  function fresh(label: string) {
    const cache = path.join(dir, `cache-${label}`);
    const env = { ...npmEnv, npm_config_cache: path.join(dir, `npm-cache-${label}`) };
    return { cache, env };
  }

  it("when the registry serves the pinned bytes, unpacks them once and then reuses the folder without asking again", async () => {
    const registry = await standInRegistry({ tarball: genuine });
    try {
      const { cache, env } = fresh("genuine");
      const options = { cache, env: { ...env, npm_config_registry: registry.url }, say: () => undefined };
      const unpacked = await unpackNpmPackage(pinned, options);
      expect(unpacked).toBe(packageDir(pinned, cache));
      expect(readFileSync(path.join(unpacked, "hello.txt"), "utf8")).toBe("the published bytes\n");
      const asked = registry.requests();
      expect(asked).toBeGreaterThan(0);
      expect(await unpackNpmPackage(pinned, options)).toBe(unpacked);
      expect(registry.requests()).toBe(asked);
    } finally {
      await registry.close();
    }
  });

  it("when the registry serves other bytes for the pinned version (with a dist.integrity to match), refuses them and unpacks nothing", async () => {
    const registry = await standInRegistry({ tarball: tampered });
    try {
      const { cache, env } = fresh("tampered");
      const said: string[] = [];
      const attempt = unpackNpmPackage(pinned, {
        cache,
        env: { ...env, npm_config_registry: registry.url },
        say: (m) => said.push(m),
      });
      await expect(attempt).rejects.toThrow(IntegrityError);
      await expect(attempt).rejects.toThrow(
        `${NAME}@${VERSION}: the tarball npm handed over is not the published one, so it is not unpacked. ` +
          `Its sha512 is ${sri(tampered)}; the registry published ${pinned.integrity} for this version`,
      );
      expect(registry.requests()).toBeGreaterThan(0);
      // Neither the package folder nor a half-made one is left.
      expect(readdirSync(cache)).toStrictEqual([]);
    } finally {
      await registry.close();
    }
  });

  it("when npm's cache holds other bytes for the pinned version, refuses them too, with no registry to ask", async () => {
    const { cache, env } = fresh("cached");
    const registry = await standInRegistry({ tarball: tampered });
    const withRegistry = { ...env, npm_config_registry: registry.url };
    try {
      // npm keeps what it fetched: the tampered tarball is now in its cache.
      await expect(unpackNpmPackage(pinned, { cache, env: withRegistry, say: () => undefined })).rejects.toThrow(
        IntegrityError,
      );
    } finally {
      await registry.close();
    }
    // The registry is gone: npm can only hand over its cached copy (--prefer-offline), which is checked as well.
    const attempt = unpackNpmPackage(pinned, { cache, env: withRegistry, say: () => undefined });
    await expect(attempt).rejects.toThrow(IntegrityError);
    await expect(attempt).rejects.toThrow(`Its sha512 is ${sri(tampered)}`);
    expect(readdirSync(cache)).toStrictEqual([]);
  });

  it("when an unpacked folder was made without this pin (an older run), fetches and checks the tarball again", async () => {
    const registry = await standInRegistry({ tarball: genuine });
    try {
      const { cache, env } = fresh("older");
      const older = packageDir(pinned, cache);
      await mkdir(older, { recursive: true });
      await writeFile(path.join(older, "hello.txt"), "unpacked by an older run, never checked\n");
      await writeFile(path.join(older, ".localdecider-ready"), `${NAME}@${VERSION}\n`);
      const unpacked = await unpackNpmPackage(pinned, {
        cache,
        env: { ...env, npm_config_registry: registry.url },
        say: () => undefined,
      });
      expect(registry.requests()).toBeGreaterThan(0);
      expect(readFileSync(path.join(unpacked, "hello.txt"), "utf8")).toBe("the published bytes\n");
    } finally {
      await registry.close();
    }
  });
});

describe("checkTarball", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "localdecider-check-tarball-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("accepts a file whose sha512 is the pinned integrity, and refuses one whose bytes differ by one", async () => {
    const file = path.join(dir, "a.tgz");
    const bytes = Buffer.from("some tarball bytes");
    await writeFile(file, bytes);
    const pkg = { name: "p", version: "1.0.0", integrity: sri(bytes) };
    expect(await fileIntegrity(file)).toBe(pkg.integrity);
    await expect(checkTarball(file, pkg)).resolves.toBeUndefined();
    bytes[0] = (bytes[0] ?? 0) ^ 1;
    await writeFile(file, bytes);
    await expect(checkTarball(file, pkg)).rejects.toThrow(IntegrityError);
  });

  it("refuses a pin that is not a sha512 SRI hash (sha1 shasum, empty)", async () => {
    const file = path.join(dir, "b.tgz");
    await writeFile(file, "x");
    for (const integrity of ["", "sha1-C+7Hteo/D9vJXQ3UfzxbwnXaijM=", "11f6ad8ec52a2984abaafd7c3b516503785c2072"]) {
      await expect(checkTarball(file, { name: "p", version: "1.0.0", integrity })).rejects.toThrow(
        `p@1.0.0: the pinned integrity "${integrity}" is not a sha512 SRI hash`,
      );
    }
  });
});
