import { randomUUID } from "node:crypto";
import { once } from "node:events";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";
import request from "supertest";
import { queryDatabase } from "./support/postgres";
import { buildApp, postgresMode, STORAGE_MODES, suiteApp, type TestApp } from "./support/storage-modes";

/**
 * Issue 35, item 8: the order the list is read in must be the order items commit in, so that a reader who
 * continues from the last item it saw never passes an item that commits later. Before, `createdAt` (the
 * order's key) was set before the create waited for its turn (the per-user lock, a pool connection), so an
 * item could commit after one with a later key: a tailing reader missed 19-37 of 600 over PostgreSQL.
 */

jest.setTimeout(120_000);

/** Items created while the readers tail, and how many creates are in flight at once. Bounded, loopback. */
const ITEMS = 600;
const IN_FLIGHT = 16;

interface Item {
  id: string;
  createdAt: string;
}

/** The app on a real loopback socket (port 0), for truly concurrent requests. */
async function serve(app: TestApp["app"]): Promise<{ base: string; close: () => Promise<void> }> {
  const server: Server = app.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    base: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * One list read: the items, and the cursor a tailing client continues from. `from: "header"` is the documented
 * way (the `List-Cursor` header, sent on every answer, the last page's too); `from: "item"` builds the cursor
 * from the last item seen (`<createdAt ms>_<id>`, the form links carried before), as the issue's reader did.
 */
async function read(base: string, path: string, cursor: string | undefined, from: "header" | "item") {
  const res = await fetch(`${base}${path}${cursor === undefined ? "" : `?after=${cursor}&limit=50`}`);
  if (res.status !== 200) throw new Error(`list answered ${res.status}: ${await res.text()}`);
  const items = ((await res.json()) as { todoItems: Item[] }).todoItems;
  const last = items[items.length - 1];
  const next =
    from === "header"
      ? (res.headers.get("list-cursor") ?? undefined)
      : last === undefined
        ? cursor
        : `${Date.parse(last.createdAt)}_${last.id}`;
  if (from === "header" && next === undefined) throw new Error("a list answer without a List-Cursor header");
  return { items, next };
}

/**
 * Reads the list again and again from its own last cursor until `done` and an answer comes back empty: the
 * ids seen, and how many of them were seen while the creates were still running (the reader really tailed).
 */
async function tail(base: string, path: string, from: "header" | "item", done: () => boolean) {
  const seen: string[] = [];
  let whileWriting = 0;
  let cursor: string | undefined;
  for (;;) {
    const finished = done();
    const { items, next } = await read(base, path, cursor, from);
    seen.push(...items.map((i) => i.id));
    if (!finished) whileWriting = seen.length;
    cursor = next;
    if (finished && items.length === 0) return { seen, whileWriting };
  }
}

/** `count` creates for `userId`, `inFlight` at a time; the ids in the order their answers came. */
async function createMany(base: string, userId: string, count: number, inFlight: number): Promise<string[]> {
  const ids: string[] = [];
  let started = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (started < count) {
        const i = started++;
        const res = await fetch(`${base}/users/${userId}/todos`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ title: `item ${i}` }),
        });
        if (res.status !== 201) throw new Error(`create answered ${res.status}: ${await res.text()}`);
        ids.push(((await res.json()) as { todoItem: Item }).todoItem.id);
      }
    }),
  );
  return ids;
}

describe.each(STORAGE_MODES)("tailing the list while items are created, on $name", (mode) => {
  const t = suiteApp(mode);
  let server: { base: string; close: () => Promise<void> };
  beforeAll(async () => {
    server = await serve(t.app);
  });
  afterAll(async () => {
    await server?.close();
  });

  it.each(["header", "item"] as const)(
    `when ${ITEMS} items are created ${IN_FLIGHT} at a time, a reader continuing from its last cursor (from the %s) misses none and sees none twice`,
    async (from) => {
      const user = `tail-${randomUUID()}`;
      const path = `/users/${user}/todos`;
      let writing = true;
      const reader = tail(server.base, path, from, () => !writing);
      const created = await createMany(server.base, user, ITEMS, IN_FLIGHT).finally(() => {
        writing = false;
      });
      const { seen, whileWriting } = await reader;
      expect(whileWriting).toBeGreaterThan(0);
      const missed = created.filter((id) => !seen.includes(id));
      expect({ missed: missed.length, twice: seen.length - new Set(seen).size }).toStrictEqual({ missed: 0, twice: 0 });
      // And in the list's own order.
      expect(seen).toStrictEqual((await t.repository.list(user)).map((r) => r.id));
    },
  );
});

describe("an item whose create waited for a pool connection, on postgres", () => {
  // Two instances over one database, as replicas run: the writer's pool is taken by creates of another user
  // that wait on a lock, so a create of `user` waits in the writer's pool while an item created through the
  // reader's instance commits. The reader sees that item, and must still see the one still waiting.
  let location: Awaited<ReturnType<typeof postgresMode.locate>>;
  let writer: TestApp;
  let reader: TestApp;
  beforeAll(async () => {
    location = await postgresMode.locate();
    writer = await buildApp(location.options);
    reader = await buildApp(location.options);
  });
  afterAll(async () => {
    await writer?.repository.close();
    await reader?.repository.close();
    await location?.dispose();
  });

  it("when it commits after an item created later, a reader that saw the later one still gets it next", async () => {
    const user = `held-${randomUUID()}`;
    const other = `busy-${randomUUID()}`;
    const url = location.options.databaseUrl as string;
    await request(writer.app).post(`/users/${other}/todos`).send({ title: "first" }).expect(201);
    await request(writer.app).post(`/users/${user}/todos`).send({ title: "first" }).expect(201);
    // Holds `other`'s list (its count row) so that its creates wait in the database, holding the pool.
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query("BEGIN");
      await holder.query(`SELECT 1 FROM "TodoListSize" WHERE "userId" = $1 FOR UPDATE`, [other]);
      const busy = Array.from({ length: 10 }, (_, i) =>
        request(writer.app)
          .post(`/users/${other}/todos`)
          .send({ title: `busy ${i}` }),
      );
      const busyDone = Promise.all(busy.map((b) => b.then((res) => res.status)));
      await until(async () => (await waitingOnLocks(url)) >= 10);
      const late = request(writer.app).post(`/users/${user}/todos`).send({ title: "waited" });
      const lateDone = late.then((res) => res);
      await until(async () =>
        /^todos_db_pool_waiting_requests\{[^}]*\} 1$/m.test((await request(writer.app).get("/metrics")).text),
      );
      await new Promise((resolve) => setTimeout(resolve, 5));
      await request(reader.app).post(`/users/${user}/todos`).send({ title: "later" }).expect(201);
      const first = await request(reader.app).get(`/users/${user}/todos`).expect(200);
      expect(first.body.todoItems.map((i: { title: string }) => i.title)).toStrictEqual(["first", "later"]);
      const cursor = first.headers["list-cursor"];
      await holder.query("COMMIT");
      expect(await busyDone).toStrictEqual(Array(10).fill(201));
      const waited = await lateDone;
      expect(waited.status).toBe(201);
      const next = await request(reader.app).get(`/users/${user}/todos?after=${cursor}`).expect(200);
      expect(next.body.todoItems.map((i: { title: string }) => i.title)).toStrictEqual(["waited"]);
    } finally {
      await holder.end();
    }
  });
});

/** Statements of the database waiting on a lock (asked outside any transaction: its view is a snapshot). */
async function waitingOnLocks(url: string): Promise<number> {
  const rows = await queryDatabase<{ n: number }>(
    url,
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`,
  );
  return rows[0]?.n ?? 0;
}

/** Polls `check` every 10 ms, for at most 10 s. */
async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error("the condition never held");
}

describe("a replica still running the previous version during a rolling upgrade, on postgres", () => {
  // The create statement of the version before seq (it names no "seq" column, so the column's default
  // numbers the row). The default is evaluated as the row is produced, after the CTE took the user's lock, so
  // its creates are numbered in commit order too.
  const PREVIOUS_CREATE = `WITH "slot" AS (
      INSERT INTO "public"."TodoListSize" AS "size" ("userId", "items") VALUES ($1::text, 0)
      ON CONFLICT ("userId") DO UPDATE SET "items" = "size"."items" WHERE "size"."items" < $2::int
      RETURNING 1
    )
    INSERT INTO "public"."TodoItem" ("id", "userId", "title", "completed", "createdAt", "updatedAt")
    SELECT gen_random_uuid(), $1::text, 'previous', false, now(), now() FROM "slot"
    RETURNING "seq"::text AS "seq"`;
  let location: Awaited<ReturnType<typeof postgresMode.locate>>;
  let app: TestApp;
  beforeAll(async () => {
    location = await postgresMode.locate();
    app = await buildApp(location.options);
  });
  afterAll(async () => {
    await app?.repository.close();
    await location?.dispose();
  });

  it("when its create waits for the user's lock, it is numbered after every number taken meanwhile", async () => {
    const user = `rolling-${randomUUID()}`;
    const url = location.options.databaseUrl as string;
    await request(app.app).post(`/users/${user}/todos`).send({ title: "first" }).expect(201);
    const holder = new pg.Client({ connectionString: url });
    const previous = new pg.Client({ connectionString: url });
    await holder.connect();
    await previous.connect();
    try {
      await holder.query("BEGIN");
      await holder.query(`SELECT 1 FROM "TodoListSize" WHERE "userId" = $1 FOR UPDATE`, [user]);
      const waiting = previous.query<{ seq: string }>(PREVIOUS_CREATE, [user, 1000]);
      await until(async () => (await waitingOnLocks(url)) >= 1);
      // Other users' creates take numbers while it waits.
      for (let i = 0; i < 3; i++) {
        await request(app.app).post(`/users/other-${randomUUID()}/todos`).send({ title: "meanwhile" }).expect(201);
      }
      const taken = await queryDatabase<{ seq: string }>(url, `SELECT max("seq")::text AS "seq" FROM "TodoItem"`);
      await holder.query("COMMIT");
      const { rows } = await waiting;
      expect(BigInt(rows[0]?.seq ?? "0")).toBeGreaterThan(BigInt(taken[0]?.seq ?? "0"));
      expect((await app.repository.list(user)).map((r) => r.title)).toStrictEqual(["first", "previous"]);
    } finally {
      await holder.end();
      await previous.end();
    }
  });
});
