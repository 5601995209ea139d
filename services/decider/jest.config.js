/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  testMatch: ["**/*.test.ts"],
  // Needs a real llama-server binary: run by `pnpm test:llama-server` only.
  testPathIgnorePatterns: ["/node_modules/", "\\.llama-server\\.test\\.ts$"],
  setupFiles: ["<rootDir>/test/setup/loopback-only.ts"],
  // Kills, after each test file, the processes its tests started and left running (a failed start, a throw).
  setupFilesAfterEnv: ["<rootDir>/test/setup/openapi-responses.ts", require.resolve("@localdecider/test-env/reap")],
  // A Redis for the shared-limit suites and redis-server for those that start their own (test/setup/redis.ts).
  globalSetup: "<rootDir>/test/setup/redis.ts",
  globalTeardown: "<rootDir>/test/setup/redis-teardown.ts",
  transform: { "^.+\\.ts$": ["@swc/jest"] },
};
