import { existsSync } from "node:fs";
import { MAIN, pgliteEnv, startService } from "./support/service-process";
import { pgliteMode, type StorageLocation } from "./support/storage-modes";

/** Writers at once, and acknowledged creates after which the process is killed (bounded either way). */
const WRITERS = 50;
const KILL_AFTER = 300;

describe("the built service on PGlite, killed with SIGKILL under write load", () => {
  let location: StorageLocation;
  beforeAll(async () => {
    location = await pgliteMode.locate();
  });
  afterAll(async () => {
    await location?.dispose();
  });

  it("when 50 clients create items and the process is killed mid-load, then every acknowledged item is there after a restart", async () => {
    expect(existsSync(MAIN)).toBe(true);
    const dataDir = location.options.dataDir;
    const first = await startService(pgliteEnv(dataDir));
    const url = `http://127.0.0.1:${first.port}/users/durable/todos`;
    const acknowledged = new Map<string, string>();
    let failures = 0;
    let killed = false;
    const writer = async (w: number) => {
      for (let i = 0; !killed; i++) {
        try {
          const res = await fetch(url, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ title: `w${w} #${i}` }),
          });
          if (res.status !== 201) throw new Error(`status ${res.status}`);
          const { todoItem } = (await res.json()) as { todoItem: { id: string; title: string } };
          // Counted only once the whole answer is here: that is what a client calls acknowledged.
          acknowledged.set(todoItem.id, todoItem.title);
          if (acknowledged.size >= KILL_AFTER && !killed) {
            killed = true;
            first.child.kill("SIGKILL");
          }
        } catch {
          // Requests cut by the kill fail; anything failing before it is counted and checked below.
          if (!killed) failures++;
          return;
        }
      }
    };
    await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
    expect(failures).toBe(0);
    expect(killed).toBe(true);
    await first.exited;

    // The dead owner's lock is taken over at once (same PID space, process gone).
    const second = await startService(pgliteEnv(dataDir));
    try {
      const res = await fetch(`http://127.0.0.1:${second.port}/users/durable/todos`);
      expect(res.status).toBe(200);
      const { todoItems } = (await res.json()) as { todoItems: { id: string; title: string }[] };
      const stored = new Map(todoItems.map((item) => [item.id, item.title]));
      const lost = [...acknowledged].filter(([id, title]) => stored.get(id) !== title);
      expect(lost).toStrictEqual([]);
      // At most the requests in flight at the kill were stored without being acknowledged.
      expect(stored.size - acknowledged.size).toBeLessThanOrEqual(WRITERS);
      expect(stored.size).toBeGreaterThanOrEqual(KILL_AFTER);
    } finally {
      second.child.kill("SIGTERM");
      expect(await second.exited).toBe(0);
    }
  });
});
