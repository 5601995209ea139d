/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  // PGlite's CommonJS build loads its wasm helpers through `await import(...)`, which Jest's VM cannot run
  // without --experimental-vm-modules; letting swc compile PGlite too turns those into require().
  transform: { "^.+\\.(t|j|mj|cj)s$": ["@swc/jest"] },
  transformIgnorePatterns: ["/node_modules/(?!(\\.pnpm/@electric-sql\\+pglite|@electric-sql/pglite))"],
  setupFilesAfterEnv: ["<rootDir>/test/setup/openapi-responses.ts"],
  testTimeout: 30_000,
};
