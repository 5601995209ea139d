/**
 * Jest global setup, before any test file starts (so parallel files never race to fetch anything): the Redis
 * the shared-limit suites use (redis.ts), and the headless Chromium the playground's browser test drives
 * (@localdecider/test-env/chromium: CHROMIUM_PATH, the machine's Chrome or Chromium, or one from npm), handed
 * to the test files through CHROMIUM_PATH.
 */
import { ensureChromium } from "@localdecider/test-env/chromium";
import prepareRedis from "./redis";

export default async function prepare(): Promise<void> {
  await prepareRedis();
  process.env.CHROMIUM_PATH = (await ensureChromium()).executablePath;
}
