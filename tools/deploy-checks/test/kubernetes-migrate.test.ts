import { execFile } from "node:child_process";
import { readdirSync } from "node:fs";
import { promisify } from "node:util";
import { psqlFromEnv } from "@localdecider/test-env/psql";
import { repoPath } from "../src/repo";
import { container, find, render, VARIANTS } from "./support/kubernetes";

// todos' migrations in Kubernetes (deploy/kubernetes/base/todos.yaml): an init container runs the service's
// own runner before each pod's todos starts. Here that container's command, exactly as the manifest
// writes it, runs in the built service's directory (the image's /app holds the same dist/ and prisma/)
// against a fresh database of the test's PostgreSQL, from three pods starting at once: each migration is
// applied once, and every run exits 0.
const run = promisify(execFile);
const ADMIN_URL = process.env.TODOS_TEST_ADMIN_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";
const DB = `k8s_migrate_${process.pid}_${Date.now()}`;
const MIGRATIONS = readdirSync(repoPath("services", "todos", "prisma", "migrations")).filter((n) => /^\d+_/.test(n));

function urlFor(database: string): string {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${database}`;
  return url.toString();
}

async function psql(url: string, sql: string): Promise<string> {
  const found = psqlFromEnv();
  const args = ["--no-psqlrc", "-v", "ON_ERROR_STOP=1", "-At", url, "-c", sql];
  return (await run(found.psql, args, { env: { ...process.env, ...found.env } })).stdout.trim();
}

const llamaServer = VARIANTS.find((v) => v.name === "llama-server");
if (llamaServer === undefined) throw new Error("no llama-server variant");
const todos = find(render(llamaServer), "Deployment", "todos");
const migrate = container(todos, "migrate");

describe("the todos migrate init container", () => {
  beforeAll(() => psql(ADMIN_URL, `CREATE DATABASE ${DB}`));
  afterAll(() => psql(ADMIN_URL, `DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`));

  it("applies every migration once when three pods start together, each run exiting 0", async () => {
    const [program, ...args] = migrate.command as string[];
    expect(program).toBe("node");
    const env = { PATH: process.env.PATH, DATABASE_URL: urlFor(DB) };
    const runs = await Promise.all(
      [1, 2, 3].map(() => run(process.execPath, args, { cwd: repoPath("services", "todos"), env })),
    );
    const applied = runs.map((r) => (JSON.parse(r.stdout.trim()) as { applied: string[] }).applied);
    // One run applied them all; the others waited for the lock and found nothing to do.
    expect(applied.flat().sort()).toStrictEqual([...MIGRATIONS].sort());
    expect(applied.filter((a) => a.length > 0)).toHaveLength(1);
    const rows = await psql(
      urlFor(DB),
      "SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL ORDER BY 1",
    );
    expect(rows.split("\n")).toStrictEqual([...MIGRATIONS].sort());
  });

  it("exits non-zero, saying why, when the database cannot be reached (the pod does not start)", async () => {
    const [, ...args] = migrate.command as string[];
    const env = { PATH: process.env.PATH, DATABASE_URL: urlFor(`${DB}_missing`) };
    await expect(run(process.execPath, args, { cwd: repoPath("services", "todos"), env })).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining("todos migrations failed:"),
    });
  });
});
