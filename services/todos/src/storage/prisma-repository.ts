import { randomUUID } from "node:crypto";
import type { ArgType, SqlQueryable } from "@prisma/driver-adapter-utils";
import type { PrismaClient } from "../generated/prisma/client";
import type {
  ListedTodo,
  NewTodo,
  Page,
  QueryObserver,
  StorageKind,
  TodoPatch,
  TodoRecord,
  TodoRepository,
} from "./repository";
import type { TurnQueue } from "./turn-queue";

// Only what the API shows: the owner column never leaves the repository.
const columns = { id: true, title: true, completed: true, createdAt: true, updatedAt: true } as const;

// The list, in the order toListed reads its columns, ordered by "seq": the number each create takes while
// it holds the user's count row lock (CREATE_SQL), so the order is the order creates commit in. A reader who
// continues after the last item it saw can then never pass an item that commits later: every item numbered
// below it had committed before it was numbered. (The order was ("createdAt", "id") before, with
// "createdAt" set before the create waited for that lock: a tailing reader missed items, issue 35.)
// Every value is a bind parameter (see statement-names.ts); "seq" comes back as text (a bigint can pass 2^53),
// under another name: ORDER BY "seq" would otherwise sort by that text ("10" before "9").
const LIST_COLUMNS = `"id", "title", "completed", "createdAt", "updatedAt", "seq"::text AS "cursor"`;
const LIST_SQL = `SELECT ${LIST_COLUMNS} FROM "public"."TodoItem" WHERE "userId" = $1 ORDER BY "seq" ASC`;
const LIST_PAGE_SQL = `${LIST_SQL} LIMIT $2 OFFSET $3`;
// A window after an item (a cursor): a range of the (userId, seq) index, so the window costs the same
// wherever it starts.
const LIST_AFTER_SQL = `SELECT ${LIST_COLUMNS} FROM "public"."TodoItem"
  WHERE "userId" = $1 AND "seq" > $2::bigint ORDER BY "seq" ASC LIMIT $3`;
// A window after a cursor of the old form (creation time in ms, id), handed out before the upgrade: it
// continues after that item's number, found by its id; if the item was deleted since, after the highest
// number among the items that sorted at or before it in the old order. The migration numbered the items
// of that time in the old order, so this is the same place in the list. The time arrives as ISO text in UTC,
// as the column holds it.
const LIST_AFTER_LEGACY_SQL = `SELECT ${LIST_COLUMNS} FROM "public"."TodoItem"
  WHERE "userId" = $1 AND "seq" > COALESCE(
    (SELECT "seq" FROM "public"."TodoItem" WHERE "id" = $3::uuid AND "userId" = $1),
    (SELECT max("seq") FROM "public"."TodoItem"
      WHERE "userId" = $1 AND ("createdAt", "id") <= ($2::timestamp(3), $3::uuid)),
    0)
  ORDER BY "seq" ASC LIMIT $4`;
// The create, in one statement (see create): the CTE takes the user's TodoListSize row and matches only while
// the count is under the limit ($2); the item is inserted only if it did. The CTE's RETURNING runs once the
// row lock is held, so the item's number (seq, the list's order) and its creation time are taken inside the
// lock: in commit order, per user. The casts name every parameter's type, as Prisma's own statement did
// through its typed arguments.
const CREATE_SQL = `WITH "slot" AS (
    INSERT INTO "public"."TodoListSize" AS "size" ("userId", "items") VALUES ($1::text, 0)
    ON CONFLICT ("userId") DO UPDATE SET "items" = "size"."items" WHERE "size"."items" < $2::int
    RETURNING nextval('"public"."TodoItem_seq_seq"'::regclass) AS "seq",
      timezone('UTC', clock_timestamp())::timestamp(3) AS "at"
  )
  INSERT INTO "public"."TodoItem" ("id", "userId", "title", "completed", "createdAt", "updatedAt", "seq")
  SELECT $3::uuid, $1::text, $4::text, $5::boolean, "at", "at", "seq" FROM "slot"
  RETURNING "id", "title", "completed", "createdAt", "updatedAt"`;
const TEXT: ArgType = { scalarType: "string", arity: "scalar" };
const INT: ArgType = { scalarType: "int", arity: "scalar" };
const BOOLEAN: ArgType = { scalarType: "boolean", arity: "scalar" };

/**
 * One row of LIST_SQL as both driver adapters return it (adapter-pg and PGlite's, rows as arrays): uuid and
 * text as strings, boolean as boolean, timestamp(3) as ISO 8601 text in UTC ("2026-11-24T10:00:00.12+00:00",
 * what Prisma's client itself turns into a Date). Anything else is refused, not passed on half-typed.
 */
function toRecord(row: unknown[]): TodoRecord {
  const [id, title, completed, createdAt, updatedAt] = row;
  const created = typeof createdAt === "string" ? new Date(createdAt) : undefined;
  const updated = typeof updatedAt === "string" ? new Date(updatedAt) : undefined;
  if (
    typeof id !== "string" ||
    typeof title !== "string" ||
    typeof completed !== "boolean" ||
    created === undefined ||
    Number.isNaN(created.getTime()) ||
    updated === undefined ||
    Number.isNaN(updated.getTime())
  ) {
    throw new Error("the driver adapter returned a todo row of unexpected types");
  }
  return { id, title, completed, createdAt: created, updatedAt: updated };
}

/** The form both adapters give a timestamp(3) in (see toRecord): its text up to the seconds, and the fraction. */
const ADAPTER_TIME = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?\+00:00$/;

/**
 * A timestamp as the adapters return it, as the API writes it (Date's toISOString: milliseconds, `Z`), by
 * rewriting the text instead of making a Date and printing it (~0.1 µs instead of ~2 µs: see ListedTodo).
 * Any other form (a year past 9999, say) goes through a Date as before; text that is no time is refused.
 */
function isoTime(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  const match = ADAPTER_TIME.exec(value);
  if (match !== null) return `${match[1]}.${`${match[2] ?? ""}000`.slice(0, 3)}Z`;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

/** One row of LIST_SQL: the item as the API shows it (toRecord's columns, times as text), then "seq" as text. */
function toListed(row: unknown[]): ListedTodo {
  const [id, title, completed, createdAt, updatedAt, seq] = row;
  const created = isoTime(createdAt);
  const updated = isoTime(updatedAt);
  if (
    typeof id !== "string" ||
    typeof title !== "string" ||
    typeof completed !== "boolean" ||
    created === undefined ||
    updated === undefined ||
    typeof seq !== "string"
  ) {
    throw new Error("the driver adapter returned a todo row of unexpected types");
  }
  return { id, title, completed, createdAt: created, updatedAt: updated, seq };
}

export interface PrismaTodoRepositoryOptions {
  prisma: PrismaClient;
  /**
   * The driver adapter the client runs on, connected once and shared with it (connectShared): the list
   * goes through it directly (see list). The client disposes it.
   */
  adapter: SqlQueryable;
  kind: StorageKind;
  /** Releases what sits under the client (pg pool, PGlite) after the client has disconnected. */
  release: () => Promise<void>;
  onQuery?: QueryObserver | undefined;
  /** Runs every operation through this queue, one at a time (the embedded database: see turn-queue.ts). */
  queue?: TurnQueue | undefined;
}

/** The one TodoRepository: Prisma over a driver adapter (pg for PostgreSQL, PGlite embedded). */
export class PrismaTodoRepository implements TodoRepository {
  readonly kind: StorageKind;
  private readonly prisma: PrismaClient;
  private readonly adapter: SqlQueryable;
  private readonly release: () => Promise<void>;
  private readonly onQuery: QueryObserver | undefined;
  private readonly queue: TurnQueue | undefined;
  private closing: Promise<void> | undefined;

  constructor(options: PrismaTodoRepositoryOptions) {
    this.prisma = options.prisma;
    this.adapter = options.adapter;
    this.kind = options.kind;
    this.release = options.release;
    this.onQuery = options.onQuery;
    this.queue = options.queue;
  }

  list(userId: string, page?: Page): Promise<ListedTodo[]> {
    // The hottest route, so it skips Prisma's client and sends its one statement through the client's own
    // driver adapter (the same pool or PGlite instance, type parsers, statement names and error mapping).
    // Measured per call, 50 in flight over adapter-pg: $queryRaw ~190-220 µs of CPU, the adapter alone
    // ~65-70 µs. $queryRaw serialises the parameters to JSON and parses them back, runs a query plan through
    // Prisma's interpreter, serialises the typed rows and deserialises them again, and logs each step into
    // its debug buffer; that ~125 µs was more than the rest of the request and kept the route under 0.85x of
    // an Express + pg handler (README, "Performance"). findMany cost ~290 µs. The repository tests pin order,
    // paging and types on Postgres and PGlite. The metrics label stays "todoItem.findMany" so existing
    // series continue.
    const after = page?.after;
    const query =
      page === undefined
        ? { sql: LIST_SQL, args: [userId], argTypes: [TEXT] }
        : after === undefined
          ? { sql: LIST_PAGE_SQL, args: [userId, page.limit, page.offset ?? 0], argTypes: [TEXT, INT, INT] }
          : "seq" in after
            ? { sql: LIST_AFTER_SQL, args: [userId, after.seq, page.limit], argTypes: [TEXT, TEXT, INT] }
            : {
                sql: LIST_AFTER_LEGACY_SQL,
                args: [userId, after.createdAt.toISOString(), after.id, page.limit],
                argTypes: [TEXT, TEXT, TEXT, INT],
              };
    return this.timed("todoItem.findMany", async () => (await this.adapter.queryRaw(query)).rows.map(toListed));
  }

  create(userId: string, todo: NewTodo, maxItems: number): Promise<TodoRecord | undefined> {
    // The per-user limit, in the one statement (CREATE_SQL): the CTE upserts the user's TodoListSize row,
    // which takes its row lock, and matches only while the count is under the limit; the INSERT then writes
    // the item only if the CTE returned a row, and the trigger on TodoItem adds it to the count. A second
    // create for the same user waits for that lock and then evaluates the condition on the committed count
    // (ON CONFLICT DO UPDATE always sees the latest version of the row), so two creates racing for the last
    // place never both succeed; on PGlite operations run one at a time anyway. No row back means the list
    // was full and nothing was written. A count (SELECT count(*) ... < limit) in the INSERT would not do:
    // under READ COMMITTED concurrent creates each count without the others' uncommitted rows (measured: 7
    // of 10 got through).
    //
    // Sent through the client's driver adapter, as the list is: Prisma's $queryRaw pipeline around the same
    // statement (parameters to JSON and back, its query plan interpreter, typed rows serialised and parsed
    // again, its debug ring buffer) cost ~100 µs of CPU per create, most of what the cap's statement added
    // over a plain INSERT (README, "Performance"). It writes what todoItem.create wrote: a v4 UUID made here
    // as Prisma's @default(uuid()) does, and one timestamp for createdAt and updatedAt, now taken by the
    // database inside the lock (with seq, the list's order: see CREATE_SQL), so that creation times never
    // run against the list's order; the repository and API tests pin the returned record on both storages.
    return this.timed("todoItem.create", async () => {
      const { rows } = await this.adapter.queryRaw({
        sql: CREATE_SQL,
        args: [userId, maxItems, randomUUID(), todo.title, todo.completed],
        argTypes: [TEXT, INT, TEXT, TEXT, BOOLEAN],
      });
      return rows.length === 0 ? undefined : toRecord(rows[0] as unknown[]);
    });
  }

  async get(userId: string, id: string): Promise<TodoRecord | undefined> {
    // Scoped by id AND owner, like update and delete: another user's item is simply not there.
    const row = await this.timed("todoItem.findFirst", () =>
      this.prisma.todoItem.findFirst({ where: { id, userId }, select: columns }),
    );
    return row ?? undefined;
  }

  async update(userId: string, id: string, patch: TodoPatch): Promise<TodoRecord | undefined> {
    // One statement scoped by id AND owner: another user's item matches nothing and is left untouched,
    // with no window between a read and a write.
    const rows = await this.timed("todoItem.updateManyAndReturn", () =>
      this.prisma.todoItem.updateManyAndReturn({
        where: { id, userId },
        data: {
          ...(patch.title === undefined ? {} : { title: patch.title }),
          ...(patch.completed === undefined ? {} : { completed: patch.completed }),
        },
        select: columns,
      }),
    );
    return rows[0];
  }

  async delete(userId: string, id: string): Promise<boolean> {
    const { count } = await this.timed("todoItem.deleteMany", () =>
      this.prisma.todoItem.deleteMany({ where: { id, userId } }),
    );
    return count > 0;
  }

  async ping(): Promise<void> {
    await this.timed("$queryRaw", () => this.prisma.$queryRaw`SELECT 1`);
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      try {
        await this.prisma.$disconnect();
      } finally {
        await this.release();
      }
    })();
    return this.closing;
  }

  private timed<T>(operation: string, run: () => Promise<T>): Promise<T> {
    // The duration observed is the operation's own, not its wait in the queue (the HTTP histogram has both).
    return this.queue === undefined
      ? this.observed(operation, run)
      : this.queue.run(() => this.observed(operation, run));
  }

  private async observed<T>(operation: string, run: () => Promise<T>): Promise<T> {
    if (this.onQuery === undefined) return run();
    const started = process.hrtime.bigint();
    let ok = false;
    try {
      const result = await run();
      ok = true;
      return result;
    } finally {
      this.onQuery(operation, Number(process.hrtime.bigint() - started) / 1e6, ok);
    }
  }
}
