/**
 * Jest global setup: finds (or fetches, once) the headless Chromium the /docs checks drive, before any test
 * file starts, so parallel files never race to unpack it. The test files read the result from CHROMIUM_PATH.
 */
import { ensureChromium } from "@localdecider/test-env/chromium";

export default async function findChromium(): Promise<void> {
  process.env.CHROMIUM_PATH = (await ensureChromium()).executablePath;
}
