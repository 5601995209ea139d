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
  const pages: { url: string; items: Item[]; bytes: number; next: string | undefined }[] = [];
  for (let url: string | undefined = first; url !== undefined; ) {
    if (pages.length === most) throw new Error(`still more after ${most} answers`);
    const res = await request(app).get(url).expect(200);
    const items = (Array.isArray(res.body) ? res.body : res.body.todoItems) as Item[];
    const next = nextOf(res.headers.link);
    pages.push({ url, items, bytes: Buffer.byteLength(res.text), next });
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
      const last = pages[0]?.items[999] as Item;
      expect(pages[0]?.next).toBe(`${route}?after=${Date.parse(last.createdAt)}_${last.id}`);
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
    const pages = await walk(t.app, `/users/${user}/todos?after=${Date.parse(item.createdAt)}_${item.id}&limit=3`);
    expect(pages.map((p) => p.items.length)).toStrictEqual([3, 1]);
    expect(pages[0]?.next).toMatch(new RegExp(`^/users/${user}/todos\\?after=[0-9]+_[0-9a-f-]{36}&limit=3$`));
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

  it.each([
    ["after=abc", "after", 'must be a cursor copied from a Link: <…>; rel="next" header'],
    ["after=1_not-a-uuid", "after", 'must be a cursor copied from a Link: <…>; rel="next" header'],
    // The pattern's largest time, far past what a timestamp holds: refused, never sent to SQL.
    [
      `after=999999999999999_${"0".repeat(8)}-0000-4000-8000-${"0".repeat(12)}`,
      "after",
      'must be a cursor copied from a Link: <…>; rel="next" header',
    ],
    [
      `after=1_${"0".repeat(8)}-0000-4000-8000-${"0".repeat(12)}&page=2`,
      "page",
      "must not be given with after (a cursor already says where the list continues)",
    ],
    ["after=a&after=b", "after", "must be given once"],
  ])("when the query is %s, answers 400 naming the parameter", async (query, path, message) => {
    const res = await request(t.app).get(`/users/${newUser()}/todos?${query}`).expect(400);
    expect(res.body).toStrictEqual({ error: "Invalid query parameters", details: [{ path, message }] });
  });
});
