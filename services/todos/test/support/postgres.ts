import { randomBytes } from "node:crypto";
import pg from "pg";

/** The machine's PostgreSQL (trust auth); each test file gets its own fresh database on it. */
export const ADMIN_URL = process.env.TODOS_TEST_ADMIN_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";

export interface TestDatabase {
  name: string;
  url: string;
  /** Drops the database, cutting any connection still open to it. */
  drop(): Promise<void>;
}

async function admin<T>(run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

/** A new empty database `todos_test_<pid>_<random>`; names are generated, so interpolating them is safe. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `todos_test_${process.pid}_${randomBytes(4).toString("hex")}`;
  await admin((c) => c.query(`CREATE DATABASE "${name}"`));
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    drop: () => admin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => undefined),
  };
}

/** Runs one query on the given database over a short-lived connection. */
export async function queryDatabase<Row extends pg.QueryResultRow>(
  url: string,
  sql: string,
  params: unknown[] = [],
): Promise<Row[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<Row>(sql, params)).rows;
  } finally {
    await client.end();
  }
}
