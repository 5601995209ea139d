/**
 * Jest global setup, before any test file starts (so parallel files never race to unpack anything):
 * - the headless Chromium the /docs checks drive (found, or fetched once), for the files through CHROMIUM_PATH;
 * - redis-server and redis-cli for the compose Redis check (the machine's, or Debian's packages), through the
 *   variables @localdecider/test-env/redis's exportRedisPrograms sets;
 * - psql for the database-role check (the machine's, or Debian's postgresql-client), through exportPsql's.
 */
import { ensureChromium } from "@localdecider/test-env/chromium";
import { exportPsql } from "@localdecider/test-env/psql";
import { exportRedisPrograms } from "@localdecider/test-env/redis";

export default async function prepare(): Promise<void> {
  process.env.CHROMIUM_PATH = (await ensureChromium()).executablePath;
  await exportRedisPrograms();
  await exportPsql();
}
