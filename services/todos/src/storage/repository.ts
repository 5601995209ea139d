/** One todo item as storage returns it, owner left out: callers always know whose items they asked for. */
export interface TodoRecord {
  id: string;
  title: string;
  completed: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export interface NewTodo {
  title: string;
  completed: boolean;
}

export interface TodoPatch {
  title?: string | undefined;
  completed?: boolean | undefined;
}

/**
 * A listed item: the item as the API shows it (the record with its times as ISO 8601 text in UTC,
 * `2026-11-24T10:00:00.120Z`), and its place in the list's order (see ListPosition). The list hands out
 * text, not Dates: a Date made from each time and turned back into text cost ~2 µs a time, 80 µs for a
 * list of 20 items (measured here), the largest cost of the service's own code on the list route.
 */
export interface ListedTodo {
  id: string;
  title: string;
  completed: boolean;
  createdAt: string;
  updatedAt: string;
  /** The item's number in the list's order, as decimal text (a Postgres bigint; can pass 2^53). */
  seq: string;
}

/**
 * Where a window after an item starts: after the item numbered `seq` (the cursor the service hands out),
 * or, for a cursor handed out before the list was ordered by seq, after the item of that creation time and
 * id (where it stood in the old (createdAt, id) order: see prisma-repository.ts).
 */
export type ListPosition = { seq: string } | { createdAt: Date; id: string };

/** A window of the ordered list: at most `limit` items, skipping `offset` items or starting `after` an item. */
export interface Page {
  limit: number;
  offset?: number | undefined;
  after?: ListPosition | undefined;
}

export type StorageKind = "postgres" | "pglite";

/**
 * Called after every database operation, so query latency metrics can be wired in without touching the
 * repository: `operation` is e.g. "todoItem.findMany", `ok` false when it threw.
 */
export type QueryObserver = (operation: string, durationMs: number, ok: boolean) => void;

/**
 * Everything the HTTP layer may do with stored todos. Every method is scoped by the owner: an item of
 * another user is indistinguishable from one that does not exist.
 */
export interface TodoRepository {
  readonly kind: StorageKind;
  /**
   * The user's items in the list's order, the order their creates committed in (ListedTodo.seq); all of
   * them unless a page is given. A page `after` an item is a seek in the list's index, however far into the
   * list it starts.
   */
  list(userId: string, page?: Page): Promise<ListedTodo[]>;
  /**
   * The new item, or undefined when the user already holds `maxItems` items (or more): nothing is written
   * then. Decided in the database under a per-user lock, so concurrent creates never exceed `maxItems`.
   */
  create(userId: string, todo: NewTodo, maxItems: number): Promise<TodoRecord | undefined>;
  /** The user's item with that id, or undefined when the user has none (another user's item included). */
  get(userId: string, id: string): Promise<TodoRecord | undefined>;
  /** The updated item, or undefined when the user has no item with that id (nothing is changed then). */
  update(userId: string, id: string, patch: TodoPatch): Promise<TodoRecord | undefined>;
  /** Whether an item was deleted. */
  delete(userId: string, id: string): Promise<boolean>;
  /** Resolves when the database answers a trivial query; rejects with the reason otherwise. */
  ping(): Promise<void>;
  /** Releases the client and the connection pool or embedded database. */
  close(): Promise<void>;
}
