/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  transform: { "^.+\\.ts$": ["@swc/jest"] },
  // The fallbacks are fetched for real on a machine that lacks them (PostgreSQL, Chromium, Debian's Redis
  // through apt-get): a first run there takes tens of seconds per fetch.
  testTimeout: 180_000,
};
