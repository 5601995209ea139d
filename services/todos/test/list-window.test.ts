import { randomUUID } from "node:crypto";
import type { Express } from "express";
import request from "supertest";
import type { TodoRepository } from "../src/storage/repository";
import { appWith, STORAGE_MODES, suiteApp } from "./support/storage-modes";

interface Item {
  id: string;
  title: string;
  createdAt: string;
}

/** `Link: <url>; rel="next"` as its url, or undefined without one. */
function nextOf(link: string | undefined): string | undefined {
  if (link === undefined) return undefined;
  const match = /^<([^>]*)>; rel="next"$/.exec(link);
  if (match === null) throw new Error(`not a next link: ${link}`);
  return match[1];
}

/** Follows every next link from `first`, at most `most` answers: the pages, each with its items and link. */
async function walk(app: Express, first: string, most = 20) {
  const pages: { url: string; items: Item[]; bytes: number; next: string | undefined; cursor: string | undefined }[] =
    [];
  for (let url: string | undefined = first; url !== undefined; ) {
    if (pages.length === most) throw new Error(`still more after ${most} answers`);
    const res = await request(app).get(url).expect(200);
    const items = (Array.isArray(res.body) ? res.body : res.body.todoItems) as Item[];
    const next = nextOf(res.headers.link);
    pages.push({ url, items, bytes: Buffer.byteLength(res.text), next, cursor: res.headers["list-cursor"] });
    url = next;
  }
  return pages;
}

/** `count` items for `userId`, written 50 at a time, with titles from `title(i)`. */
async function seed(repository: TodoRepository, userId: string, count: number, title: (i: number) => string) {
  for (let i = 0; i < count; i += 50) {
    const batch = Array.from({ length: Math.min(50, count - i) }, (_, j) =>
      repository.create(userId, { title: title(i + j), completed: false }, 1_000_000),
    );
    await Promise.all(batch);
  }
}

describe.each(STORAGE_MODES)("list windows on $name", (mode) => {
  const t = suiteApp(mode);

  const newUser = () => `user-${randomUUID()}`;
  /** The whole list in storage, in the API's order. */
  const stored = async (userId: string) => (await t.repository.list(userId)).map((r) => r.id);

  it("answers an unpaged list of 1,001 items as 1,000 with a Link to the last one, on both routes", async () => {
    const user = newUser();
    await seed(t.repository, user, 1_001, (i) => `item ${i}`);
    const all = await stored(user);
    for (const route of [`/users/${user}/todos`, `/v1/user/${user}/todos`]) {
      const pages = await walk(t.app, route);
      expect(pages.map((p) => p.items.length)).toStrictEqual([1_000, 1]);
      // The cursor is the last item's number in the list's order; the last page has one too.
      expect(pages.map((p) => p.cursor)).toStrictEqual([expect.stringMatching(/^[1-9][0-9]*$/), expect.any(String)]);
      expect(pages[0]?.next).toBe(`${route}?after=${pages[0]?.cursor}`);
      expect(pages.flatMap((p) => p.items.map((i) => i.id))).toStrictEqual(all);
    }
  });

  it("cuts an answer at TODOS_LIST_MAX_BYTES (1 MiB) of items, and the links lead through the rest", async () => {
    const user = newUser();
    // 500 control characters are 3,000 bytes of JSON each (\u0001): 400 such items are 1.2 MB.
    await seed(t.repository, user, 400, (i) => `${i}`.padEnd(500, "\u0001"));
    const pages = await walk(t.app, `/users/${user}/todos`);
    expect(pages.length).toBe(2);
    for (const page of pages) expect(page.bytes).toBeLessThanOrEqual(1024 * 1024 + 64);
    // Nothing lost, nothing twice, in order.
    expect(pages.flatMap((p) => p.items.map((i) => i.id))).toStrictEqual(await stored(user));
  });

  it("links a full page of limit/page to the next page by number, and sends no link after the last", async () => {
    const user = newUser();
    await seed(t.repository, user, 5, (i) => `${i}`);
    const all = await stored(user);
    const pages = await walk(t.app, `/users/${user}/todos?limit=2`);
    expect(pages.map((p) => [p.url, p.items.length, p.next])).toStrictEqual([
      [`/users/${user}/todos?limit=2`, 2, `/users/${user}/todos?limit=2&page=2`],
      [`/users/${user}/todos?limit=2&page=2`, 2, `/users/${user}/todos?limit=2&page=3`],
      [`/users/${user}/todos?limit=2&page=3`, 1, undefined],
    ]);
    expect(pages.flatMap((p) => p.items.map((i) => i.id))).toStrictEqual(all);
    // A page that ends exactly at the end of the list has no next either.
    const exact = await request(t.app).get(`/users/${user}/todos?limit=5`).expect(200);
    expect([exact.body.todoItems.length, exact.headers.link]).toStrictEqual([5, undefined]);
  });

  it("walks the list after a cursor with a limit, carrying the limit in each link", async () => {
    const user = newUser();
    await seed(t.repository, user, 5, (i) => `${i}`);
    const all = await stored(user);
    const first = await request(t.app).get(`/users/${user}/todos?limit=1`).expect(200);
    const item = first.body.todoItems[0] as Item;
    const pages = await walk(t.app, `/users/${user}/todos?after=${first.headers["list-cursor"]}&limit=3`);
    expect(pages.map((p) => p.items.length)).toStrictEqual([3, 1]);
    expect(pages[0]?.next).toMatch(new RegExp(`^/users/${user}/todos\\?after=[0-9]+&limit=3$`));
    expect([item.id, ...pages.flatMap((p) => p.items.map((i) => i.id))]).toStrictEqual(all);
  });

  it("continues after a cursor whose item was deleted meanwhile, skipping nothing and repeating nothing", async () => {
    const user = newUser();
    await seed(t.repository, user, 6, (i) => `${i}`);
    const app = appWith(t.repository, { listLimits: { maxItems: 3, maxBytes: 512 * 1024 } });
    const first = await request(app).get(`/users/${user}/todos`).expect(200);
    const shown = (first.body.todoItems as Item[]).map((i) => i.id);
    expect(shown.length).toBe(3);
    // The item the cursor names, and one already shown, are deleted before the next page is asked for.
    await t.repository.delete(user, shown[2] as string);
    await t.repository.delete(user, shown[0] as string);
    const rest = await walk(app, nextOf(first.headers.link) as string);
    const after = (await stored(user)).filter((id) => !shown.includes(id));
    expect(rest.flatMap((p) => p.items.map((i) => i.id))).toStrictEqual(after);
  });

  it("gives the last page a List-Cursor too: asked later with it, the list answers only what was created since", async () => {
    const user = newUser();
    for (const route of [`/users/${user}/todos`, `/v1/user/${user}/todos`]) {
      const empty = await request(t.app).get(route).expect(200);
      // An empty list: everything created later comes after 0.
      expect([empty.headers["list-cursor"], empty.headers.link]).toStrictEqual(["0", undefined]);
    }
    await seed(t.repository, user, 3, (i) => `old ${i}`);
    for (const route of [`/users/${user}/todos`, `/v1/user/${user}/todos`]) {
      const last = await request(t.app).get(`${route}?limit=2&page=2`).expect(200);
      expect(last.headers.link).toBeUndefined();
      const cursor = last.headers["list-cursor"] as string;
      expect(cursor).toMatch(/^[1-9][0-9]*$/);
      // Nothing new yet: an empty answer that hands the same cursor back.
      const none = await request(t.app).get(`${route}?after=${cursor}`).expect(200);
      expect([Array.isArray(none.body) ? none.body : none.body.todoItems, none.headers["list-cursor"]]).toStrictEqual([
        [],
        cursor,
      ]);
    }
    await seed(t.repository, user, 2, (i) => `new ${i}`);
    const all = await stored(user);
    const end = await request(t.app).get(`/users/${user}/todos?limit=3`).expect(200);
    const since = await walk(t.app, `/v1/user/${user}/todos?after=${end.headers["list-cursor"]}`);
    expect(since.flatMap((p) => p.items.map((i) => i.id))).toStrictEqual(all.slice(3));
    expect(since.map((p) => p.cursor)).toStrictEqual([(await t.repository.list(user)).at(-1)?.seq]);
    // An empty page past the end of offset pages has no place in the list: no cursor.
    const past = await request(t.app).get(`/users/${user}/todos?limit=5&page=9`).expect(200);
    expect([past.body.todoItems, past.headers["list-cursor"]]).toStrictEqual([[], undefined]);
  });

  it("still takes a cursor of the old form (<ms>_<id>, handed out before the order changed) and continues after its item", async () => {
    const user = newUser();
    await seed(t.repository, user, 4, (i) => `${i}`);
    const all = await t.repository.list(user);
    const second = all[1] as (typeof all)[0];
    const res = await request(t.app)
      .get(`/users/${user}/todos?after=${Date.parse(second.createdAt)}_${second.id}`)
      .expect(200);
    expect(res.body.todoItems.map((i: Item) => i.id)).toStrictEqual(all.slice(2).map((r) => r.id));
    expect(res.headers["list-cursor"]).toBe(all[3]?.seq);
  });

  const BAD_CURSOR = "must be a cursor copied from a list answer (its Link or List-Cursor header)";
  it.each([
    ["after=abc", "after", BAD_CURSOR],
    ["after=1_not-a-uuid", "after", BAD_CURSOR],
    ["after=-1", "after", BAD_CURSOR],
    ["after=1.5", "after", BAD_CURSOR],
    // The pattern's largest time, far past what a timestamp holds: refused, never sent to SQL.
    [`after=999999999999999_${"0".repeat(8)}-0000-4000-8000-${"0".repeat(12)}`, "after", BAD_CURSOR],
    // One past the largest bigint: refused, never sent to SQL.
    ["after=9223372036854775808", "after", BAD_CURSOR],
    ["after=12345678901234567890", "after", BAD_CURSOR],
    [
      `after=1_${"0".repeat(8)}-0000-4000-8000-${"0".repeat(12)}&page=2`,
      "page",
      "must not be given with after (a cursor already says where the list continues)",
    ],
    ["after=3&page=2", "page", "must not be given with after (a cursor already says where the list continues)"],
    ["after=a&after=b", "after", "must be given once"],
    // Bracketed forms: a query parser that reads brackets makes them the parameter; never ignored.
    ["after[]=5", "after", "must be given once, as after=… (not after[]=…)"],
    ["after[0]=5", "after", "must be given once, as after=… (not after[0]=…)"],
    ["limit[]=1", "limit", "must be given once, as limit=… (not limit[]=…)"],
    ["page[x]=2", "page", "must be given once, as page=… (not page[x]=…)"],
    ["limit=2&limit[]=1", "limit", "must be given once, as limit=… (not limit[]=…)"],
  ])("when the query is %s, answers 400 naming the parameter", async (query, path, message) => {
    const user = newUser();
    await seed(t.repository, user, 1, () => "kept");
    for (const route of [`/users/${user}/todos`, `/v1/user/${user}/todos`]) {
      const res = await request(t.app).get(`${route}?${query}`).expect(400);
      expect(res.body).toStrictEqual({ error: "Invalid query parameters", details: [{ path, message }] });
      expect(res.headers["list-cursor"]).toBeUndefined();
    }
    // Nothing changed.
    expect((await t.repository.list(user)).map((r) => r.title)).toStrictEqual(["kept"]);
  });
});
