import { randomUUID } from "node:crypto";
import type { ArgType, SqlQueryable } from "@prisma/driver-adapter-utils";
import type { PrismaClient } from "../generated/prisma/client";
import type { NewTodo, Page, QueryObserver, StorageKind, TodoPatch, TodoRecord, TodoRepository } from "./repository";
import type { TurnQueue } from "./turn-queue";

// Only what the API shows: the owner column never leaves the repository.
const columns = { id: true, title: true, completed: true, createdAt: true, updatedAt: true } as const;

// The list, in the order toRecord reads its columns. Every value is a bind parameter (see statement-names.ts).
const LIST_SQL = `SELECT "id", "title", "completed", "createdAt", "updatedAt" FROM "public"."TodoItem"
  WHERE "userId" = $1 ORDER BY "createdAt" ASC, "id" ASC`;
const LIST_PAGE_SQL = `${LIST_SQL} LIMIT $2 OFFSET $3`;
// A window after an item (a cursor): the row comparison is a range of the (userId, createdAt, id) index, so
// the window costs the same wherever it starts. The time arrives as ISO text in UTC, as the column holds it.
const LIST_AFTER_SQL = `SELECT "id", "title", "completed", "createdAt", "updatedAt" FROM "public"."TodoItem"
  WHERE "userId" = $1 AND ("createdAt", "id") > ($2::timestamp(3), $3::uuid)
  ORDER BY "createdAt" ASC, "id" ASC LIMIT $4`;
// The create, in one statement (see create): the CTE takes the user's TodoListSize row and matches only while
// the count is under the limit ($2); the item is inserted only if it did. The casts name every parameter's
// type, as Prisma's own statement did through its typed arguments.
const CREATE_SQL = `WITH "slot" AS (
    INSERT INTO "public"."TodoListSize" AS "size" ("userId", "items") VALUES ($1::text, 0)
    ON CONFLICT ("userId") DO UPDATE SET "items" = "size"."items" WHERE "size"."items" < $2::int
    RETURNING 1
  )
  INSERT INTO "public"."TodoItem" ("id", "userId", "title", "completed", "createdAt", "updatedAt")
  SELECT $3::uuid, $1::text, $4::text, $5::boolean, $6::timestamp(3), $6::timestamp(3) FROM "slot"
  RETURNING "id", "title", "completed", "createdAt", "updatedAt"`;
const TEXT: ArgType = { scalarType: "string", arity: "scalar" };
const INT: ArgType = { scalarType: "int", arity: "scalar" };
const BOOLEAN: ArgType = { scalarType: "boolean", arity: "scalar" };
const DATETIME: ArgType = { scalarType: "datetime", arity: "scalar" };

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

  list(userId: string, page?: Page): Promise<TodoRecord[]> {
    // The hottest route, so it skips Prisma's client and sends its one statement through the client's own
    // driver adapter (the same pool or PGlite instance, type parsers, statement names and error mapping).
    // Measured per call, 50 in flight over adapter-pg: $queryRaw ~190-220 µs of CPU, the adapter alone
    // ~65-70 µs. $queryRaw serialises the parameters to JSON and parses them back, runs a query plan through
    // Prisma's interpreter, serialises the typed rows and deserialises them again, and logs each step into
    // its debug buffer; that ~125 µs was more than the rest of the request and kept the route under 0.85x of
    // an Express + pg handler (README, "Performance"). findMany cost ~290 µs. The statement is the one
    // findMany sends; the repository tests pin order, paging and types on Postgres and PGlite. The metrics
    // label stays "todoItem.findMany" so existing series continue.
    const query =
      page === undefined
        ? { sql: LIST_SQL, args: [userId], argTypes: [TEXT] }
        : page.after !== undefined
          ? {
              sql: LIST_AFTER_SQL,
              args: [userId, page.after.createdAt.toISOString(), page.after.id, page.limit],
              argTypes: [TEXT, TEXT, TEXT, INT],
            }
          : { sql: LIST_PAGE_SQL, args: [userId, page.limit, page.offset ?? 0], argTypes: [TEXT, INT, INT] };
    return this.timed("todoItem.findMany", async () => (await this.adapter.queryRaw(query)).rows.map(toRecord));
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
    // over a plain INSERT (README, "Performance"). The database does the same work either way: the
    // statement is the one $queryRaw sent. It writes what todoItem.create wrote: a v4 UUID made here as
    // Prisma's @default(uuid()) does, and one timestamp for createdAt and updatedAt (Prisma's now() and
    // @updatedAt); the repository and API tests pin the returned record on both storages.
    return this.timed("todoItem.create", async () => {
      const now = new Date();
      const { rows } = await this.adapter.queryRaw({
        sql: CREATE_SQL,
        args: [userId, maxItems, randomUUID(), todo.title, todo.completed, now],
        argTypes: [TEXT, INT, TEXT, TEXT, BOOLEAN, DATETIME],
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
