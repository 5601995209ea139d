import type { PrismaClient } from "../generated/prisma/client";
import type { NewTodo, Page, QueryObserver, StorageKind, TodoPatch, TodoRecord, TodoRepository } from "./repository";

// Only what the API shows: the owner column never leaves the repository.
const columns = { id: true, title: true, completed: true, createdAt: true, updatedAt: true } as const;

export interface PrismaTodoRepositoryOptions {
  prisma: PrismaClient;
  kind: StorageKind;
  /** Releases what sits under the client (pg pool, PGlite) after the client has disconnected. */
  release: () => Promise<void>;
  onQuery?: QueryObserver | undefined;
}

/** The one TodoRepository: Prisma over a driver adapter (pg for PostgreSQL, PGlite embedded). */
export class PrismaTodoRepository implements TodoRepository {
  readonly kind: StorageKind;
  private readonly prisma: PrismaClient;
  private readonly release: () => Promise<void>;
  private readonly onQuery: QueryObserver | undefined;
  private closing: Promise<void> | undefined;

  constructor(options: PrismaTodoRepositoryOptions) {
    this.prisma = options.prisma;
    this.kind = options.kind;
    this.release = options.release;
    this.onQuery = options.onQuery;
  }

  list(userId: string, page?: Page): Promise<TodoRecord[]> {
    // One indexed range scan on (userId, createdAt, id); skip/take bound it when a page is asked for.
    return this.timed("todoItem.findMany", () =>
      this.prisma.todoItem.findMany({
        where: { userId },
        orderBy: [{ createdAt: "asc" }, { id: "asc" }],
        select: columns,
        ...(page === undefined ? {} : { skip: page.offset, take: page.limit }),
      }),
    );
  }

  create(userId: string, todo: NewTodo): Promise<TodoRecord> {
    return this.timed("todoItem.create", () =>
      this.prisma.todoItem.create({
        data: { userId, title: todo.title, completed: todo.completed },
        select: columns,
      }),
    );
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

  private async timed<T>(operation: string, run: () => Promise<T>): Promise<T> {
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
