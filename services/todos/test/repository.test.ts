import { randomUUID } from "node:crypto";
import type { SqlQueryable } from "@prisma/driver-adapter-utils";
import type pg from "pg";
import { DEFAULT_MAX_ITEMS_PER_USER } from "../src/config";
import type { PrismaClient } from "../src/generated/prisma/client";
import { openStorage } from "../src/storage/open-storage";
import { PrismaTodoRepository } from "../src/storage/prisma-repository";
import type { ListedTodo, NewTodo, TodoRecord, TodoRepository } from "../src/storage/repository";

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

  it("when rows were inserted out of createdAt order or share one, lists them in the order they were numbered (inserted)", async () => {
    const user = `order-${randomUUID()}`;
    const ids = ["ffffffff-0000-4000-8000-000000000003", "00000000-0000-4000-8000-000000000001"];
    const later = "00000000-0000-4000-8000-00000000000f";
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
    // The order is the items' numbers (seq), the order they were written in, not their times or ids.
    const all = await repository.list(user);
    expect(all.map((r) => r.id)).toStrictEqual([later, ids[0], ids[1], earliest]);
    expect(all.map((r) => BigInt(r.seq))).toStrictEqual(
      [...all.map((r) => BigInt(r.seq))].sort((a, b) => (a < b ? -1 : 1)),
    );
    expect((await repository.list(user, { limit: 2, offset: 1 })).map((r) => r.id)).toStrictEqual(ids);
  });

  it("when the list query runs on a table of many users, Postgres serves it from the (userId, seq) index", async () => {
    await queryDatabase(
      db.url,
      `INSERT INTO "TodoItem" ("id", "userId", "title", "updatedAt")
       SELECT gen_random_uuid(), 'bulk-' || (g % 500), 't', now() FROM generate_series(1, 10000) g;
       ANALYZE "TodoItem"`,
    );
    for (const where of ["", `AND "seq" > 100`]) {
      const plan = await queryDatabase<{ "QUERY PLAN": string }>(
        db.url,
        `EXPLAIN SELECT "id", "title", "completed", "createdAt", "updatedAt" FROM "TodoItem"
          WHERE "userId" = 'bulk-7' ${where} ORDER BY "seq" ASC LIMIT 100 OFFSET 0`,
      );
      const text = plan.map((r) => r["QUERY PLAN"]).join("\n");
      // An index scan or a bitmap index scan (planner's choice by cost): either reads only that user's rows.
      expect(text).toMatch(/Index Scan (using|on) "TodoItem_userId_seq_idx"/);
      expect(text).not.toContain("Seq Scan");
    }
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
      expect(records(await other.list(user))).toStrictEqual([created]);
      expect(records(await other.list(user))).toStrictEqual([created]);
      const names = await pool?.query<{ name: string; statement: string }>(
        `SELECT "name", "statement" FROM pg_prepared_statements WHERE "name" LIKE 'todos_%'`,
      );
      const statements = names?.rows.map((r) => r.statement) ?? [];
      expect(statements.some((sql) => sql.includes("INSERT INTO"))).toBe(true);
      expect(statements.some((sql) => sql.includes('ORDER BY "seq" ASC'))).toBe(true);
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
    // In the order the creates committed in (one after the other here), with times that never run against it.
    expect(records(all)).toStrictEqual([first, second, third]);
    expect(all.map((r) => r.createdAt)).toStrictEqual([...all.map((r) => r.createdAt)].sort());
    // The list gives its times as the API writes them (ISO 8601, milliseconds, Z), as text.
    expect(all[0]?.createdAt).toBe(first.createdAt.toISOString());
    expect(await repository.list(user, { limit: 2, offset: 1 })).toStrictEqual(all.slice(1, 3));
    expect(await repository.list(user, { limit: 1, offset: 3 })).toStrictEqual([]);
    // After an item: from the next one on, by its number, whatever the item's own fate.
    const [a, b, c] = all as [ListedTodo, ListedTodo, ListedTodo];
    const listAfter = (after: { seq: string } | { createdAt: Date; id: string }, limit: number) =>
      repository.list(user, { limit, after });
    expect(await listAfter({ seq: a.seq }, 5)).toStrictEqual([b, c]);
    expect(await listAfter({ seq: a.seq }, 1)).toStrictEqual([b]);
    expect(await listAfter({ seq: c.seq }, 5)).toStrictEqual([]);
    expect(await listAfter({ seq: "0" }, 5)).toStrictEqual(all);
    // A cursor of the old form (time, id), handed out before the upgrade: after the item it names...
    expect(await listAfter({ createdAt: new Date(a.createdAt), id: a.id }, 5)).toStrictEqual([b, c]);
    // ...and, once that item is gone, after the last item at or before its place in the old (createdAt, id) order.
    await repository.delete(user, b.id);
    expect(await listAfter({ createdAt: new Date(b.createdAt), id: b.id }, 5)).toStrictEqual([c]);
    expect(await listAfter({ createdAt: new Date(0), id: "00000000-0000-4000-8000-000000000000" }, 5)).toStrictEqual([
      a,
      c,
    ]);
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

/** Listed items as the records create and get return: Date times, without their place in the list's order. */
function records(listed: ListedTodo[]): TodoRecord[] {
  return listed.map(({ seq: _seq, createdAt, updatedAt, ...rest }) => ({
    ...rest,
    createdAt: new Date(createdAt),
    updatedAt: new Date(updatedAt),
  }));
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

  it("when the adapter returns timestamps as Postgres writes them (any fraction), gives the API's exact text", async () => {
    expect(
      await listing([id, "t", true, "2026-11-24T10:00:00+00:00", "2026-11-24T10:00:00.12+00:00", "9007199254740993"]),
    ).toStrictEqual([
      {
        id,
        title: "t",
        completed: true,
        createdAt: "2026-11-24T10:00:00.000Z",
        updatedAt: "2026-11-24T10:00:00.120Z",
        seq: "9007199254740993",
      },
    ]);
  });

  // The text is rewritten, not parsed into a Date: it must say what a Date's toISOString says, in every form.
  it.each([
    "2026-11-24T10:00:00+00:00",
    "2026-11-24T10:00:00.1+00:00",
    "2026-11-24T10:00:00.12+00:00",
    "2026-11-24T10:00:00.123+00:00",
    "2026-11-24T10:00:00.123456+00:00",
    "0001-01-01T00:00:00.999+00:00",
    "9999-12-31T23:59:59.999+00:00",
    "2024-02-29T23:59:59.5+00:00",
    // Not the adapters' form: through a Date, as before.
    "2026-11-24T10:00:00.5+02:00",
    "2026-11-24T10:00:00Z",
  ])("when the adapter returns %s, gives what Date's toISOString gives", async (time) => {
    const [listed] = await listing([id, "t", true, time, time, "1"]);
    expect([listed?.createdAt, listed?.updatedAt]).toStrictEqual(Array(2).fill(new Date(time).toISOString()));
  });

  it.each([
    ["a Date instead of text", [id, "t", true, new Date(), "2026-11-24T10:00:00+00:00", "1"]],
    ["an unparseable timestamp", [id, "t", true, "yesterday", "2026-11-24T10:00:00+00:00", "1"]],
    ["a boolean as text", [id, "t", "t", "2026-11-24T10:00:00+00:00", "2026-11-24T10:00:00+00:00", "1"]],
    ["a missing column", [id, "t", true, "2026-11-24T10:00:00+00:00"]],
    ["a missing seq", [id, "t", true, "2026-11-24T10:00:00+00:00", "2026-11-24T10:00:00+00:00"]],
    ["a seq as a number", [id, "t", true, "2026-11-24T10:00:00+00:00", "2026-11-24T10:00:00+00:00", 7]],
  ])("when the adapter returns %s, the list fails instead of passing the row on", async (_case, row) => {
    await expect(listing(row)).rejects.toThrow("the driver adapter returned a todo row of unexpected types");
  });
});
