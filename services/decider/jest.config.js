/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  testMatch: ["**/*.test.ts"],
  // Needs a real llama-server binary: run by `pnpm test:llama-server` only.
  testPathIgnorePatterns: ["/node_modules/", "\\.llama-server\\.test\\.ts$"],
  setupFiles: ["<rootDir>/test/setup/loopback-only.ts"],
  setupFilesAfterEnv: ["<rootDir>/test/setup/openapi-responses.ts"],
  transform: { "^.+\\.ts$": ["@swc/jest"] },
};
