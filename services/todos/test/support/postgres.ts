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

/** Writes to "TodoItem" held back by a lock in another session, so that they all start together. */
export interface HeldWrites {
  /** Resolves once `count` statements wait for the lock (checked every 20 ms, for at most 10 s). */
  waitingFor(count: number): Promise<void>;
  /** Releases the lock: the waiting statements then run at the same moment. */
  release(): Promise<void>;
}

/**
 * Holds every write to "TodoItem" until release(): an open transaction holding SHARE ROW EXCLUSIVE on it.
 * Racing creates then run truly concurrently, instead of one after the other as their client happens to
 * send them.
 */
export async function holdWrites(url: string): Promise<HeldWrites> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`BEGIN; LOCK TABLE "TodoItem" IN SHARE ROW EXCLUSIVE MODE`);
  let released = false;
  return {
    async waitingFor(count) {
      for (let i = 0; i < 500; i++) {
        const { rows } = await client.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND relation = '"TodoItem"'::regclass`,
        );
        if (rows[0]?.n === count) return;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      throw new Error(`${count} statements never waited for the lock on "TodoItem"`);
    },
    async release() {
      if (released) return;
      released = true;
      try {
        await client.query("COMMIT");
      } finally {
        await client.end();
      }
    },
  };
}
