/**
 * A Jest setup file (setupFilesAfterEnv): after each test file, whatever failed in it, kills the processes
 * its tests started through spawnTracked and left running, and says which were left.
 */
import { reapChildren } from "./processes";

// Jest's global, declared here so that this package builds without Jest's types.
declare const afterAll: (hook: () => Promise<void>) => void;

afterAll(async () => {
  const left = await reapChildren();
  if (left.length > 0) {
    process.stderr.write(
      `[test-env] killed ${left.length} process(es) this test file left running:\n  ${left.join("\n  ")}\n`,
    );
  }
});
