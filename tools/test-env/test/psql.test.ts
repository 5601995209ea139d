import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { ensurePsql, exportPsql, psqlFromEnv } from "../src/psql";
import { onPath } from "../src/redis";

const run = promisify(execFile);
const debian = process.platform === "linux" && onPath("apt-get") !== undefined && onPath("dpkg-deb") !== undefined;

describe("psql", () => {
  it("hands the test files what the global setup found, or its reason", async () => {
    expect(() => psqlFromEnv({})).toThrow(/no psql was prepared/);
    expect(() => psqlFromEnv({ LOCALDECIDER_TEST_PSQL_PROBLEM: "install it" })).toThrow("install it");
    const saved = { ...process.env };
    try {
      await exportPsql({ say: () => undefined });
      const found = psqlFromEnv();
      expect((await run(found.psql, ["--version"], { env: { ...process.env, ...found.env } })).stdout).toMatch(
        /^psql \(PostgreSQL\) \d+/,
      );
    } finally {
      process.env = saved;
    }
  });

  it("without psql on PATH: on Debian or Ubuntu, Debian's postgresql-client and its libraries, and that psql runs; elsewhere says what to install", async () => {
    if (!debian) {
      await expect(ensurePsql({ pathVariable: "/nonexistent" })).rejects.toThrow(/install PostgreSQL's client/);
      return;
    }
    const cache = await mkdtemp(path.join(tmpdir(), "test-env-psql-cache-"));
    try {
      const lines: string[] = [];
      const found = await ensurePsql({ pathVariable: "/nonexistent", cache, say: (m) => lines.push(m) });
      expect(found.source).toBe("debian packages");
      expect(found.psql).toBe(path.join(cache, "debian-psql", "bin", "psql"));
      expect(lines[0]).toMatch(/^not on this machine: fetching Debian's postgresql-client with apt-get/);
      const { stdout } = await run(found.psql, ["--version"], { env: { ...process.env, ...found.env } });
      // 15 or later: docker/postgres/todos-role.sql uses \getenv.
      expect(Number(/\(PostgreSQL\) (\d+)/.exec(stdout)?.[1])).toBeGreaterThanOrEqual(15);
    } finally {
      await rm(cache, { recursive: true, force: true });
    }
  });
});
