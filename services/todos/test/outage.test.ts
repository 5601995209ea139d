import { checkRecordedResponses, metricSample } from "@localdecider/service-kit/test-utils";
import request from "supertest";
import { recorder, todosOpenApi } from "./setup/openapi-responses";
import { ADMIN_URL, createTestDatabase, type TestDatabase } from "./support/postgres";
import { buildApp, type TestApp } from "./support/storage-modes";
import { startTcpProxy, type TcpProxy } from "./support/tcp-proxy";

describe("GET /ready and the API when PostgreSQL goes away (cut by a TCP proxy)", () => {
  let db: TestDatabase;
  let proxy: TcpProxy;
  let t: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    proxy = await startTcpProxy(Number(new URL(ADMIN_URL).port || 5432), new URL(ADMIN_URL).hostname);
    const viaProxy = new URL(db.url);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    t = await buildApp({ databaseUrl: viaProxy.toString(), dataDir: "unused" });
  });

  afterAll(async () => {
    await t?.repository.close();
    await proxy?.close();
    await db?.drop();
  });

  it("when the database is cut, answers 503 on /ready and 500 on requests; when it returns, recovers with nothing lost", async () => {
    const user = "outage-user";
    const before = await request(t.app).post(`/users/${user}/todos`).send({ title: "acknowledged" }).expect(201);
    await request(t.app).get("/ready").expect(200, { status: "ready", storage: "postgres" });

    await proxy.cut();
    await request(t.app).get("/ready").expect(503, { error: "Database unavailable" });
    await request(t.app).get(`/users/${user}/todos`).expect(500, { error: "Internal server error" });
    await request(t.app).post(`/users/${user}/todos`).send({ title: "refused" }).expect(500, {
      error: "Internal server error",
    });
    await request(t.app)
      .put(`/users/${user}/todos/${before.body.todoItem.id}`)
      .send({ title: "refused" })
      .expect(500, { error: "Internal server error" });
    await request(t.app).get("/health").expect(200, { status: "ok" });

    await proxy.restore();
    await request(t.app).get("/ready").expect(200, { status: "ready", storage: "postgres" });
    const after = await request(t.app).get(`/users/${user}/todos`).expect(200);
    expect(after.body).toStrictEqual({ todoItems: [before.body.todoItem] });
    await request(t.app).post(`/users/${user}/todos`).send({ title: "after" }).expect(201);

    // The failed queries show in the database histogram by outcome.
    const metrics = (await request(t.app).get("/metrics").expect(200)).text;
    const failed = (operation: string) =>
      metricSample(metrics, "todos_db_query_duration_seconds_count", { operation, outcome: "error" });
    expect([failed("$queryRaw"), failed("todoItem.findMany"), failed("todoItem.create")]).toStrictEqual([1, 1, 1]);
  });
});

// The failure answers match /openapi.json too (every response is checked by setup/openapi-responses.ts).
afterAll(() => {
  expect(checkRecordedResponses(todosOpenApi(), recorder.responses)).toEqual(
    expect.arrayContaining(["GET /ready 503", "GET /users/{userId}/todos 500", "POST /users/{userId}/todos 500"]),
  );
});
