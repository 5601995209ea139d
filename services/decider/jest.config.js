const { availableParallelism } = require("node:os");

/** @type {import('jest').Config} */
module.exports = {
  // Jest's default, one worker fewer than the cores, is a single worker on the 2-core machines CI runs on:
  // every file then runs in turn while its tests mostly wait on sockets, databases and child processes. Two
  // workers there took the decider's suite from 337 to 204 s, and the whole run from 11.4 to 7.0 minutes.
  maxWorkers: Math.max(2, availableParallelism() - 1),
  testEnvironment: "node",
  // A guard against a hang, not a speed check: Jest's 5 s default failed tests that start the built service
  // or Chromium while the machine was busy (load 15-19), and passed them alone.
  testTimeout: 30_000,
  roots: ["<rootDir>/test"],
  testMatch: ["**/*.test.ts"],
  // Needs a real llama-server binary: run by `pnpm test:llama-server` only.
  testPathIgnorePatterns: ["/node_modules/", "\\.llama-server\\.test\\.ts$"],
  setupFiles: ["<rootDir>/test/setup/loopback-only.ts"],
  // Kills, after each test file, the processes its tests started and left running (a failed start, a throw).
  setupFilesAfterEnv: ["<rootDir>/test/setup/openapi-responses.ts", require.resolve("@localdecider/test-env/reap")],
  // A Redis for the shared-limit suites and redis-server for those that start their own (test/setup/redis.ts),
  // and the headless Chromium of the playground's browser test (test/setup/global.ts).
  globalSetup: "<rootDir>/test/setup/global.ts",
  globalTeardown: "<rootDir>/test/setup/redis-teardown.ts",
  transform: { "^.+\\.ts$": ["@swc/jest"] },
};
