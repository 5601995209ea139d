#!/usr/bin/env node
/**
 * `pnpm test`: every package's suite, after doing only what is missing for them to run.
 *
 * 1. dependencies: `pnpm install --frozen-lockfile` only when node_modules was not installed from this
 *    pnpm-lock.yaml (pnpm keeps a copy of the lockfile it installed from in node_modules/.pnpm/lock.yaml);
 * 2. build: `pnpm run build` only when a package's built entry is missing or older than its sources
 *    (the suites start dist/main.js and import the packages' dist/ through their exports);
 * 3. lint and typecheck (`pnpm run lint`, `pnpm run typecheck`: a few seconds), unless
 *    LOCALDECIDER_STATIC_CHECKS=done says the caller already ran them (CI's workflow does, as steps of its own);
 * 4. the suites, one package at a time (`pnpm -r --workspace-concurrency=1 test`). The todos and
 *    deploy-checks suites find or start PostgreSQL and Chromium themselves (@localdecider/test-env).
 *
 * So `pnpm test` alone is the whole gate (what .ci/run runs), and CI runs each step once: its install and
 * build steps leave nothing for steps 1 and 2 to do, and it marks step 3 done.
 *
 * Plain CommonJS with no dependencies: it runs on a fresh clone, before anything is installed.
 */
const { spawnSync } = require("node:child_process");
const { existsSync, readdirSync, readFileSync, statSync } = require("node:fs");
const path = require("node:path");

const ROOT = path.resolve(__dirname, "..");

function say(message) {
  process.stderr.write(`[pnpm test] ${message}\n`);
}

/** Why an install is needed, or undefined when node_modules was installed from this very lockfile. */
function installReason(root = ROOT) {
  const installed = path.join(root, "node_modules", ".pnpm", "lock.yaml");
  if (!existsSync(installed)) return "node_modules is not installed";
  const lockfile = readFileSync(path.join(root, "pnpm-lock.yaml"), "utf8");
  return readFileSync(installed, "utf8") === lockfile ? undefined : "node_modules differs from pnpm-lock.yaml";
}

/** Newest modification time (ms) of the files under `target` (a file or a folder), skipping `skip` folders. */
function newestMtime(target, skip) {
  if (!existsSync(target)) return 0;
  const stat = statSync(target);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = 0;
  for (const entry of readdirSync(target, { withFileTypes: true })) {
    if (skip.includes(entry.name)) continue;
    newest = Math.max(newest, newestMtime(path.join(target, entry.name), skip));
  }
  return newest;
}

/** A package's built entry files: `main` and every `default` target of its `exports`. */
function builtEntries(manifest) {
  const entries = manifest.main ? [manifest.main] : [];
  for (const target of Object.values(manifest.exports ?? {})) {
    if (typeof target === "object" && target.default) entries.push(target.default);
  }
  return entries.map((entry) => path.posix.normalize(entry)).filter((entry) => entry.startsWith("dist/"));
}

/** The sources a package's build reads; the Prisma client it generates under src/ is output, not input. */
const BUILD_INPUTS = ["src", "prisma", "prisma.config.ts", "package.json", "tsconfig.json", "tsconfig.build.json"];

/**
 * Why a build is needed (the first package whose built entry is missing or older than a source), or
 * undefined when every package with a build script is up to date.
 */
function buildReason(root = ROOT) {
  const shared = newestMtime(path.join(root, "tsconfig.base.json"), []);
  for (const group of ["packages", "services", "tools"]) {
    const groupDir = path.join(root, group);
    if (!existsSync(groupDir)) continue;
    for (const name of readdirSync(groupDir).sort()) {
      const dir = path.join(groupDir, name);
      const manifestFile = path.join(dir, "package.json");
      if (!existsSync(manifestFile)) continue;
      const manifest = JSON.parse(readFileSync(manifestFile, "utf8"));
      if (!manifest.scripts?.build) continue;
      const sources = Math.max(
        shared,
        ...BUILD_INPUTS.map((input) => newestMtime(path.join(dir, input), ["generated"])),
      );
      for (const entry of builtEntries(manifest)) {
        const file = path.join(dir, entry);
        if (!existsSync(file)) return `${group}/${name}/${entry} is missing`;
        if (statSync(file).mtimeMs < sources) return `${group}/${name} changed since ${entry} was built`;
      }
    }
  }
  return undefined;
}

function pnpm(args) {
  say(`$ pnpm ${args.join(" ")}`);
  const started = Date.now();
  const result = spawnSync("pnpm", args, { cwd: ROOT, stdio: "inherit", shell: process.platform === "win32" });
  if (result.error) throw result.error;
  const seconds = Math.round((Date.now() - started) / 1000);
  if (result.status !== 0) {
    say(`pnpm ${args.join(" ")} failed after ${seconds} s`);
    process.exit(result.status ?? 1);
  }
  say(`pnpm ${args.join(" ")}: done in ${seconds} s`);
}

/** Runs `pnpm args` when `reason` says why the step is needed; otherwise says it has nothing to do. */
function step(name, reason, args, upToDate) {
  if (!reason) return say(`${name}: ${upToDate}`);
  say(`${name}: ${reason}`);
  pnpm(args);
}

function main() {
  const started = Date.now();
  step("dependencies", installReason(), ["install", "--frozen-lockfile"], "installed from this pnpm-lock.yaml");
  step("build", buildReason(), ["run", "build"], "every package's dist/ is newer than its sources");
  if (process.env.LOCALDECIDER_STATIC_CHECKS === "done") {
    say("lint and typecheck: already run (LOCALDECIDER_STATIC_CHECKS=done)");
  } else {
    pnpm(["run", "lint"]);
    pnpm(["run", "typecheck"]);
  }
  pnpm(["-r", "--workspace-concurrency=1", "test"]);
  say(`all suites passed in ${Math.round((Date.now() - started) / 1000)} s`);
}

if (require.main === module) main();

module.exports = { installReason, buildReason, builtEntries };
