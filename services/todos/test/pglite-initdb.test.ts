import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { openStorage } from "../src/storage/open-storage";
import { initialisePgliteDir } from "../src/storage/pglite-initdb";

describe("the embedded database's first start (initdb in a worker thread)", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "todos-initdb-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("creates the cluster in a new directory once, and leaves an existing one alone", async () => {
    const dataDir = path.join(dir, "new");
    expect(await initialisePgliteDir(dataDir)).toBe(true);
    expect(existsSync(path.join(dataDir, "PG_VERSION"))).toBe(true);
    expect(await initialisePgliteDir(dataDir)).toBe(false);
    // The service then opens it as on any later start: migrated, and it serves.
    const repository = await openStorage({ dataDir });
    try {
      const created = await repository.create("u", { title: "first", completed: false }, 10);
      expect((await repository.list("u")).map((r) => r.title)).toStrictEqual(["first"]);
      expect(created?.title).toBe("first");
    } finally {
      await repository.close();
    }
  }, 120_000);

  it("a directory that cannot hold a cluster stops the start with the reason", async () => {
    const file = path.join(dir, "a-file");
    await writeFile(file, "not a directory");
    await expect(initialisePgliteDir(path.join(file, "data"))).rejects.toThrow(/ENOTDIR|not a directory|exit 1/);
  });
});
