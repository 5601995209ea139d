/**
 * Jest global setup: a PostgreSQL server for the suites (the one at TODOS_TEST_ADMIN_URL, default
 * 127.0.0.1:5432, when it answers; else the machine's cluster or an embedded one from npm, see
 * @localdecider/test-env/postgres). Its admin URL reaches every test file through TODOS_TEST_ADMIN_URL;
 * the global teardown stops a server this run started. The suites also start the built service
 * (dist/main.js): say how to build it rather than fail later with a missing file.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { ensurePostgres, type PostgresServer } from "@localdecider/test-env/postgres";

declare global {
  // Handed from the global setup to the global teardown (Jest runs both in its parent process).
  var todosTestPostgres: PostgresServer | undefined;
}

export default async function preparePostgres(): Promise<void> {
  const main = path.join(__dirname, "..", "..", "dist", "main.js");
  if (!existsSync(main)) {
    throw new Error(`${main} is missing: run \`pnpm test\` from the repository root (it builds), or \`pnpm build\``);
  }
  const server = await ensurePostgres();
  globalThis.todosTestPostgres = server;
  process.env.TODOS_TEST_ADMIN_URL = server.url;
}
