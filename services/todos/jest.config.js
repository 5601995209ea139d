const { availableParallelism } = require("node:os");

/** @type {import('jest').Config} */
module.exports = {
  // Jest's default, one worker fewer than the cores, is a single worker on the 2-core machines CI runs on:
  // every file then runs in turn while its tests mostly wait on sockets, databases and child processes. Two
  // workers there took the decider's suite from 337 to 204 s, and the whole run from 11.4 to 7.0 minutes.
  maxWorkers: Math.max(2, availableParallelism() - 1),
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  // PGlite's CommonJS build loads its wasm helpers through `await import(...)`, which Jest's VM cannot run
  // without --experimental-vm-modules; letting swc compile PGlite too turns those into require().
  transform: { "^.+\\.(t|j|mj|cj)s$": ["@swc/jest"] },
  transformIgnorePatterns: ["/node_modules/(?!(\\.pnpm/@electric-sql\\+pglite|@electric-sql/pglite))"],
  // A PostgreSQL server for the whole run: found, or started and stopped (test/setup/postgres.ts).
  globalSetup: "<rootDir>/test/setup/postgres.ts",
  globalTeardown: "<rootDir>/test/setup/postgres-teardown.ts",
  // The reaper kills, after each test file, the processes its tests started and left running.
  setupFilesAfterEnv: ["<rootDir>/test/setup/openapi-responses.ts", require.resolve("@localdecider/test-env/reap")],
  testTimeout: 30_000,
};
