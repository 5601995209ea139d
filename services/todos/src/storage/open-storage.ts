import { mkdir } from "node:fs/promises";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { PrismaClient } from "../generated/prisma/client";
import { lockDataDir } from "./data-dir-lock";
import { loadMigrations, type MigrationConnection, migrate, noteCleanupFailure } from "./migrate";
import { initialisePgliteDir } from "./pglite-initdb";
import { PrismaTodoRepository } from "./prisma-repository";
import type { QueryObserver, TodoRepository } from "./repository";
import { connectShared } from "./shared-adapter";
import { statementNames } from "./statement-names";
import { TurnQueue } from "./turn-queue";

/**
 * Pool limits, fixed rather than configured (the config list is closed): a dead or unreachable
 * database must turn into a prompt 500/503, never a request that hangs.
 */
export const POOL_SETTINGS = {
  /** Connections per instance. */
  max: 10,
  /** Give up opening a connection after this long. */
  connectionTimeoutMillis: 5_000,
  /** Postgres cancels a statement running longer than this (server side). */
  statement_timeout: 10_000,
  /** The client stops waiting for a reply after this long, e.g. when packets are silently dropped. */
  query_timeout: 15_000,
  /** Idle connections are closed after this long. */
  idleTimeoutMillis: 30_000,
} as const;

/**
 * Prisma client options for both storage modes. `errorFormat: "minimal"`: with any other format Prisma
 * creates an Error (a captured stack trace) on every query to point a failure at its caller's source line,
 * which measured 10-20% of Prisma's CPU per query here (README, "Performance"). Our errors are logged by
 * the error middleware with their own stack; minimal messages also keep source code out of the log.
 */
const CLIENT_OPTIONS = { errorFormat: "minimal" } as const;

export interface StorageOptions {
  /** PostgreSQL URL; when undefined the embedded PGlite database in dataDir is used. */
  databaseUrl?: string | undefined;
  /** PGlite directory (created if missing); relative paths resolve against the working directory. */
  dataDir: string;
  onQuery?: QueryObserver | undefined;
  /** Reports errors of idle pooled connections (the pool replaces them); they never crash the process. */
  onPoolError?: ((err: Error) => void) | undefined;
  /** Sees the Postgres connection pool once it exists (metrics read its figures); not called for PGlite. */
  onPool?: ((pool: pg.Pool) => void) | undefined;
}

/** Migrates the database, then builds the repository over it. Migration failures reject: do not start. */
export async function openStorage(options: StorageOptions): Promise<TodoRepository> {
  return options.databaseUrl === undefined ? openPglite(options) : openPostgres(options.databaseUrl, options);
}

async function openPostgres(databaseUrl: string, options: StorageOptions): Promise<TodoRepository> {
  await migratePostgres(databaseUrl);
  const onPoolError = options.onPoolError ?? (() => undefined);
  // The pool is built here (the same settings the adapter would use) so its figures can be read for metrics;
  // disposeExternalPool makes disposing the adapter end it (release, after $disconnect). The adapter's error listeners matter:
  // without one, an idle connection's error (database restarted, proxy cut) would crash the process.
  const pool = new pg.Pool({ connectionString: databaseUrl, ...POOL_SETTINGS });
  options.onPool?.(pool);
  // The cast only bridges two @types/pg releases (ours and the adapter's); at run time both load the same pg
  // 8.23.1, which the adapter's `instanceof pg.Pool` check needs.
  const shared = await connectShared(
    new PrismaPg(pool as unknown as ConstructorParameters<typeof PrismaPg>[0], {
      onPoolError,
      onConnectionError: onPoolError,
      disposeExternalPool: true,
      statementNameGenerator: statementNames(),
    }),
  );
  return new PrismaTodoRepository({
    prisma: new PrismaClient({ adapter: shared.factory, ...CLIENT_OPTIONS }),
    adapter: shared.adapter,
    kind: "postgres",
    release: shared.dispose,
    onQuery: options.onQuery,
  });
}

/** Applies the migrations over one dedicated connection (the advisory lock belongs to a session). */
export async function migratePostgres(databaseUrl: string): Promise<string[]> {
  const client = new pg.Client({
    connectionString: databaseUrl,
    connectionTimeoutMillis: POOL_SETTINGS.connectionTimeoutMillis,
  });
  client.on("error", () => undefined); // a lost connection surfaces as the failed query instead
  await client.connect();
  try {
    const connection: MigrationConnection = {
      query: async <Row>(sql: string, params?: unknown[]) => (await client.query(sql, params)).rows as Row[],
      exec: async (script) => {
        await client.query(script);
      },
    };
    return await migrate(connection, await loadMigrations());
  } finally {
    await client.end();
  }
}

async function openPglite(options: StorageOptions): Promise<TodoRepository> {
  const dataDir = path.resolve(options.dataDir);
  await mkdir(dataDir, { recursive: true });
  // One process per directory: a second one would silently lose writes (see data-dir-lock.ts).
  const unlock = await lockDataDir(dataDir);
  let db: PGlite | undefined;
  try {
    await initialisePgliteDir(dataDir);
    db = await PGlite.create(dataDir);
    await migratePglite(db);
  } catch (err) {
    // Cleanup failures are noted on the error that stops the start, never thrown instead of it.
    await db?.close().catch((closeErr: unknown) => noteCleanupFailure(err, "closing the database", closeErr));
    await unlock().catch((unlockErr: unknown) => noteCleanupFailure(err, "releasing the data directory", unlockErr));
    throw err;
  }
  const opened = db;
  const shared = await connectShared(new PrismaPGlite(opened));
  const release = async () => {
    try {
      await shared.dispose();
      await opened.close();
    } finally {
      await unlock();
    }
  };
  return new PrismaTodoRepository({
    prisma: new PrismaClient({ adapter: shared.factory, ...CLIENT_OPTIONS }),
    adapter: shared.adapter,
    kind: "pglite",
    release,
    onQuery: options.onQuery,
    queue: new TurnQueue(),
  });
}

export async function migratePglite(db: PGlite): Promise<string[]> {
  const connection: MigrationConnection = {
    query: async <Row>(sql: string, params?: unknown[]) => (await db.query<Row>(sql, params)).rows,
    exec: async (script) => {
      await db.exec(script);
    },
  };
  return migrate(connection, await loadMigrations());
}
