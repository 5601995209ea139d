import { randomUUID } from "node:crypto";
import type { SqlQueryable } from "@prisma/driver-adapter-utils";
import type pg from "pg";
import { DEFAULT_MAX_ITEMS_PER_USER } from "../src/config";
import type { PrismaClient } from "../src/generated/prisma/client";
import { openStorage } from "../src/storage/open-storage";
import { PrismaTodoRepository } from "../src/storage/prisma-repository";
import type { NewTodo, TodoRecord, TodoRepository } from "../src/storage/repository";

import { createTestDatabase, holdWrites, queryDatabase, type TestDatabase } from "./support/postgres";
import { STORAGE_MODES, type StorageLocation } from "./support/storage-modes";

describe("PrismaTodoRepository on PostgreSQL", () => {
  let db: TestDatabase;
  let repository: TodoRepository;
  const observed: [string, boolean][] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    repository = await openStorage({
      databaseUrl: db.url,
      dataDir: "unused",
      onQuery: (operation, durationMs, ok) => {
        expect(durationMs).toBeGreaterThanOrEqual(0);
        observed.push([operation, ok]);
      },
    });
  });

  afterAll(async () => {
    await repository?.close();
    await db?.drop();
  });

  it("when rows share a createdAt or were inserted out of order, lists by createdAt then id", async () => {
    const user = `order-${randomUUID()}`;
    const ids = ["00000000-0000-4000-8000-000000000003", "00000000-0000-4000-8000-000000000001"];
    const later = "ffffffff-0000-4000-8000-000000000000";
    const earliest = "77777777-0000-4000-8000-000000000000";
    await queryDatabase(
      db.url,
      `INSERT INTO "TodoItem" ("id", "userId", "title", "createdAt", "updatedAt") VALUES
         ($2, $1, 'later', '2026-01-02 00:00:00', now()),
         ($3, $1, 'tie b', '2026-01-01 00:00:00', now()),
         ($4, $1, 'tie a', '2026-01-01 00:00:00', now()),
         ($5, $1, 'earliest', '2025-12-31 23:59:59.999', now())`,
      [user, later, ids[0], ids[1], earliest],
    );
    expect((await repository.list(user)).map((r) => r.id)).toStrictEqual([earliest, ids[1], ids[0], later]);
    expect((await repository.list(user, { limit: 2, offset: 1 })).map((r) => r.id)).toStrictEqual([ids[1], ids[0]]);
  });

  it("when the list query runs on a table of many users, Postgres serves it from the (userId, createdAt, id) index", async () => {
    await queryDatabase(
      db.url,
      `INSERT INTO "TodoItem" ("id", "userId", "title", "updatedAt")
       SELECT gen_random_uuid(), 'bulk-' || (g % 500), 't', now() FROM generate_series(1, 10000) g;
       ANALYZE "TodoItem"`,
    );
    const plan = await queryDatabase<{ "QUERY PLAN": string }>(
      db.url,
      `EXPLAIN SELECT "id", "title", "completed", "createdAt", "updatedAt" FROM "TodoItem"
        WHERE "userId" = 'bulk-7' ORDER BY "createdAt" ASC, "id" ASC LIMIT 100 OFFSET 0`,
    );
    const text = plan.map((r) => r["QUERY PLAN"]).join("\n");
    // An index scan or a bitmap index scan (planner's choice by cost): either reads only that user's rows.
    expect(text).toMatch(/Index Scan (using|on) "TodoItem_userId_createdAt_id_idx"/);
    expect(text).not.toContain("Seq Scan");
  });

  it("when operations run, reports each to the onQuery hook with its outcome", async () => {
    observed.length = 0;
    const user = `hook-${randomUUID()}`;
    const created = await mustCreate(repository, user, { title: "x", completed: false });
    await repository.list(user);
    await repository.update(user, created.id, { completed: true });
    await repository.delete(user, created.id);
    await repository.ping();
    expect(observed).toStrictEqual([
      ["todoItem.create", true],
      ["todoItem.findMany", true],
      ["todoItem.updateManyAndReturn", true],
      ["todoItem.deleteMany", true],
      ["$queryRaw", true],
    ]);
  });

  it("when an operation fails, reports it with ok = false and rethrows", async () => {
    observed.length = 0;
    // A title over VARCHAR(500) bypassing HTTP validation: the database refuses it.
    await expect(mustCreate(repository, "u", { title: "x".repeat(501), completed: false })).rejects.toThrow();
    expect(observed).toStrictEqual([["todoItem.create", false]]);
  });

  it("when the same statements run again on a connection, they run as named prepared statements", async () => {
    let pool: pg.Pool | undefined;
    const other = await openStorage({ databaseUrl: db.url, dataDir: "unused", onPool: (p) => (pool = p) });
    try {
      const user = `prepared-${randomUUID()}`;
      // One at a time, so the pool hands back its one idle connection each time (and to the check below).
      const created = await mustCreate(other, user, { title: "x", completed: false });
      expect(await other.list(user)).toStrictEqual([created]);
      expect(await other.list(user)).toStrictEqual([created]);
      const names = await pool?.query<{ name: string; statement: string }>(
        `SELECT "name", "statement" FROM pg_prepared_statements WHERE "name" LIKE 'todos_%'`,
      );
      const statements = names?.rows.map((r) => r.statement) ?? [];
      expect(statements.some((sql) => sql.includes("INSERT INTO"))).toBe(true);
      expect(statements.some((sql) => sql.includes('ORDER BY "createdAt" ASC'))).toBe(true);
    } finally {
      await other.close();
    }
  });

  // Lists and creates go through the driver adapter alone, so the Prisma client may never have connected (and
  // would not dispose the pool on $disconnect); ping, update and delete go through the client, which then
  // disposes it too.
  it.each([
    [
      "only lists and creates ran",
      "lists",
      (r: TodoRepository) =>
        Promise.all([r.list("a"), mustCreate(r, "b", { title: "t", completed: false }), r.list("c")]),
    ],
    [
      "the client ran statements too",
      "writes",
      (r: TodoRepository) => Promise.all([mustCreate(r, "a", { title: "t", completed: false }), r.list("a"), r.ping()]),
    ],
  ])("when closed after %s, releases every database connection", async (_case, name, work) => {
    const url = new URL(db.url);
    url.searchParams.set("application_name", `todos-close-${name}`);
    const other = await openStorage({ databaseUrl: url.toString(), dataDir: "unused" });
    await work(other);
    const connections = async () =>
      (
        await queryDatabase<{ n: number }>(
          db.url,
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'todos-close-${name}'`,
        )
      )[0]?.n;
    expect(await connections()).toBeGreaterThanOrEqual(1);
    await other.close();
    // A backend leaves pg_stat_activity just after its client hangs up: poll briefly (bounded).
    let after = await connections();
    for (let i = 0; i < 40 && after !== 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      after = await connections();
    }
    expect(after).toBe(0);
  });
});

describe.each(STORAGE_MODES)("PrismaTodoRepository on $name", (mode) => {
  let location: StorageLocation;
  let repository: TodoRepository;

  beforeAll(async () => {
    location = await mode.locate();
    repository = await openStorage(location.options);
  });

  afterAll(async () => {
    await repository?.close();
    await location?.dispose();
  });

  it("when items exist, returns exactly the records create returned (Date timestamps), oldest first, paged", async () => {
    const user = `types-${randomUUID()}`;
    const first = await mustCreate(repository, user, { title: "first", completed: false });
    const second = await mustCreate(repository, user, { title: "second", completed: true });
    const third = await mustCreate(repository, user, { title: "third", completed: false });
    await mustCreate(repository, `other-${randomUUID()}`, { title: "not mine", completed: false });
    const all = await repository.list(user);
    expect(all).toStrictEqual([first, second, third].sort((a, b) => order(a, b)));
    expect(all[0]?.createdAt).toBeInstanceOf(Date);
    expect(await repository.list(user, { limit: 2, offset: 1 })).toStrictEqual(all.slice(1, 3));
    expect(await repository.list(user, { limit: 1, offset: 3 })).toStrictEqual([]);
    // After an item: from the next one on, by (createdAt, id), whatever the item's own fate.
    const listAfter = (item: { createdAt: Date; id: string }, limit: number) =>
      repository.list(user, { limit, after: { createdAt: item.createdAt, id: item.id } });
    expect(await listAfter(all[0] as (typeof all)[0], 5)).toStrictEqual(all.slice(1));
    expect(await listAfter(all[0] as (typeof all)[0], 1)).toStrictEqual(all.slice(1, 2));
    expect(await listAfter(all[2] as (typeof all)[0], 5)).toStrictEqual([]);
    // A position between two items with the same time: the id decides.
    const tie = { createdAt: (all[1] as (typeof all)[0]).createdAt, id: "00000000-0000-4000-8000-000000000000" };
    const later = (r: (typeof all)[0]) =>
      r.createdAt > tie.createdAt || (r.createdAt.getTime() === tie.createdAt.getTime() && r.id > tie.id);
    expect(await listAfter(tie, 5)).toStrictEqual(all.filter(later));
    expect(all.filter(later)).toContain(all[1]);
  });

  it("when creates, lists and a failing write are asked for at once, then each gets its own answer and nothing is lost", async () => {
    const user = `burst-${randomUUID()}`;
    const creates = Array.from({ length: 40 }, (_, i) =>
      mustCreate(repository, user, { title: `item ${i}`, completed: false }),
    );
    const lists = Array.from({ length: 9 }, () => repository.list(user));
    const failing = mustCreate(repository, user, { title: "x".repeat(501), completed: false });
    const [created, listed, failed] = await Promise.all([
      Promise.all(creates),
      Promise.all(lists),
      failing.then(
        () => "stored",
        () => "refused",
      ),
    ]);
    expect(failed).toBe("refused");
    expect(created.map((r) => r.title)).toStrictEqual(Array.from({ length: 40 }, (_, i) => `item ${i}`));
    for (const list of listed) expect(list.length).toBeLessThanOrEqual(40);
    const all = await repository.list(user);
    expect(new Set(all.map((r) => r.id))).toStrictEqual(new Set(created.map((r) => r.id)));
  });

  it("when the user holds maxItems items, create returns undefined and writes nothing; a delete makes room", async () => {
    const user = `full-${randomUUID()}`;
    const first = await repository.create(user, { title: "1", completed: false }, 2);
    expect(await repository.create(user, { title: "2", completed: false }, 2)).toBeDefined();
    expect(await repository.create(user, { title: "3", completed: false }, 2)).toBeUndefined();
    expect((await repository.list(user)).map((r) => r.title)).toStrictEqual(["1", "2"]);
    expect(await repository.create(`other-${randomUUID()}`, { title: "x", completed: false }, 2)).toBeDefined();
    await repository.delete(user, (first as TodoRecord).id);
    expect(await repository.create(user, { title: "3", completed: false }, 2)).toMatchObject({ title: "3" });
    expect((await repository.list(user)).map((r) => r.title)).toStrictEqual(["2", "3"]);
  });

  it("when 10 creates race for the last 2 places, exactly 2 are written", async () => {
    const user = `race-${randomUUID()}`;
    for (let i = 0; i < 3; i++) await mustCreate(repository, user, { title: `before ${i}`, completed: false });
    // On PostgreSQL the statements wait at the table until all ten have arrived, then start together.
    const url = location.options.databaseUrl;
    const held = url === undefined ? undefined : await holdWrites(url);
    let results: (TodoRecord | undefined)[];
    try {
      const racing = Promise.all(
        Array.from({ length: 10 }, (_, i) => repository.create(user, { title: `racer ${i}`, completed: false }, 5)),
      );
      await held?.waitingFor(10);
      await held?.release();
      results = await racing;
    } finally {
      await held?.release();
    }
    const written = results.filter((r) => r !== undefined);
    expect(written).toHaveLength(2);
    const all = await repository.list(user);
    expect(all).toHaveLength(5);
    // By title, not by position: on PGlite a racer and the last earlier item can share a millisecond, and the
    // list orders those by id.
    expect(
      all
        .filter((r) => r.title.startsWith("racer"))
        .map((r) => r.id)
        .sort(),
    ).toStrictEqual(written.map((r) => r.id).sort());
  });
});

/** A create under the default item limit, which these tests never reach. */
async function mustCreate(repository: TodoRepository, userId: string, todo: NewTodo): Promise<TodoRecord> {
  const created = await repository.create(userId, todo, DEFAULT_MAX_ITEMS_PER_USER);
  if (created === undefined) throw new Error(`the list of ${userId} is full`);
  return created;
}

function order(a: TodoRecord, b: TodoRecord): number {
  return a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

describe("PrismaTodoRepository creates", () => {
  /** A repository whose Prisma client is empty: any use of it throws, so only the adapter can answer. */
  function creating(rows: unknown[][]) {
    const calls: { sql: string; args: unknown[] }[] = [];
    const adapter = {
      queryRaw: async (query: { sql: string; args: unknown[] }) => {
        calls.push(query);
        return { columnNames: [], columnTypes: [], rows };
      },
    };
    const repository = new PrismaTodoRepository({
      prisma: {} as PrismaClient,
      adapter: adapter as unknown as SqlQueryable,
      kind: "postgres",
      release: async () => undefined,
    });
    return { repository, calls };
  }
  const id = "0f8fad5b-d9cb-469f-a165-70867728950e";

  // Prisma's $queryRaw around the same statement cost ~100 µs of CPU per create (README, "Performance").
  it("sends the one create statement through the driver adapter, never through the Prisma client", async () => {
    const { repository, calls } = creating([
      [id, "t", false, "2026-11-24T10:00:00.5+00:00", "2026-11-24T10:00:00.5+00:00"],
    ]);
    expect(await repository.create("u", { title: "t", completed: false }, 7)).toStrictEqual({
      id,
      title: "t",
      completed: false,
      createdAt: new Date("2026-11-24T10:00:00.500Z"),
      updatedAt: new Date("2026-11-24T10:00:00.500Z"),
    });
    expect(calls).toHaveLength(1);
    expect(calls[0]?.sql).toMatch(/^WITH "slot" AS \(\s+INSERT INTO "public"."TodoListSize"/);
    expect(calls[0]?.args.slice(0, 2)).toStrictEqual(["u", 7]);
  });

  it("answers undefined when the statement wrote nothing (the list is full)", async () => {
    expect(await creating([]).repository.create("u", { title: "t", completed: false }, 7)).toBeUndefined();
  });
});

describe("PrismaTodoRepository list rows", () => {
  function listing(row: unknown[]) {
    const adapter = { queryRaw: async () => ({ columnNames: [], columnTypes: [], rows: [row] }) };
    return new PrismaTodoRepository({
      prisma: {} as PrismaClient,
      adapter: adapter as unknown as SqlQueryable,
      kind: "postgres",
      release: async () => undefined,
    }).list("u");
  }
  const id = "0f8fad5b-d9cb-469f-a165-70867728950e";

  it("when the adapter returns timestamps as Postgres writes them (any fraction), gives exact Dates", async () => {
    expect(await listing([id, "t", true, "2026-11-24T10:00:00+00:00", "2026-11-24T10:00:00.12+00:00"])).toStrictEqual([
      {
        id,
        title: "t",
        completed: true,
        createdAt: new Date("2026-11-24T10:00:00.000Z"),
        updatedAt: new Date("2026-11-24T10:00:00.120Z"),
      },
    ]);
  });

  it.each([
    ["a Date instead of text", [id, "t", true, new Date(), "2026-11-24T10:00:00+00:00"]],
    ["an unparseable timestamp", [id, "t", true, "yesterday", "2026-11-24T10:00:00+00:00"]],
    ["a boolean as text", [id, "t", "t", "2026-11-24T10:00:00+00:00", "2026-11-24T10:00:00+00:00"]],
    ["a missing column", [id, "t", true, "2026-11-24T10:00:00+00:00"]],
  ])("when the adapter returns %s, the list fails instead of passing the row on", async (_case, row) => {
    await expect(listing(row)).rejects.toThrow("the driver adapter returned a todo row of unexpected types");
  });
});
