import { randomBytes } from "node:crypto";
import { ApiError } from "@localdecider/contracts";
import { createTodosClient, TODO_MESSAGES, type TodoItem, type TodosApiError } from "@localdecider/contracts/todos";
import { serve } from "@localdecider/service-kit";
import type { Express } from "express";
import { SignJWT } from "jose";
import { createJwtAuth } from "../src/http/auth";
import {
  appWith,
  buildApp,
  postgresMode,
  STORAGE_MODES,
  type StorageLocation,
  silentLogger,
  type TestApp,
} from "./support/storage-modes";

/** The app listening on a free loopback port, as a client reaches it. */
async function listen(app: Express): Promise<{ url: string; close: () => Promise<void> }> {
  const running = await serve(app, { host: "127.0.0.1", port: 0, logger: silentLogger, drainTimeoutMs: 1000 });
  return { url: `http://127.0.0.1:${running.port}`, close: running.close };
}

const fail = (promise: Promise<unknown>) => promise.then(() => undefined).catch((e: unknown) => e);

describe.each(STORAGE_MODES)("createTodosClient against the running service ($name)", (mode) => {
  let location: StorageLocation;
  let t: TestApp;
  let server: { url: string; close: () => Promise<void> };

  beforeAll(async () => {
    location = await mode.locate();
    t = await buildApp(location.options);
    server = await listen(t.app);
  });

  afterAll(async () => {
    await server?.close();
    await t?.repository.close();
    await location?.dispose();
  });

  it("creates, pages, reads, updates and deletes a user's items with typed results", async () => {
    const client = createTodosClient({ baseUrl: server.url });
    const userId = "client user/1"; // a space and a slash: the client encodes path parameters
    const first = await client.createTodo({ params: { userId }, body: { title: " Milk " } });
    expect(first).toStrictEqual({
      success: true,
      todoItem: expect.objectContaining({ title: "Milk", completed: false }),
    });
    await client.createTodo({ params: { userId }, body: { title: "Bread", completed: true } });

    const page: TodoItem[] = (await client.listTodos({ params: { userId }, query: { limit: 1, page: 2 } })).todoItems;
    expect(page.map((item) => item.title)).toStrictEqual(["Bread"]);
    expect((await client.listTodosV1({ params: { userId } })).map((item) => item.title)).toStrictEqual([
      "Milk",
      "Bread",
    ]);

    const itemId = first.todoItem.id;
    const updated = await client.updateTodo({ params: { userId, itemId }, body: { completed: true } });
    expect(updated.todoItem).toMatchObject({ id: itemId, title: "Milk", completed: true });
    expect(await client.getTodo({ params: { userId, itemId } })).toStrictEqual(updated.todoItem);
    expect(await client.deleteTodo({ params: { userId, itemId } })).toStrictEqual({
      message: "Todo item deleted successfully",
    });
    expect(await client.health()).toStrictEqual({ status: "ok" });
    expect(await client.ready()).toStrictEqual({ status: "ready", storage: mode.name });
  });

  it("a missing item throws ApiError 404 with the service's message and the request id", async () => {
    const client = createTodosClient({ baseUrl: server.url, headers: { "x-request-id": "todos-client-1" } });
    const error = (await fail(
      client.deleteTodo({ params: { userId: "u", itemId: "3f0e8a52-0b1c-4d8e-9a7b-2c4d6e8f0a1b" } }),
    )) as TodosApiError;
    expect(error).toBeInstanceOf(ApiError);
    expect({
      status: error.status,
      message: error.message,
      code: error.code,
      details: error.details,
      requestId: error.requestId,
      operation: error.operation,
    }).toStrictEqual({
      status: 404,
      message: "Todo item not found",
      code: undefined,
      details: undefined,
      requestId: "todos-client-1",
      operation: "DELETE /users/:userId/todos/:itemId",
    });
  });

  it("a body the contract refuses throws ApiError 400 with the field details, and nothing is stored", async () => {
    const client = createTodosClient({ baseUrl: server.url });
    const error = (await fail(client.createTodo({ params: { userId: "v" }, body: { title: "   " } }))) as TodosApiError;
    expect([error.status, error.message, error.details]).toStrictEqual([
      400,
      "Invalid request body",
      [{ path: "title", message: "must not be empty" }],
    ]);
    expect((await client.listTodos({ params: { userId: "v" } })).todoItems).toStrictEqual([]);
  });
});

describe("createTodosClient at the per-user item limit", () => {
  let location: StorageLocation;
  let t: TestApp;
  let server: { url: string; close: () => Promise<void> };

  beforeAll(async () => {
    location = await postgresMode.locate();
    t = await buildApp(location.options);
    server = await listen(appWith(t.repository, { maxItemsPerUser: 1 }));
  });

  afterAll(async () => {
    await server?.close();
    await t?.repository.close();
    await location?.dispose();
  });

  it("a create on a full list throws ApiError 409 with the service's message and details, and nothing is stored", async () => {
    const client = createTodosClient({ baseUrl: server.url });
    await client.createTodo({ params: { userId: "full" }, body: { title: "only" } });
    const error = (await fail(
      client.createTodo({ params: { userId: "full" }, body: { title: "one more" } }),
    )) as TodosApiError;
    expect(error).toBeInstanceOf(ApiError);
    expect([error.status, error.message, error.code, error.details]).toStrictEqual([
      409,
      TODO_MESSAGES.listFull,
      undefined,
      [{ path: "todoItems", message: "holds the most items allowed (1); delete some first" }],
    ]);
    expect((await client.listTodos({ params: { userId: "full" } })).todoItems.map((i) => i.title)).toStrictEqual([
      "only",
    ]);
  });
});

describe("createTodosClient with sign-in on", () => {
  const secret = randomBytes(32).toString("base64url");
  const auth = createJwtAuth({ keys: { secret }, issuer: "https://issuer.test", audience: "todos-api" });
  const token = (sub: string) =>
    new SignJWT({})
      .setProtectedHeader({ alg: "HS256" })
      .setSubject(sub)
      .setIssuer("https://issuer.test")
      .setAudience("todos-api")
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(new TextEncoder().encode(secret));
  let location: StorageLocation;
  let t: TestApp;
  let server: { url: string; close: () => Promise<void> };

  beforeAll(async () => {
    location = await postgresMode.locate();
    t = await buildApp(location.options);
    server = await listen(appWith(t.repository, { auth }));
  });

  afterAll(async () => {
    await server?.close();
    await t?.repository.close();
    await location?.dispose();
  });

  it("sends the token as a bearer; another user's token throws ApiError 403, none throws 401", async () => {
    const alice = createTodosClient({ baseUrl: server.url, token: await token("alice") });
    await alice.createTodo({ params: { userId: "alice" }, body: { title: "Milk" } });
    expect((await alice.listTodos({ params: { userId: "alice" } })).todoItems.map((i) => i.title)).toStrictEqual([
      "Milk",
    ]);
    const forbidden = (await fail(alice.listTodos({ params: { userId: "bob" } }))) as TodosApiError;
    expect([forbidden.status, forbidden.message]).toStrictEqual([403, "Token not valid for this user"]);
    const anonymous = (await fail(
      createTodosClient({ baseUrl: server.url }).listTodos({ params: { userId: "alice" } }),
    )) as TodosApiError;
    expect([anonymous.status, anonymous.message, anonymous.headers.get("www-authenticate")]).toStrictEqual([
      401,
      "Missing bearer token",
      'Bearer realm="todos"',
    ]);
    // /health is open with sign-in on.
    expect(await createTodosClient({ baseUrl: server.url }).health()).toStrictEqual({ status: "ok" });
  });
});
