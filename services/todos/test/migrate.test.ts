import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { Prisma } from "../src/generated/prisma/client";
import {
  type ErrorWithCleanupErrors,
  loadMigrations,
  type MigrationConnection,
  MigrationError,
  migrate,
} from "../src/storage/migrate";
import { migratePglite, migratePostgres, openStorage } from "../src/storage/open-storage";
import { createTestDatabase, queryDatabase, type TestDatabase } from "./support/postgres";

const INIT = "20261122044500_init";
const LIST_SIZE = "20261125190000_todo_list_size";
const LIST_ORDER = "20261208020000_list_order_seq";
const ALL = [INIT, LIST_SIZE, LIST_ORDER];

interface MigrationRow {
  id: string;
  checksum: string;
  migration_name: string;
  finished_at: Date | null;
  rolled_back_at: Date | null;
  started_at: Date;
  applied_steps_count: number;
  logs: string | null;
}

/** A migration connection over one pg client, as the service builds it. */
function connectionOver(client: pg.Client): MigrationConnection {
  return {
    query: async <Row>(sql: string, params?: unknown[]) => (await client.query(sql, params)).rows as Row[],
    exec: async (script: string) => {
      await client.query(script);
    },
  };
}

/** What a promise rejected with (fails the test if it resolved). */
async function rejection(promise: Promise<unknown>): Promise<ErrorWithCleanupErrors> {
  const outcome = await promise.then(
    () => ({ rejected: false as const }),
    (err: unknown) => ({ rejected: true as const, err }),
  );
  if (!outcome.rejected) throw new Error("expected a rejection");
  expect(outcome.err).toBeInstanceOf(Error);
  return outcome.err as ErrorWithCleanupErrors;
}

describe("migrate() on PostgreSQL", () => {
  let db: TestDatabase;
  beforeEach(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await db.drop();
  });
  const rows = () => queryDatabase<MigrationRow>(db.url, `SELECT * FROM "_prisma_migrations"`);

  it("when the database is empty, applies every migration and records it as Prisma does", async () => {
    expect(await migratePostgres(db.url)).toStrictEqual(ALL);
    const checksums = await Promise.all(
      ALL.map(async (name) =>
        createHash("sha256")
          .update(await readFile(path.join(__dirname, "..", "prisma", "migrations", name, "migration.sql")))
          .digest("hex"),
      ),
    );
    expect(await rows()).toStrictEqual(
      ALL.map((name, i) => ({
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        checksum: checksums[i],
        migration_name: name,
        finished_at: expect.any(Date),
        rolled_back_at: null,
        started_at: expect.any(Date),
        applied_steps_count: 1,
        logs: null,
      })),
    );
  });

  it("when the bookkeeping table is created, its columns match Prisma's _prisma_migrations exactly", async () => {
    await migratePostgres(db.url);
    const columns = await queryDatabase(
      db.url,
      `SELECT column_name, data_type, character_maximum_length, is_nullable, column_default
         FROM information_schema.columns WHERE table_name = '_prisma_migrations' ORDER BY ordinal_position`,
    );
    expect(columns).toStrictEqual([
      {
        column_name: "id",
        data_type: "character varying",
        character_maximum_length: 36,
        is_nullable: "NO",
        column_default: null,
      },
      {
        column_name: "checksum",
        data_type: "character varying",
        character_maximum_length: 64,
        is_nullable: "NO",
        column_default: null,
      },
      {
        column_name: "finished_at",
        data_type: "timestamp with time zone",
        character_maximum_length: null,
        is_nullable: "YES",
        column_default: null,
      },
      {
        column_name: "migration_name",
        data_type: "character varying",
        character_maximum_length: 255,
        is_nullable: "NO",
        column_default: null,
      },
      {
        column_name: "logs",
        data_type: "text",
        character_maximum_length: null,
        is_nullable: "YES",
        column_default: null,
      },
      {
        column_name: "rolled_back_at",
        data_type: "timestamp with time zone",
        character_maximum_length: null,
        is_nullable: "YES",
        column_default: null,
      },
      {
        column_name: "started_at",
        data_type: "timestamp with time zone",
        character_maximum_length: null,
        is_nullable: "NO",
        column_default: "now()",
      },
      {
        column_name: "applied_steps_count",
        data_type: "integer",
        character_maximum_length: null,
        is_nullable: "NO",
        column_default: "0",
      },
    ]);
  });

  it("when run a second time, applies nothing and leaves the records as they were", async () => {
    await migratePostgres(db.url);
    const before = await rows();
    expect(await migratePostgres(db.url)).toStrictEqual([]);
    expect(await rows()).toStrictEqual(before);
  });

  it("when two runners start at once on a fresh database, each migration is applied exactly once", async () => {
    const results = await Promise.all([migratePostgres(db.url), migratePostgres(db.url), migratePostgres(db.url)]);
    expect(results.flat()).toStrictEqual(ALL);
    expect((await rows()).map((r) => r.migration_name)).toStrictEqual(ALL);
  });

  it("when an applied migration's file has changed, refuses with a clear error", async () => {
    await migratePostgres(db.url);
    await queryDatabase(db.url, `UPDATE "_prisma_migrations" SET checksum = 'abc'`);
    await expect(migratePostgres(db.url)).rejects.toThrow(
      new MigrationError(
        `Migration ${INIT} was modified after it was applied (checksum abc in the database, ` +
          `${(await loadMigrations())[0]?.checksum} on disk); restore the file instead of editing an applied migration.`,
      ),
    );
  });

  it("when an earlier attempt failed and was not resolved, refuses to run (as Prisma's P3009)", async () => {
    await migratePostgres(db.url);
    await queryDatabase(db.url, `UPDATE "_prisma_migrations" SET finished_at = NULL`);
    await expect(migratePostgres(db.url)).rejects.toThrow(/Migration 20261122044500_init failed earlier/);
  });

  it("when a migration fails, rolls it back entirely and records nothing, so a fixed file can be retried", async () => {
    const good = await loadMigrations();
    const broken = { name: "20300101000000_broken", sql: `CREATE TABLE "x" (id int);\nSELECT nope;`, checksum: "c" };
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const connection = connectionOver(client);
      await expect(migrate(connection, [...good, broken])).rejects.toThrow(/Migration 20300101000000_broken failed/);
      expect((await rows()).map((r) => r.migration_name)).toStrictEqual(ALL);
      expect(await queryDatabase(db.url, `SELECT to_regclass('x') AS t`)).toStrictEqual([{ t: null }]);
      // The lock was released: a later run proceeds.
      expect(await migrate(connection, good)).toStrictEqual([]);
    } finally {
      await client.end();
    }
  });

  it("when the connection dies during a migration, the migration's error surfaces, with the failed rollback and unlock attached to it", async () => {
    const dies = {
      name: "20300101000000_dies",
      sql: `CREATE TABLE "x" (id int);\nSELECT pg_terminate_backend(pg_backend_pid());`,
      checksum: "d",
    };
    const client = new pg.Client({ connectionString: db.url });
    client.on("error", () => undefined); // the lost connection surfaces as the failed queries instead
    await client.connect();
    try {
      const err = await rejection(migrate(connectionOver(client), [...(await loadMigrations()), dies]));
      expect(err).toBeInstanceOf(MigrationError);
      expect(err.message).toMatch(
        /^Migration 20300101000000_dies failed: terminating connection due to administrator command \(then rolling back failed too: .+\) \(then releasing the migration lock failed too: .+\)$/,
      );
      expect(err.cause).toMatchObject({ code: "57P01" });
      expect(err.cleanupErrors).toStrictEqual([expect.any(Error), expect.any(Error)]);
    } finally {
      await client.end();
    }
    // The dead session's transaction was rolled back by the server and its advisory lock freed.
    expect((await rows()).map((r) => r.migration_name)).toStrictEqual(ALL);
    expect(await queryDatabase(db.url, `SELECT to_regclass('x') AS t`)).toStrictEqual([{ t: null }]);
    expect(await migratePostgres(db.url)).toStrictEqual([]);
  });

  it("after migrating, every model field of the Prisma schema is a column with matching nullability (no drift)", async () => {
    await migratePostgres(db.url);
    const schema = await readFile(path.join(__dirname, "..", "prisma", "schema.prisma"), "utf8");
    for (const model of Object.values(Prisma.ModelName)) {
      const fieldsEnum = (Prisma as unknown as Record<string, Record<string, string>>)[`${model}ScalarFieldEnum`];
      const block = new RegExp(`model ${model} \\{([\\s\\S]*?)\\n\\}`).exec(schema)?.[1] ?? "";
      const expected = Object.values(fieldsEnum ?? {})
        .map((field) => {
          const type = new RegExp(`^\\s*${field}\\s+(\\S+)`, "m").exec(block)?.[1] ?? "";
          return { column_name: field, is_nullable: type.endsWith("?") ? "YES" : "NO" };
        })
        .sort((a, b) => a.column_name.localeCompare(b.column_name));
      expect(expected.length).toBeGreaterThan(0);
      const actual = await queryDatabase(
        db.url,
        `SELECT column_name, is_nullable FROM information_schema.columns WHERE table_name = $1 ORDER BY column_name`,
        [model],
      );
      expect(actual).toStrictEqual(expected);
    }
  });

  it("after migrating, the per-user list query is served by the (userId, seq) index", async () => {
    await migratePostgres(db.url);
    const indexes = await queryDatabase(
      db.url,
      `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'TodoItem' ORDER BY indexname`,
    );
    expect(indexes).toStrictEqual([
      {
        indexname: "TodoItem_pkey",
        indexdef: 'CREATE UNIQUE INDEX "TodoItem_pkey" ON public."TodoItem" USING btree (id)',
      },
      {
        indexname: "TodoItem_userId_seq_idx",
        indexdef: 'CREATE INDEX "TodoItem_userId_seq_idx" ON public."TodoItem" USING btree ("userId", seq)',
      },
    ]);
  });
});

describe("the per-user item count (migration 20261125190000_todo_list_size) on PostgreSQL", () => {
  let db: TestDatabase;
  beforeEach(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await db.drop();
  });
  const sizes = () =>
    queryDatabase<{ userId: string; items: number }>(db.url, `SELECT * FROM "TodoListSize" ORDER BY "userId"`);
  const insert = (userId: string, count: number) =>
    queryDatabase(
      db.url,
      `INSERT INTO "TodoItem" ("id", "userId", "title", "updatedAt")
       SELECT gen_random_uuid(), $1, 'item ' || g, now() FROM generate_series(1, $2::int) AS g`,
      [userId, count],
    );

  it("when items exist before it, the migration counts each user's", async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const [init, ...later] = await loadMigrations();
      expect(await migrate(connectionOver(client), init === undefined ? [] : [init])).toStrictEqual([INIT]);
      await insert("ann", 3);
      await insert("bob", 1);
      expect(await migrate(connectionOver(client), [...(init === undefined ? [] : [init]), ...later])).toStrictEqual([
        LIST_SIZE,
        LIST_ORDER,
      ]);
    } finally {
      await client.end();
    }
    expect(await sizes()).toStrictEqual([
      { userId: "ann", items: 3 },
      { userId: "bob", items: 1 },
    ]);
  });

  it("after it, the count follows every write made with SQL: inserts, deletes, an owner change, TRUNCATE", async () => {
    await migratePostgres(db.url);
    await insert("ann", 4);
    await insert("bob", 2);
    await queryDatabase(
      db.url,
      `DELETE FROM "TodoItem" WHERE "id" IN (SELECT "id" FROM "TodoItem" WHERE "userId" = 'ann' LIMIT 1)`,
    );
    await queryDatabase(db.url, `UPDATE "TodoItem" SET "userId" = 'cy' WHERE "userId" = 'bob'`);
    await queryDatabase(db.url, `UPDATE "TodoItem" SET "title" = 'renamed', "userId" = "userId"`);
    expect(await sizes()).toStrictEqual([
      { userId: "ann", items: 3 },
      { userId: "bob", items: 0 },
      { userId: "cy", items: 2 },
    ]);
    await queryDatabase(db.url, `TRUNCATE "TodoItem"`);
    expect(await sizes()).toStrictEqual([]);
  });
});

describe("the list's commit order (migration 20261208020000_list_order_seq) on PostgreSQL", () => {
  let db: TestDatabase;
  beforeEach(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await db.drop();
  });

  it("when items exist before it, keeps every row and numbers them in their old (createdAt, id) order; new items follow", async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    const before = (await loadMigrations()).filter((m) => m.name !== LIST_ORDER);
    try {
      expect(await migrate(connectionOver(client), before)).toStrictEqual([INIT, LIST_SIZE]);
      // Two users' items, written out of time order, with ties on the time that the id decides.
      await client.query(
        `INSERT INTO "TodoItem" ("id", "userId", "title", "completed", "createdAt", "updatedAt")
         SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 'user-' || (g % 2), 'item ' || g,
                g % 3 = 0, timestamp '2026-01-01' + make_interval(secs => (g * 7919) % 50), timestamp '2026-02-01'
         FROM generate_series(1, 200) AS g`,
      );
      const old = await client.query(
        `SELECT "id", "userId", "title", "completed", "createdAt", "updatedAt" FROM "TodoItem" ORDER BY "createdAt", "id"`,
      );
      expect(await migrate(connectionOver(client), await loadMigrations())).toStrictEqual([LIST_ORDER]);
      // No row lost or changed, and the new order is the old one, for each user and for all.
      const now = await client.query(
        `SELECT "id", "userId", "title", "completed", "createdAt", "updatedAt" FROM "TodoItem" ORDER BY "seq"`,
      );
      expect(now.rows).toStrictEqual(old.rows);
      const counts = await client.query(`SELECT "userId", "items" FROM "TodoListSize" ORDER BY "userId"`);
      expect(counts.rows).toStrictEqual([
        { userId: "user-0", items: 100 },
        { userId: "user-1", items: 100 },
      ]);
    } finally {
      await client.end();
    }
    // The service then lists each user's old items in the old order, and numbers new ones after them.
    const repository = await openStorage({ databaseUrl: db.url, dataDir: "unused" });
    try {
      const created = await repository.create("user-1", { title: "new", completed: false }, 1000);
      const listed = await repository.list("user-1");
      const oldIds = await queryDatabase<{ id: string }>(
        db.url,
        `SELECT "id" FROM "TodoItem" WHERE "userId" = 'user-1' AND "title" <> 'new' ORDER BY "createdAt", "id"`,
      );
      expect(listed.map((r) => r.id)).toStrictEqual([...oldIds.map((r) => r.id), created?.id]);
      expect(BigInt(listed[listed.length - 1]?.seq ?? "0")).toBe(201n);
    } finally {
      await repository.close();
    }
  });
});

describe("migrate() when cleaning up after a failure fails too", () => {
  /** A connection on which the given statements fail with the given errors, and everything else succeeds. */
  function failingOn(failures: [string, Error][]): MigrationConnection {
    const fail = async (sql: string) => {
      const failure = failures.find(([fragment]) => sql.includes(fragment));
      if (failure) throw failure[1];
    };
    return {
      query: async <Row>(sql: string) => {
        await fail(sql);
        return [] as Row[];
      },
      exec: fail,
    };
  }
  const broken = { name: "20300101000000_broken", sql: `ALTER TABLE "missing" ADD COLUMN "c" int;`, checksum: "c" };

  it("when a migration fails and releasing the lock then fails, the migration's error is thrown with the unlock failure attached", async () => {
    const sqlFailure = new Error(`relation "missing" does not exist`);
    const unlockFailure = new Error("Connection terminated unexpectedly");
    const err = await rejection(
      migrate(
        failingOn([
          ["missing", sqlFailure],
          ["pg_advisory_unlock", unlockFailure],
        ]),
        [broken],
      ),
    );
    expect(err).toBeInstanceOf(MigrationError);
    expect(err.message).toBe(
      `Migration 20300101000000_broken failed: relation "missing" does not exist ` +
        `(then releasing the migration lock failed too: Connection terminated unexpectedly)`,
    );
    expect(err.cause).toBe(sqlFailure);
    expect(err.cleanupErrors).toStrictEqual([unlockFailure]);
  });

  it("when rolling back and releasing the lock both fail after a migration failed, both are attached to the migration's error", async () => {
    const rollbackFailure = new Error("rollback refused");
    const unlockFailure = new Error("unlock refused");
    const err = await rejection(
      migrate(
        failingOn([
          ["missing", new Error("no such table")],
          ["ROLLBACK", rollbackFailure],
          ["pg_advisory_unlock", unlockFailure],
        ]),
        [broken],
      ),
    );
    expect(err.message).toBe(
      "Migration 20300101000000_broken failed: no such table (then rolling back failed too: rollback refused) " +
        "(then releasing the migration lock failed too: unlock refused)",
    );
    expect(err.cleanupErrors).toStrictEqual([rollbackFailure, unlockFailure]);
  });

  it("when reading the migration history fails and releasing the lock then fails, the read's own error is thrown", async () => {
    const readFailure = new Error(`permission denied for table _prisma_migrations`);
    const unlockFailure = new Error("unlock refused");
    const err = await rejection(
      migrate(
        failingOn([
          [`FROM "_prisma_migrations"`, readFailure],
          ["pg_advisory_unlock", unlockFailure],
        ]),
        [broken],
      ),
    );
    expect(err).toBe(readFailure);
    expect(err.message).toBe(
      "permission denied for table _prisma_migrations (then releasing the migration lock failed too: unlock refused)",
    );
    expect(err.cleanupErrors).toStrictEqual([unlockFailure]);
  });

  it("when a migration fails and releasing the lock succeeds, the error is the migration's alone", async () => {
    const err = await rejection(migrate(failingOn([["missing", new Error("no such table")]]), [broken]));
    expect(err.message).toBe("Migration 20300101000000_broken failed: no such table");
    expect(err.cleanupErrors).toBeUndefined();
  });
});

describe("migrate() on PGlite", () => {
  it("when run twice on the same database, applies the migrations once", async () => {
    const db = await PGlite.create();
    try {
      expect(await migratePglite(db)).toStrictEqual(ALL);
      expect(await migratePglite(db)).toStrictEqual([]);
      const { rows } = await db.query<{ migration_name: string; applied_steps_count: number }>(
        `SELECT migration_name, applied_steps_count FROM "_prisma_migrations"`,
      );
      expect(rows).toStrictEqual(ALL.map((name) => ({ migration_name: name, applied_steps_count: 1 })));
    } finally {
      await db.close();
    }
  });
});
