/** @type {import('jest').Config} */
module.exports = {
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
