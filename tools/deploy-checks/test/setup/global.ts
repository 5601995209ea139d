/**
 * Jest global setup, before any test file starts (so parallel files never race to unpack anything):
 * - the headless Chromium the /docs checks drive (found, or fetched once), for the files through CHROMIUM_PATH;
 * - redis-server and redis-cli for the compose Redis check (the machine's, or Debian's packages), through the
 *   variables @localdecider/test-env/redis's exportRedisPrograms sets;
 * - psql for the database-role check (the machine's, or Debian's postgresql-client), through exportPsql's,
 *   and a PostgreSQL server for it (as the todos suites find or start one), through TODOS_TEST_ADMIN_URL;
 *   the global teardown (global-teardown.ts) stops a server this run started.
 */
import { ensureChromium } from "@localdecider/test-env/chromium";
import { ensurePostgres, type PostgresServer } from "@localdecider/test-env/postgres";
import { exportPsql } from "@localdecider/test-env/psql";
import { exportRedisPrograms } from "@localdecider/test-env/redis";

declare global {
  // Handed from the global setup to the global teardown (Jest runs both in its parent process).
  var deployChecksPostgres: PostgresServer | undefined;
}

export default async function prepare(): Promise<void> {
  process.env.CHROMIUM_PATH = (await ensureChromium()).executablePath;
  await exportRedisPrograms();
  await exportPsql();
  const postgres = await ensurePostgres();
  globalThis.deployChecksPostgres = postgres;
  process.env.TODOS_TEST_ADMIN_URL = postgres.url;
}
