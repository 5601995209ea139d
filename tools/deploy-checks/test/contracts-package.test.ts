import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { repoPath } from "../src/repo";
import { type RunningService, startService } from "./support/services";

const run = promisify(execFile);

/**
 * `@localdecider/contracts` as someone outside the repository uses it (packages/contracts/README.md): packed
 * with `pnpm pack`, installed from the tarball with zod from the npm registry into an empty folder by plain
 * npm, then imported from plain Node (require and import) and used against a real todos server.
 */
describe("@localdecider/contracts outside the repository", () => {
  let dir: string;
  let todos: RunningService;
  let tarball: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "contracts-package-"));
    const packed = await run("pnpm", ["pack", "--pack-destination", dir], { cwd: repoPath("packages", "contracts") });
    tarball = path.join(dir, path.basename(packed.stdout.trim().split("\n").pop() ?? ""));
    todos = await startService("todos", { TODOS_PORT: "0", TODOS_DATA_DIR: path.join(dir, "data") });
  }, 120_000);

  afterAll(async () => {
    await todos?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("packs as a publishable package: not private, zod a peer, only built files and sources, no workspace links", async () => {
    const listing = (await run("tar", ["-tzf", tarball])).stdout.split("\n").filter(Boolean);
    expect(listing).toContain("package/dist/todos/index.js");
    expect(listing).toContain("package/dist/todos/index.d.ts");
    expect(listing).toContain("package/README.md");
    expect(
      listing.filter((f) => !/^package\/(dist|src)\/|^package\/(package\.json|README\.md)$/.test(f)),
    ).toStrictEqual([]);
    const manifest = JSON.parse((await run("tar", ["-xzOf", tarball, "package/package.json"])).stdout) as Record<
      string,
      unknown
    >;
    expect(manifest.private).toBeUndefined();
    expect(manifest.peerDependencies).toStrictEqual({ zod: "^4.6.7" });
    expect(manifest.dependencies).toBeUndefined();
    expect(JSON.stringify(manifest)).not.toContain("workspace:");
  });

  it("installs with npm from the tarball and zod from the registry, and plain Node calls todos through it (require and import)", async () => {
    const app = path.join(dir, "app");
    await run("mkdir", ["-p", app]);
    await writeFile(path.join(app, "package.json"), JSON.stringify({ name: "outside", private: true }));
    await run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", tarball, "zod@4.6.7"], {
      cwd: app,
      maxBuffer: 16 * 1024 * 1024,
    });
    const installed = JSON.parse(
      await readFile(path.join(app, "node_modules", "@localdecider", "contracts", "package.json"), "utf8"),
    ) as { name: string };
    expect(installed.name).toBe("@localdecider/contracts");

    const cjs = `
      const { createTodosClient } = require("@localdecider/contracts/todos");
      const { ApiError } = require("@localdecider/contracts");
      (async () => {
        const todos = createTodosClient({ baseUrl: process.argv[1] });
        const created = await todos.createTodo({ params: { userId: "outside" }, body: { title: "from a tarball" } });
        const again = await todos.getTodo({ params: { userId: "outside", itemId: created.todoItem.id } });
        let missing;
        try { await todos.deleteTodo({ params: { userId: "outside", itemId: "nope" } }); }
        catch (err) { missing = { isApiError: err instanceof ApiError, status: err.status, message: err.message }; }
        console.log(JSON.stringify({ same: JSON.stringify(again) === JSON.stringify(created.todoItem), title: again.title, missing }));
      })().catch((err) => { console.error(err); process.exit(1); });`;
    const fromRequire = await run(process.execPath, ["-e", cjs, todos.url], { cwd: app });
    expect(JSON.parse(fromRequire.stdout)).toStrictEqual({
      same: true,
      title: "from a tarball",
      missing: { isApiError: true, status: 404, message: "Todo item not found" },
    });

    await writeFile(
      path.join(app, "esm.mjs"),
      `import { createTodosClient, todosRoutes } from "@localdecider/contracts/todos";
       const list = await createTodosClient({ baseUrl: process.argv[2] }).listTodos({ params: { userId: "outside" } });
       console.log(JSON.stringify({ titles: list.todoItems.map((i) => i.title), routes: Object.keys(todosRoutes).length }));`,
    );
    const fromImport = await run(process.execPath, ["esm.mjs", todos.url], { cwd: app });
    expect(JSON.parse(fromImport.stdout)).toStrictEqual({ titles: ["from a tarball"], routes: 8 });
  }, 120_000);
});
