import { mkdir, mkdtemp, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { repoPath } from "../src/repo";

/** The root `pnpm test` runner; plain CommonJS so it runs before anything is installed. */
const runner = require(repoPath("scripts", "test.js")) as {
  installReason(root: string): string | undefined;
  buildReason(root: string): string | undefined;
  builtEntries(manifest: { main?: string; exports?: Record<string, unknown> }): string[];
};

let root: string;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "test-command-"));
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Writes `text` to `root/file`, dated `secondsAgo` seconds in the past. */
async function put(file: string, text: string, secondsAgo: number): Promise<void> {
  const full = path.join(root, file);
  await mkdir(path.dirname(full), { recursive: true });
  await writeFile(full, text);
  const when = new Date(Date.now() - secondsAgo * 1000);
  await utimes(full, when, when);
}

describe("pnpm test: the install step", () => {
  it("installs when node_modules is missing", async () => {
    await put("pnpm-lock.yaml", "lockfileVersion: '9.0'\n", 10);
    expect(runner.installReason(root)).toBe("node_modules is not installed");
  });

  it("installs when node_modules was installed from another lockfile, and not when from this one", async () => {
    await put("pnpm-lock.yaml", "lockfileVersion: '9.0'\npackages: {a: 1}\n", 10);
    await put("node_modules/.pnpm/lock.yaml", "lockfileVersion: '9.0'\npackages: {a: 0}\n", 10);
    expect(runner.installReason(root)).toBe("node_modules differs from pnpm-lock.yaml");
    await put("node_modules/.pnpm/lock.yaml", "lockfileVersion: '9.0'\npackages: {a: 1}\n", 10);
    expect(runner.installReason(root)).toBeUndefined();
  });
});

describe("pnpm test: the build step", () => {
  const manifest = JSON.stringify({
    name: "kit",
    main: "dist/index.js",
    exports: { ".": { default: "./dist/index.js" }, "./test-utils": { default: "./dist/test-utils.js" } },
    scripts: { build: "tsc" },
  });

  beforeEach(async () => {
    await put("tsconfig.base.json", "{}", 100);
    await put("packages/kit/package.json", manifest, 100);
    await put("packages/kit/src/index.ts", "export {};", 100);
    await put("tools/checks/package.json", JSON.stringify({ name: "checks", scripts: { test: "jest" } }), 1);
  });

  it("builds when a built entry is missing (a fresh clone)", async () => {
    await put("packages/kit/dist/index.js", "", 50);
    expect(runner.buildReason(root)).toBe("packages/kit/dist/test-utils.js is missing");
  });

  it("builds nothing when every entry is newer than the sources (CI's build step ran)", async () => {
    await put("packages/kit/dist/index.js", "", 50);
    await put("packages/kit/dist/test-utils.js", "", 50);
    expect(runner.buildReason(root)).toBeUndefined();
  });

  it("builds when a source, the package's manifest or the shared tsconfig changed after the build", async () => {
    await put("packages/kit/dist/index.js", "", 50);
    await put("packages/kit/dist/test-utils.js", "", 50);
    await put("packages/kit/src/deep/new.ts", "export {};", 10);
    expect(runner.buildReason(root)).toBe("packages/kit changed since dist/index.js was built");
    await put("packages/kit/src/deep/new.ts", "export {};", 100);
    await put("tsconfig.base.json", "{}", 10);
    expect(runner.buildReason(root)).toBe("packages/kit changed since dist/index.js was built");
  });

  it("ignores the Prisma client a build generates under src/", async () => {
    await put("packages/kit/dist/index.js", "", 50);
    await put("packages/kit/dist/test-utils.js", "", 50);
    await put("packages/kit/src/generated/prisma/client.ts", "export {};", 10);
    expect(runner.buildReason(root)).toBeUndefined();
  });

  it("reads the built entries from main and the exports' default targets, not the type declarations", () => {
    expect(
      runner.builtEntries({
        main: "dist/main.js",
        exports: {
          "./config": { types: "./dist/config.d.ts", default: "./dist/config.js" },
          "./package.json": "./package.json",
        },
      }),
    ).toStrictEqual(["dist/main.js", "dist/config.js"]);
  });
});
