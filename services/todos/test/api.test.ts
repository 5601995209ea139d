import { randomUUID } from "node:crypto";
import { checkRecordedResponses } from "@localdecider/service-kit/test-utils";
import type { Express } from "express";
import request from "supertest";
import { recorder, todosOpenApi } from "./setup/openapi-responses";
import { holdWrites } from "./support/postgres";
import { appWith, STORAGE_MODES, suiteApp } from "./support/storage-modes";

const ISO = expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
const UUID = expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
const INVALID_BODY = { error: "Invalid request body" };
const INTERNAL = { error: "Internal server error" };
const NOT_FOUND = { error: "Todo item not found" };
const NON_OBJECTS: [string, string][] = [
  ["null", "null"],
  ["an array", '[{"title":"x"}]'],
  ["a string", '"title"'],
  ["a number", "42"],
  ["true", "true"],
  ["false", "false"],
];

describe.each(STORAGE_MODES)("todos API on $name", (mode) => {
  const t = suiteApp(mode);

  // Each test works on its own users, so one app per storage mode is shared safely.
  const newUser = () => `user-${randomUUID()}`;
  const list = async (userId: string) => {
    const res = await request(t.app)
      .get(`/users/${encodeURIComponent(userId)}/todos`)
      .expect(200);
    return res.body.todoItems as { id: string; title: string; completed: boolean }[];
  };
  const create = async (userId: string, body: object) => {
    const res = await request(t.app)
      .post(`/users/${encodeURIComponent(userId)}/todos`)
      .send(body)
      .expect(201);
    return res.body.todoItem as { id: string; title: string; completed: boolean; createdAt: string; updatedAt: string };
  };

  describe("GET /health", () => {
    it("when the process is up, answers 200 { status: ok }", async () => {
      const res = await request(t.app).get("/health").expect(200);
      expect(res.body).toStrictEqual({ status: "ok" });
    });
  });

  describe("GET /ready", () => {
    it("when the database answers, answers 200 with the storage mode", async () => {
      const res = await request(t.app).get("/ready").expect(200);
      expect(res.body).toStrictEqual({ status: "ready", storage: mode.name });
    });
  });

  describe("GET /users/:userId/todos", () => {
    it("when the user has no items, answers 200 with an empty list", async () => {
      const res = await request(t.app).get(`/users/${newUser()}/todos`).expect(200);
      expect(res.body).toStrictEqual({ todoItems: [] });
    });

    it("when the user has items, lists exactly them in creation order with all fields", async () => {
      const user = newUser();
      const a = await create(user, { title: "first" });
      const b = await create(user, { title: "second", completed: true });
      const res = await request(t.app).get(`/users/${user}/todos`).expect(200);
      expect(res.body).toStrictEqual({ todoItems: [a, b] });
      expect(res.body.todoItems.map((i: { title: string }) => i.title).sort()).toStrictEqual(["first", "second"]);
    });

    it("when two users have items, each sees only their own", async () => {
      const alice = newUser();
      const bob = newUser();
      const a = await create(alice, { title: "alice's" });
      const b = await create(bob, { title: "bob's" });
      expect(await list(alice)).toStrictEqual([a]);
      expect(await list(bob)).toStrictEqual([b]);
    });

    it("when items are created one after another, lists them in the order they were created, times never running against it", async () => {
      const user = newUser();
      const created = [];
      for (const title of ["e", "d", "c", "b", "a"]) created.push(await create(user, { title }));
      // The order is the creates' commit order (docs/todos-paging.md), not (createdAt, id): items created in
      // the same millisecond keep their order whatever their ids.
      expect(await list(user)).toStrictEqual(created);
      const times = created.map((i) => i.createdAt);
      expect(times).toStrictEqual([...times].sort());
    });

    it("when limit and page are given, answers that window of the ordered list", async () => {
      const user = newUser();
      for (const title of ["1", "2", "3", "4", "5"]) await create(user, { title });
      const all = await list(user);
      const page = async (query: string) =>
        (await request(t.app).get(`/users/${user}/todos?${query}`).expect(200)).body.todoItems;
      expect(await page("limit=2&page=1")).toStrictEqual(all.slice(0, 2));
      expect(await page("limit=2&page=2")).toStrictEqual(all.slice(2, 4));
      expect(await page("limit=2&page=3")).toStrictEqual(all.slice(4));
      expect(await page("limit=2&page=4")).toStrictEqual([]);
      expect(await page("limit=3")).toStrictEqual(all.slice(0, 3));
      expect(await page("page=1")).toStrictEqual(all);
      expect(await page("page=2")).toStrictEqual([]);
      expect(await page("limit=100&page=1000000")).toStrictEqual([]);
      expect(await page("other=x")).toStrictEqual(all);
    });

    it.each([
      ["limit=0", "limit", "must be a positive integer"],
      ["limit=101", "limit", "must be at most 100"],
      ["limit=-1", "limit", "must be a positive integer"],
      ["limit=abc", "limit", "must be a positive integer"],
      ["limit=1.5", "limit", "must be a positive integer"],
      ["limit=", "limit", "must be a positive integer"],
      ["limit=1&limit=2", "limit", "must be given once"],
      ["page=0", "page", "must be a positive integer"],
      ["page=1000001", "page", "must be at most 1000000"],
      ["page=1e3", "page", "must be a positive integer"],
    ])("when the query is %s, answers 400 naming the parameter", async (query, path, message) => {
      const res = await request(t.app).get(`/users/${newUser()}/todos?${query}`).expect(400);
      expect(res.body).toStrictEqual({ error: "Invalid query parameters", details: [{ path, message }] });
    });

    it("when the userId is longer than 128 characters, answers 400", async () => {
      const res = await request(t.app)
        .get(`/users/${"u".repeat(129)}/todos`)
        .expect(400);
      expect(res.body).toStrictEqual({
        error: "Invalid userId",
        details: [{ path: "userId", message: "must be 1-128 characters" }],
      });
    });

    it("when the userId is 128 characters (or 128 emoji), answers 200", async () => {
      await request(t.app)
        .get(`/users/${"u".repeat(128)}/todos`)
        .expect(200);
      await request(t.app)
        .get(`/users/${encodeURIComponent("😀".repeat(128))}/todos`)
        .expect(200);
    });

    it("when the userId holds a NUL character, answers 400", async () => {
      const res = await request(t.app).get("/users/a%00b/todos").expect(400);
      expect(res.body).toStrictEqual({
        error: "Invalid userId",
        details: [{ path: "userId", message: "must not contain NUL or unpaired surrogate characters" }],
      });
    });

    it("when the userId is not valid percent-encoding, answers 400", async () => {
      const res = await request(t.app).get("/users/%E0%A4%A/todos").expect(400);
      expect(res.body).toStrictEqual({ error: "Invalid path parameter" });
    });

    it("when the userId needs percent-encoding, stores and lists under the decoded id", async () => {
      const user = `ü/ser ${randomUUID()}?#`;
      const item = await create(user, { title: "odd owner" });
      expect(await list(user)).toStrictEqual([item]);
    });
  });

  describe("GET /v1/user/:userId/todos", () => {
    it("when the user has items, answers the same list as a bare array", async () => {
      const user = newUser();
      await create(user, { title: "one" });
      await create(user, { title: "two" });
      const res = await request(t.app).get(`/v1/user/${user}/todos`).expect(200);
      expect(res.body).toStrictEqual(await list(user));
      expect(res.body).toHaveLength(2);
    });

    it("when limit is invalid, answers 400 like the main list", async () => {
      const res = await request(t.app).get(`/v1/user/${newUser()}/todos?limit=0`).expect(400);
      expect(res.body).toStrictEqual({
        error: "Invalid query parameters",
        details: [{ path: "limit", message: "must be a positive integer" }],
      });
    });
  });

  describe("POST /users/:userId/todos", () => {
    it("when the body has a title, answers 201 with the new item, trimmed, not completed, and its Location", async () => {
      const user = newUser();
      const res = await request(t.app).post(`/users/${user}/todos`).send({ title: "  Buy milk \n" }).expect(201);
      expect(res.body).toStrictEqual({
        success: true,
        todoItem: { id: UUID, title: "Buy milk", completed: false, createdAt: ISO, updatedAt: ISO },
      });
      expect(res.headers.location).toBe(`/users/${user}/todos/${res.body.todoItem.id}`);
      expect(await list(user)).toStrictEqual([res.body.todoItem]);
    });

    it("when completed is true, stores it", async () => {
      const user = newUser();
      const item = await create(user, { title: "done already", completed: true });
      expect(item.completed).toBe(true);
      expect(await list(user)).toStrictEqual([item]);
    });

    it("when the body carries id, userId and unknown fields, ignores them", async () => {
      const user = newUser();
      const other = newUser();
      const forcedId = randomUUID();
      const item = await create(user, { title: "mine", id: forcedId, userId: other, extra: { x: 1 } });
      expect(item.id).not.toBe(forcedId);
      expect(await list(user)).toStrictEqual([item]);
      expect(await list(other)).toStrictEqual([]);
    });

    it("when the title is 500 characters (or 500 emoji), accepts it", async () => {
      const user = newUser();
      expect((await create(user, { title: "t".repeat(500) })).title).toBe("t".repeat(500));
      expect((await create(user, { title: "😀".repeat(500) })).title).toBe("😀".repeat(500));
    });

    it.each(NON_OBJECTS)("when the body is %s, answers 400 { error } exactly and creates nothing", async (_n, raw) => {
      const user = newUser();
      const res = await request(t.app)
        .post(`/users/${user}/todos`)
        .set("content-type", "application/json")
        .send(raw)
        .expect(400);
      expect(res.body).toStrictEqual(INVALID_BODY);
      expect(await list(user)).toStrictEqual([]);
    });

    it.each([
      ["no title", {}, [{ path: "title", message: "is required" }]],
      ["a numeric title", { title: 5 }, [{ path: "title", message: "must be a string" }]],
      ["an empty title", { title: "" }, [{ path: "title", message: "must not be empty" }]],
      ["a blank title", { title: "   \t" }, [{ path: "title", message: "must not be empty" }]],
      [
        "a 501-character title",
        { title: "x".repeat(501) },
        [{ path: "title", message: "must be at most 500 characters" }],
      ],
      [
        "a title with NUL",
        { title: "a\u0000b" },
        [{ path: "title", message: "must not contain NUL or unpaired surrogate characters" }],
      ],
      [
        "a non-boolean completed",
        { title: "ok", completed: "yes" },
        [{ path: "completed", message: "must be a boolean" }],
      ],
      [
        "two bad fields",
        { title: null, completed: 1 },
        [
          { path: "title", message: "must be a string" },
          { path: "completed", message: "must be a boolean" },
        ],
      ],
    ])("when the body has %s, answers 400 with details and creates nothing", async (_n, body, details) => {
      const user = newUser();
      const res = await request(t.app).post(`/users/${user}/todos`).send(body).expect(400);
      expect(res.body).toStrictEqual({ ...INVALID_BODY, details });
      expect(await list(user)).toStrictEqual([]);
    });

    it("when the title holds an unpaired surrogate, answers 400 and creates nothing", async () => {
      const user = newUser();
      const res = await request(t.app)
        .post(`/users/${user}/todos`)
        .set("content-type", "application/json")
        .send('{"title":"a\\ud800b"}')
        .expect(400);
      expect(res.body).toStrictEqual({
        ...INVALID_BODY,
        details: [{ path: "title", message: "must not contain NUL or unpaired surrogate characters" }],
      });
      expect(await list(user)).toStrictEqual([]);
    });

    it("when the body is not valid JSON, answers the seed's 500 and creates nothing", async () => {
      const user = newUser();
      const res = await request(t.app)
        .post(`/users/${user}/todos`)
        .set("content-type", "application/json")
        .send('{"title": "x"')
        .expect(500);
      expect(res.body).toStrictEqual(INTERNAL);
      expect(await list(user)).toStrictEqual([]);
    });

    it("when the body is not sent as JSON, answers 400 and creates nothing", async () => {
      const user = newUser();
      const res = await request(t.app)
        .post(`/users/${user}/todos`)
        .set("content-type", "text/plain")
        .send('{"title":"x"}')
        .expect(400);
      expect(res.body).toStrictEqual(INVALID_BODY);
      await request(t.app).post(`/users/${user}/todos`).expect(400, INVALID_BODY);
      expect(await list(user)).toStrictEqual([]);
    });

    it("when the body is a corrupt gzip stream, answers 400 and creates nothing", async () => {
      const user = newUser();
      const res = await request(t.app)
        .post(`/users/${user}/todos`)
        .set("content-type", "application/json")
        .set("content-encoding", "gzip")
        .send("not gzip at all")
        .expect(400);
      expect(res.body).toStrictEqual(INVALID_BODY);
      expect(await list(user)).toStrictEqual([]);
    });

    it("when the body is in an unknown content encoding, answers 415 and creates nothing", async () => {
      const user = newUser();
      const res = await request(t.app)
        .post(`/users/${user}/todos`)
        .set("content-type", "application/json")
        .set("content-encoding", "xyz")
        .send('{"title":"x"}')
        .expect(415);
      expect(res.body).toStrictEqual({ error: "Unsupported request body encoding" });
      expect(await list(user)).toStrictEqual([]);
    });

    it("when the body is over 64 KiB, answers 413 and creates nothing", async () => {
      const user = newUser();
      const res = await request(t.app)
        .post(`/users/${user}/todos`)
        .send({ title: "x", padding: "p".repeat(64 * 1024) })
        .expect(413);
      expect(res.body).toStrictEqual({ error: "Request body too large" });
      expect(await list(user)).toStrictEqual([]);
    });

    it("when the userId is too long, answers 400 and creates nothing", async () => {
      const res = await request(t.app)
        .post(`/users/${"u".repeat(129)}/todos`)
        .send({ title: "x" })
        .expect(400);
      expect(res.body).toStrictEqual({
        error: "Invalid userId",
        details: [{ path: "userId", message: "must be 1-128 characters" }],
      });
    });

    it("when 50 creates for one user run in parallel, stores exactly 50 distinct items", async () => {
      const user = newUser();
      const titles = Array.from({ length: 50 }, (_, i) => `item ${i}`);
      const responses = await Promise.all(
        titles.map((title) => request(t.app).post(`/users/${user}/todos`).send({ title })),
      );
      expect(responses.map((r) => r.status)).toStrictEqual(titles.map(() => 201));
      const items = await list(user);
      expect(items).toHaveLength(50);
      expect(new Set(items.map((i) => i.id)).size).toBe(50);
      expect(items.map((i) => i.title).sort()).toStrictEqual([...titles].sort());
    });
  });

  describe("POST /users/:userId/todos at the per-user item limit", () => {
    const full = (limit: number) => ({
      error: "Todo list is full",
      details: [{ path: "todoItems", message: `holds the most items allowed (${limit}); delete some first` }],
    });
    const post = (app: Express, user: string, title: string) =>
      request(app)
        .post(`/users/${encodeURIComponent(user)}/todos`)
        .send({ title });

    it("when the list holds the limit, answers 409 with the whole body and changes nothing; a delete makes room again", async () => {
      const app = appWith(t.repository, { maxItemsPerUser: 3 });
      const user = newUser();
      for (const title of ["a", "b", "c"]) await post(app, user, title).expect(201);
      const before = await list(user);
      const res = await post(app, user, "d").expect(409);
      expect(res.body).toStrictEqual(full(3));
      expect(res.headers.location).toBeUndefined();
      expect(await list(user)).toStrictEqual(before);
      // Another user's list is a list of its own.
      await post(app, newUser(), "elsewhere").expect(201);
      // A full list still reads, updates and deletes.
      await request(app).put(`/users/${user}/todos/${before[0]?.id}`).send({ completed: true }).expect(200);
      await request(app).delete(`/users/${user}/todos/${before[1]?.id}`).expect(200);
      await post(app, user, "d").expect(201);
      expect((await list(user)).map((i) => i.title)).toStrictEqual(["a", "c", "d"]);
      await post(app, user, "e").expect(409, full(3));
    });

    it("when 10 creates race for the last free place, exactly one gets 201, the others 409, and the list holds the limit", async () => {
      const app = appWith(t.repository, { maxItemsPerUser: 4 });
      const user = newUser();
      for (const title of ["a", "b", "c"]) await post(app, user, title).expect(201);
      // On PostgreSQL the ten statements are held at the table until all ten have arrived (the pool has 10
      // connections), then start together. PGlite runs one statement at a time anyway.
      const url = t.options.databaseUrl;
      const held = url === undefined ? undefined : await holdWrites(url);
      let answers: request.Response[];
      try {
        // `.then` sends each request now, before the wait below.
        const racing = Promise.all(Array.from({ length: 10 }, (_, i) => post(app, user, `racer ${i}`).then((r) => r)));
        await held?.waitingFor(10);
        await held?.release();
        answers = await racing;
      } finally {
        await held?.release();
      }
      const statuses = answers.map((res) => res.status).sort();
      expect(statuses).toStrictEqual([201, 409, 409, 409, 409, 409, 409, 409, 409, 409]);
      for (const res of answers.filter((r) => r.status === 409)) expect(res.body).toStrictEqual(full(4));
      const winner = answers.find((res) => res.status === 201)?.body.todoItem;
      const titles = (await list(user)).map((i) => i.title).sort();
      expect(titles).toStrictEqual(["a", "b", "c", winner?.title].sort());
    });

    it("when the limit is lowered below a list's size, the list stays whole and creates get 409 until it is under the limit", async () => {
      const user = newUser();
      for (const title of ["a", "b", "c", "d"]) await post(t.app, user, title).expect(201);
      const lowered = appWith(t.repository, { maxItemsPerUser: 2 });
      await post(lowered, user, "e").expect(409, full(2));
      const items = await list(user);
      expect(items.map((i) => i.title)).toStrictEqual(["a", "b", "c", "d"]);
      await request(lowered).delete(`/users/${user}/todos/${items[0]?.id}`).expect(200);
      await request(lowered).delete(`/users/${user}/todos/${items[1]?.id}`).expect(200);
      await post(lowered, user, "e").expect(409, full(2));
      await request(lowered).delete(`/users/${user}/todos/${items[2]?.id}`).expect(200);
      await post(lowered, user, "e").expect(201);
    });
  });

  describe("GET /users/:userId/todos/:itemId", () => {
    it("when the item exists, answers 200 with it: where the create's Location points", async () => {
      const user = newUser();
      const res = await request(t.app).post(`/users/${user}/todos`).send({ title: "find me" }).expect(201);
      const got = await request(t.app)
        .get(res.headers.location as string)
        .expect(200);
      expect(got.body).toStrictEqual(res.body.todoItem);
    });

    it("when the itemId is in upper case, finds the same item", async () => {
      const user = newUser();
      const item = await create(user, { title: "case" });
      await request(t.app).get(`/users/${user}/todos/${item.id.toUpperCase()}`).expect(200, item);
    });

    it("when the item was updated, answers its new state", async () => {
      const user = newUser();
      const item = await create(user, { title: "before" });
      const put = await request(t.app).put(`/users/${user}/todos/${item.id}`).send({ completed: true }).expect(200);
      await request(t.app).get(`/users/${user}/todos/${item.id}`).expect(200, put.body.todoItem);
    });

    it("when the item belongs to another user, answers 404 and shows nothing of it", async () => {
      const item = await create(newUser(), { title: "owner's secret" });
      const res = await request(t.app).get(`/users/${newUser()}/todos/${item.id}`).expect(404);
      expect(res.body).toStrictEqual(NOT_FOUND);
    });

    it("when the item was deleted, or the itemId is malformed, answers 404", async () => {
      const user = newUser();
      const item = await create(user, { title: "gone" });
      await request(t.app).delete(`/users/${user}/todos/${item.id}`).expect(200);
      await request(t.app).get(`/users/${user}/todos/${item.id}`).expect(404, NOT_FOUND);
      await request(t.app).get(`/users/${user}/todos/nope`).expect(404, NOT_FOUND);
    });

    it("when the userId is too long, answers 400", async () => {
      const res = await request(t.app)
        .get(`/users/${"u".repeat(129)}/todos/${randomUUID()}`)
        .expect(400);
      expect(res.body).toStrictEqual({
        error: "Invalid userId",
        details: [{ path: "userId", message: "must be 1-128 characters" }],
      });
    });
  });

  describe("PUT /users/:userId/todos/:itemId", () => {
    it("when the title changes, answers 200 with the updated item and stores it", async () => {
      const user = newUser();
      const item = await create(user, { title: "old" });
      const res = await request(t.app).put(`/users/${user}/todos/${item.id}`).send({ title: " new " }).expect(200);
      expect(res.body).toStrictEqual({
        success: true,
        todoItem: { ...item, title: "new", updatedAt: ISO },
      });
      expect(await list(user)).toStrictEqual([res.body.todoItem]);
    });

    it("when only completed changes, keeps the title", async () => {
      const user = newUser();
      const item = await create(user, { title: "keep me" });
      const res = await request(t.app).put(`/users/${user}/todos/${item.id}`).send({ completed: true }).expect(200);
      expect(res.body).toStrictEqual({
        success: true,
        todoItem: { ...item, completed: true, updatedAt: ISO },
      });
    });

    it("when both fields change and id/userId are in the body, changes the fields but not identity or owner", async () => {
      const user = newUser();
      const other = newUser();
      const item = await create(user, { title: "a" });
      const res = await request(t.app)
        .put(`/users/${user}/todos/${item.id}`)
        .send({ title: "b", completed: true, id: randomUUID(), userId: other })
        .expect(200);
      expect(res.body.todoItem).toStrictEqual({ ...item, title: "b", completed: true, updatedAt: ISO });
      expect(await list(user)).toStrictEqual([res.body.todoItem]);
      expect(await list(other)).toStrictEqual([]);
    });

    it("when the itemId is in upper case, finds the item", async () => {
      const user = newUser();
      const item = await create(user, { title: "a" });
      await request(t.app).put(`/users/${user}/todos/${item.id.toUpperCase()}`).send({ completed: true }).expect(200);
    });

    it("when the item belongs to another user, answers 404 and changes nothing", async () => {
      const owner = newUser();
      const item = await create(owner, { title: "owner's" });
      const res = await request(t.app)
        .put(`/users/${newUser()}/todos/${item.id}`)
        .send({ title: "stolen" })
        .expect(404);
      expect(res.body).toStrictEqual(NOT_FOUND);
      expect(await list(owner)).toStrictEqual([item]);
    });

    it("when no item has the id, answers 404", async () => {
      const res = await request(t.app)
        .put(`/users/${newUser()}/todos/${randomUUID()}`)
        .send({ title: "x" })
        .expect(404);
      expect(res.body).toStrictEqual(NOT_FOUND);
    });

    it.each(["not-a-uuid", "1", "00000000-0000-0000-0000-00000000000g", "%20"])(
      "when the itemId is malformed (%s), answers 404",
      async (itemId) => {
        const res = await request(t.app).put(`/users/${newUser()}/todos/${itemId}`).send({ title: "x" }).expect(404);
        expect(res.body).toStrictEqual(NOT_FOUND);
      },
    );

    it.each(NON_OBJECTS)("when the body is %s, answers 400 { error } exactly and changes nothing", async (_n, raw) => {
      const user = newUser();
      const item = await create(user, { title: "a" });
      const res = await request(t.app)
        .put(`/users/${user}/todos/${item.id}`)
        .set("content-type", "application/json")
        .send(raw)
        .expect(400);
      expect(res.body).toStrictEqual(INVALID_BODY);
      expect(await list(user)).toStrictEqual([item]);
    });

    it.each([
      ["no fields", {}, [{ path: "", message: "must contain at least one of title, completed" }]],
      ["only unknown fields", { done: true }, [{ path: "", message: "must contain at least one of title, completed" }]],
      ["an empty title", { title: " " }, [{ path: "title", message: "must not be empty" }]],
      ["a long title", { title: "y".repeat(501) }, [{ path: "title", message: "must be at most 500 characters" }]],
      ["a null completed", { completed: null }, [{ path: "completed", message: "must be a boolean" }]],
    ])("when the body has %s, answers 400 with details and changes nothing", async (_n, body, details) => {
      const user = newUser();
      const item = await create(user, { title: "a" });
      const res = await request(t.app).put(`/users/${user}/todos/${item.id}`).send(body).expect(400);
      expect(res.body).toStrictEqual({ ...INVALID_BODY, details });
      expect(await list(user)).toStrictEqual([item]);
    });

    it("when the body is not valid JSON, answers the seed's 500 and changes nothing", async () => {
      const user = newUser();
      const item = await create(user, { title: "a" });
      const res = await request(t.app)
        .put(`/users/${user}/todos/${item.id}`)
        .set("content-type", "application/json")
        .send("{title: b}")
        .expect(500);
      expect(res.body).toStrictEqual(INTERNAL);
      expect(await list(user)).toStrictEqual([item]);
    });

    it("when the body is over 64 KiB, answers 413 and changes nothing", async () => {
      const user = newUser();
      const item = await create(user, { title: "a" });
      const res = await request(t.app)
        .put(`/users/${user}/todos/${item.id}`)
        .send({ title: "b", padding: "p".repeat(70_000) })
        .expect(413);
      expect(res.body).toStrictEqual({ error: "Request body too large" });
      expect(await list(user)).toStrictEqual([item]);
    });
  });

  describe("DELETE /users/:userId/todos/:itemId", () => {
    it("when the item exists, answers 200 with the seed's message and removes only it", async () => {
      const user = newUser();
      const gone = await create(user, { title: "gone" });
      const kept = await create(user, { title: "kept" });
      const res = await request(t.app).delete(`/users/${user}/todos/${gone.id}`).expect(200);
      expect(res.body).toStrictEqual({ message: "Todo item deleted successfully" });
      expect(await list(user)).toStrictEqual([kept]);
    });

    it("when the item was already deleted, answers 404", async () => {
      const user = newUser();
      const item = await create(user, { title: "once" });
      await request(t.app).delete(`/users/${user}/todos/${item.id}`).expect(200);
      const res = await request(t.app).delete(`/users/${user}/todos/${item.id}`).expect(404);
      expect(res.body).toStrictEqual(NOT_FOUND);
    });

    it("when the item belongs to another user, answers 404 and deletes nothing", async () => {
      const owner = newUser();
      const item = await create(owner, { title: "owner's" });
      const res = await request(t.app).delete(`/users/${newUser()}/todos/${item.id}`).expect(404);
      expect(res.body).toStrictEqual(NOT_FOUND);
      expect(await list(owner)).toStrictEqual([item]);
    });

    it("when the itemId is malformed, answers 404", async () => {
      const res = await request(t.app).delete(`/users/${newUser()}/todos/nope`).expect(404);
      expect(res.body).toStrictEqual(NOT_FOUND);
    });

    it("when the userId is too long, answers 400", async () => {
      const res = await request(t.app)
        .delete(`/users/${"u".repeat(129)}/todos/${randomUUID()}`)
        .expect(400);
      expect(res.body).toStrictEqual({
        error: "Invalid userId",
        details: [{ path: "userId", message: "must be 1-128 characters" }],
      });
    });
  });

  describe("unknown routes and request ids", () => {
    it("when no route matches, answers 404 JSON", async () => {
      const res = await request(t.app).get("/nope").expect(404);
      expect(res.body).toStrictEqual({ error: "Not found" });
      await request(t.app).get("/users//todos").expect(404, { error: "Not found" });
    });

    it("when the path exists but not for the method (PATCH on a todo), answers 405 with Allow and changes nothing", async () => {
      const user = newUser();
      const item = await create(user, { title: "kept" });
      const res = await request(t.app).patch(`/users/${user}/todos/${item.id}`).send({ title: "patched" }).expect(405);
      expect(res.headers.allow).toBe("GET, HEAD, PUT, DELETE, OPTIONS");
      expect(res.body).toStrictEqual({ error: "Method PATCH not allowed on this path" });
      const onList = await request(t.app).patch(`/users/${user}/todos`).expect(405);
      expect(onList.headers.allow).toBe("GET, HEAD, POST, OPTIONS");
      await request(t.app).options(`/users/${user}/todos`).expect(204);
      expect(await list(user)).toStrictEqual([item]);
      await request(t.app).get("/users//todos").expect(404, { error: "Not found" });
    });

    it("when GET or DELETE carry a body (even malformed or huge), ignore it", async () => {
      const user = newUser();
      const item = await create(user, { title: "kept" });
      await request(t.app)
        .get(`/users/${user}/todos`)
        .set("content-type", "application/json")
        .send("{not json")
        .expect(200, { todoItems: [item] });
      await request(t.app)
        .delete(`/users/${user}/todos/${item.id}`)
        .set("content-type", "application/json")
        .send(`"${"p".repeat(70_000)}"`)
        .expect(200, { message: "Todo item deleted successfully" });
    });

    it("when the client sends x-request-id, echoes it; otherwise creates one", async () => {
      const given = await request(t.app).get("/health").set("x-request-id", "abc-123").expect(200);
      expect(given.headers["x-request-id"]).toBe("abc-123");
      const created = await request(t.app).get("/health").expect(200);
      expect(created.headers["x-request-id"]).toEqual(UUID);
    });
  });
});

// Every response above was checked against /openapi.json (setup/openapi-responses.ts); these are the routes
// and statuses the suite covered. The database failures (GET /ready 503, storage 500s) are in outage.test.ts;
// the 409s come from apps with a small item limit (appWith), whose responses are checked by their own recorder.
afterAll(() => {
  expect(checkRecordedResponses(todosOpenApi(), recorder.responses)).toStrictEqual([
    "DELETE /users/{userId}/todos/{itemId} 200",
    "DELETE /users/{userId}/todos/{itemId} 400",
    "DELETE /users/{userId}/todos/{itemId} 404",
    "GET /health 200",
    "GET /ready 200",
    "GET /users/{userId}/todos 200",
    "GET /users/{userId}/todos 400",
    "GET /users/{userId}/todos/{itemId} 200",
    "GET /users/{userId}/todos/{itemId} 400",
    "GET /users/{userId}/todos/{itemId} 404",
    "GET /v1/user/{userId}/todos 200",
    "GET /v1/user/{userId}/todos 400",
    "POST /users/{userId}/todos 201",
    "POST /users/{userId}/todos 400",
    "POST /users/{userId}/todos 413",
    "POST /users/{userId}/todos 415",
    "POST /users/{userId}/todos 500",
    "PUT /users/{userId}/todos/{itemId} 200",
    "PUT /users/{userId}/todos/{itemId} 400",
    "PUT /users/{userId}/todos/{itemId} 404",
    "PUT /users/{userId}/todos/{itemId} 413",
    "PUT /users/{userId}/todos/{itemId} 500",
  ]);
});
