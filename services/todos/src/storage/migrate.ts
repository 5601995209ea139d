import { createHash, randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";

/**
 * Applies the committed Prisma migrations (prisma/migrations/<name>/migration.sql) the way
 * `prisma migrate deploy` does, keeping its `_prisma_migrations` table exactly, so either tool can take
 * over from the other. It exists because `prisma migrate deploy` needs a native engine these machines
 * cannot download (see README.md, "Migrations"); it is the one way migrations are applied: by the tests,
 * by the embedded default and by the deployed service at start.
 */

/** Prisma's own advisory lock key: our runner and a real `prisma migrate deploy` serialize on it. */
export const PRISMA_ADVISORY_LOCK_KEY = 72707369;

/** prisma/migrations of this package, found upwards from this file (src/, dist/ or a deployed copy). */
export const MIGRATIONS_DIR = findMigrationsDir(__dirname);

function findMigrationsDir(start: string): string {
  for (let dir = start; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, "prisma", "migrations");
    if (existsSync(candidate)) return candidate;
    if (path.dirname(dir) === dir) return path.resolve(start, "..", "..", "prisma", "migrations");
  }
}

/** The DDL Prisma's schema engine uses for its bookkeeping table on PostgreSQL. */
const CREATE_MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;

/** The little a migration needs from a connection; one session throughout (the lock is per session). */
export interface MigrationConnection {
  /** One statement with $1.. parameters. */
  query<Row>(sql: string, params?: unknown[]): Promise<Row[]>;
  /** A script of several statements, no parameters. */
  exec(script: string): Promise<void>;
}

export interface Migration {
  name: string;
  sql: string;
  /** sha256 hex of the migration.sql bytes, as Prisma records it. */
  checksum: string;
}

export class MigrationError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "MigrationError";
  }
}

/** An error that cleanup steps run because of it also failed on; see noteCleanupFailure. */
export type ErrorWithCleanupErrors = Error & { cleanupErrors?: unknown[] };

/**
 * Records on `err` that a cleanup step run because of it (a rollback, releasing a lock, closing a connection)
 * failed too. When a connection dies mid-migration every cleanup fails after it, and the error to report is
 * still the first one: it stays the one thrown and logged, its message says which cleanup failed and why,
 * and the cleanup errors themselves are kept in its `cleanupErrors`.
 */
export function noteCleanupFailure(err: unknown, step: string, failure: unknown): void {
  if (!(err instanceof Error)) return;
  const target = err as ErrorWithCleanupErrors;
  target.cleanupErrors = [...(target.cleanupErrors ?? []), failure];
  target.message += ` (then ${step} failed too: ${failure instanceof Error ? failure.message : String(failure)})`;
}

export async function loadMigrations(dir: string = MIGRATIONS_DIR): Promise<Migration[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const names = entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  return Promise.all(
    names.map(async (name) => {
      const bytes = await readFile(path.join(dir, name, "migration.sql"));
      return { name, sql: bytes.toString("utf8"), checksum: createHash("sha256").update(bytes).digest("hex") };
    }),
  );
}

interface AppliedRow {
  migration_name: string;
  checksum: string;
  finished_at: Date | null;
  rolled_back_at: Date | null;
}

/**
 * Applies every migration not yet finished, each in its own transaction, under Prisma's advisory lock so
 * that instances starting together apply each migration once. Refuses (throws MigrationError) when an
 * applied migration's file has changed or an earlier attempt failed, as `prisma migrate deploy` does.
 * Returns the names applied by this call.
 */
export async function migrate(db: MigrationConnection, migrations: Migration[]): Promise<string[]> {
  await db.query(`SELECT pg_advisory_lock(${PRISMA_ADVISORY_LOCK_KEY})`);
  let done: string[];
  try {
    done = await applyPending(db, migrations);
  } catch (err) {
    // The failure to report is the migration's: if unlocking fails too (the connection often died with the
    // migration, and the session's lock with it), that is only noted on it.
    await db
      .query(`SELECT pg_advisory_unlock(${PRISMA_ADVISORY_LOCK_KEY})`)
      .catch((unlockErr: unknown) => noteCleanupFailure(err, "releasing the migration lock", unlockErr));
    throw err;
  }
  await db.query(`SELECT pg_advisory_unlock(${PRISMA_ADVISORY_LOCK_KEY})`);
  return done;
}

async function applyPending(db: MigrationConnection, migrations: Migration[]): Promise<string[]> {
  await db.exec(CREATE_MIGRATIONS_TABLE);
  const rows = await db.query<AppliedRow>(
    `SELECT "migration_name", "checksum", "finished_at", "rolled_back_at" FROM "_prisma_migrations" ORDER BY "started_at"`,
  );
  const failed = rows.find((r) => r.finished_at === null && r.rolled_back_at === null);
  if (failed) {
    throw new MigrationError(
      `Migration ${failed.migration_name} failed earlier and was not resolved; fix the database and mark it ` +
        `with \`prisma migrate resolve\` before starting (Prisma error P3009).`,
    );
  }
  const applied = new Map(
    rows.filter((r) => r.finished_at !== null && r.rolled_back_at === null).map((r) => [r.migration_name, r]),
  );
  const done: string[] = [];
  for (const migration of migrations) {
    const row = applied.get(migration.name);
    if (row) {
      if (row.checksum !== migration.checksum) {
        throw new MigrationError(
          `Migration ${migration.name} was modified after it was applied (checksum ${row.checksum} in the ` +
            `database, ${migration.checksum} on disk); restore the file instead of editing an applied migration.`,
        );
      }
      continue;
    }
    await applyOne(db, migration);
    done.push(migration.name);
  }
  return done;
}

// The bookkeeping row and the migration commit or roll back together, so a failed migration leaves the
// database as it was and nothing recorded: the next start retries it (Prisma, which does not wrap the
// script in a transaction, would instead record a failed row that needs `migrate resolve`).
async function applyOne(db: MigrationConnection, migration: Migration): Promise<void> {
  const id = randomUUID();
  await db.exec("BEGIN");
  try {
    await db.query(
      `INSERT INTO "_prisma_migrations" ("id", "checksum", "migration_name", "started_at", "applied_steps_count") VALUES ($1, $2, $3, now(), 0)`,
      [id, migration.checksum, migration.name],
    );
    await db.exec(migration.sql);
    await db.query(
      `UPDATE "_prisma_migrations" SET "finished_at" = clock_timestamp(), "applied_steps_count" = 1 WHERE "id" = $1`,
      [id],
    );
    await db.exec("COMMIT");
  } catch (err) {
    const failure = new MigrationError(
      `Migration ${migration.name} failed: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
    await db.exec("ROLLBACK").catch((rollbackErr: unknown) => noteCleanupFailure(failure, "rolling back", rollbackErr));
    throw failure;
  }
}
