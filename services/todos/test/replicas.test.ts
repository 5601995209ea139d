import { createTodosClient } from "@localdecider/contracts/todos";
import { createTestDatabase, queryDatabase, type TestDatabase } from "./support/postgres";
import { type RunningService, startService } from "./support/service-process";

/**
 * Several todos processes on one PostgreSQL, as replicas behind a load balancer run: the service keeps no
 * state of its own, so writes through any replica must neither be lost nor duplicated, and replicas that
 * start together must apply the migrations once (Prisma's advisory lock serialises them).
 */

jest.setTimeout(120_000);

const ITEMS = 120;
const IN_FLIGHT = 16;

describe("two service processes on one PostgreSQL", () => {
  let db: TestDatabase;
  let replicas: RunningService[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    const env = { ...process.env, DATABASE_URL: db.url, TODOS_PORT: "0", LOG_LEVEL: "info" };
    // Started at the same moment: both find the database empty and both run the migrator.
    replicas = await Promise.all([startService(env), startService(env)]);
  });

  afterAll(async () => {
    for (const r of replicas) r.child.kill("SIGTERM");
    await Promise.all(replicas.map((r) => r.exited));
    await db?.drop();
  });

  const clients = () => replicas.map((r) => createTodosClient({ baseUrl: `http://127.0.0.1:${r.port}` }));

  /** Runs `count` jobs with at most IN_FLIGHT at once, job i on replica i % 2. */
  async function spread<T>(count: number, job: (i: number) => Promise<T>): Promise<T[]> {
    const results: T[] = new Array(count);
    let next = 0;
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < count) {
          const i = next++;
          results[i] = await job(i);
        }
      }),
    );
    return results;
  }

  it("apply each migration once when they start together", async () => {
    const rows = await queryDatabase<{ migration_name: string; finished: boolean; rolled_back: boolean }>(
      db.url,
      "SELECT migration_name, finished_at IS NOT NULL AS finished, rolled_back_at IS NOT NULL AS rolled_back FROM _prisma_migrations",
    );
    const names = rows.map((r) => r.migration_name);
    expect(names.length).toBeGreaterThan(0);
    expect(new Set(names).size).toBe(names.length);
    expect(rows.every((r) => r.finished && !r.rolled_back)).toBe(true);
  });

  it("lose and duplicate nothing under concurrent creates, updates and deletes through both", async () => {
    const [a, b] = clients() as [ReturnType<typeof createTodosClient>, ReturnType<typeof createTodosClient>];
    const via = (i: number) => (i % 2 === 0 ? a : b);
    const created = await spread(ITEMS, async (i) => {
      const res = await via(i).createTodo({ params: { userId: "shared" }, body: { title: `item ${i}` } });
      return res.todoItem;
    });
    expect(new Set(created.map((t) => t.id)).size).toBe(ITEMS);

    // Every item updated through the replica that did not create it.
    await spread(ITEMS, (i) =>
      via(i + 1).updateTodo({
        params: { userId: "shared", itemId: (created[i] as { id: string }).id },
        body: { completed: true, title: `item ${i} done` },
      }),
    );
    // A third of them deleted by both replicas at once: exactly one delete of each succeeds.
    const doomed = created.filter((_, i) => i % 3 === 0);
    const outcomes = await spread(doomed.length * 2, async (i) => {
      const id = (doomed[Math.floor(i / 2)] as { id: string }).id;
      return via(i)
        .deleteTodo({ params: { userId: "shared", itemId: id } })
        .then(
          () => "deleted",
          (err: { status?: number }) => (err.status === 404 ? "not found" : `error ${err.status}`),
        );
    });
    const perItem = doomed.map((_, k) => [outcomes[2 * k], outcomes[2 * k + 1]].sort());
    expect(perItem).toStrictEqual(doomed.map(() => ["deleted", "not found"]));

    // Both replicas list the same survivors, each once, with the update applied.
    const expected = created
      .map((t, i) => ({ id: t.id, title: `item ${i} done`, completed: true }))
      .filter((_, i) => i % 3 !== 0)
      .sort((x, y) => x.id.localeCompare(y.id));
    for (const client of [a, b]) {
      const items = [];
      for (let page = 1; ; page++) {
        const res = await client.listTodos({ params: { userId: "shared" }, query: { limit: 100, page } });
        items.push(...res.todoItems);
        if (res.todoItems.length < 100) break;
      }
      const seen = items
        .map((t) => ({ id: t.id, title: t.title, completed: t.completed }))
        .sort((x, y) => x.id.localeCompare(y.id));
      expect(seen).toStrictEqual(expected);
    }
    const [{ count }] = (await queryDatabase<{ count: string }>(db.url, 'SELECT count(*) FROM "TodoItem"')) as [
      { count: string },
    ];
    expect(Number(count)).toBe(expected.length);
  });
});
