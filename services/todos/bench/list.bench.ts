/**
 * Throughput of `GET /users/:id/todos` for a user with 20 items in a table of 10,000 rows (other users'),
 * measured with autocannon in this process over loopback: (a) the service on PostgreSQL, (b) the service
 * on embedded PGlite, (c) a raw `pg` + bare `http` baseline serving the same query. Not part of the tests:
 * `pnpm --filter @localdecider/todos bench` (BENCH_SECONDS, default 10; BENCH_CONNECTIONS, default 50).
 */
import { mkdtemp, rm } from "node:fs/promises";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { createLogger, type RunningServer, serve } from "@localdecider/service-kit";
import autocannon from "autocannon";
import pg from "pg";
import { createApp } from "../src/app";
import { migratePglite, migratePostgres, openStorage, POOL_SETTINGS } from "../src/storage/open-storage";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ADMIN_URL = process.env.BENCH_ADMIN_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";
const USER = "bench-user";
const TOTAL_ROWS = 10_000;
const USER_ROWS = 20;

// 20 rows for the measured user, the rest spread over 500 other users.
const SEED = `
INSERT INTO "TodoItem" ("id", "userId", "title", "completed", "createdAt", "updatedAt")
SELECT gen_random_uuid(), 'user-' || (g % 500), 'other item ' || g, g % 3 = 0,
       now() - make_interval(secs => g), now()
FROM generate_series(1, ${TOTAL_ROWS - USER_ROWS}) AS g;
INSERT INTO "TodoItem" ("id", "userId", "title", "completed", "createdAt", "updatedAt")
SELECT gen_random_uuid(), '${USER}', 'bench item ' || g, g % 2 = 0, now() - make_interval(secs => g), now()
FROM generate_series(1, ${USER_ROWS}) AS g;
ANALYZE "TodoItem";`;

const LIST_SQL = `SELECT "id", "title", "completed", "createdAt", "updatedAt" FROM "TodoItem"
  WHERE "userId" = $1 ORDER BY "createdAt" ASC, "id" ASC`;

interface Row {
  target: string;
  reqPerSec: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

async function measure(target: string, url: string): Promise<Row> {
  const check = await fetch(url);
  const body = (await check.json()) as { todoItems: unknown[] };
  if (check.status !== 200 || body.todoItems.length !== USER_ROWS) throw new Error(`${target}: bad answer`);
  await autocannon({ url, connections: CONNECTIONS, duration: 2 }); // warm-up, not counted
  const result = await autocannon({ url, connections: CONNECTIONS, duration: SECONDS });
  return {
    target,
    reqPerSec: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

async function withServer<T>(running: RunningServer, run: (base: string) => Promise<T>): Promise<T> {
  try {
    return await run(`http://127.0.0.1:${running.port}`);
  } finally {
    await running.close();
  }
}

async function main(): Promise<void> {
  const logger = createLogger({ service: "todos-bench", level: "silent" });
  const rows: Row[] = [];
  const dbName = `todos_bench_${process.pid}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${dbName}"`);
  const dbUrl = new URL(ADMIN_URL);
  dbUrl.pathname = `/${dbName}`;
  const databaseUrl = dbUrl.toString();
  const dataDir = await mkdtemp(path.join(tmpdir(), "todos-bench-"));
  try {
    await migratePostgres(databaseUrl);
    const seeder = new pg.Client({ connectionString: databaseUrl });
    await seeder.connect();
    await seeder.query(SEED);
    await seeder.end();

    // (c) baseline: the same query over a plain pg pool (same pool size) and node:http.
    const pool = new pg.Pool({ connectionString: databaseUrl, max: POOL_SETTINGS.max });
    const bare = http.createServer((req, res) => {
      const match = /^\/users\/([^/?]+)\/todos/.exec(req.url ?? "");
      if (!match?.[1]) {
        res.writeHead(404).end();
        return;
      }
      pool.query(LIST_SQL, [decodeURIComponent(match[1])]).then(
        (result) => {
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ todoItems: result.rows }));
        },
        () => res.writeHead(500).end(),
      );
    });
    await new Promise<void>((resolve) => bare.listen(0, "127.0.0.1", resolve));
    const barePort = (bare.address() as { port: number }).port;
    rows.push(await measure("raw pg + node:http (baseline)", `http://127.0.0.1:${barePort}/users/${USER}/todos`));
    await new Promise<void>((resolve) => bare.close(() => resolve()));
    await pool.end();

    // (a) the service on PostgreSQL.
    const onPostgres = await openStorage({ databaseUrl, dataDir: "unused" });
    rows.push(
      await withServer(
        await serve(createApp({ repository: onPostgres, logger }), {
          host: "127.0.0.1",
          port: 0,
          logger,
          onClose: () => onPostgres.close(),
        }),
        (base) => measure("todos service, PostgreSQL (Prisma + adapter-pg)", `${base}/users/${USER}/todos`),
      ),
    );

    // (b) the service on PGlite, seeded the same way before the service opens it.
    const seed = await PGlite.create(dataDir);
    await migratePglite(seed);
    await seed.exec(SEED);
    await seed.close();
    const onPglite = await openStorage({ dataDir });
    rows.push(
      await withServer(
        await serve(createApp({ repository: onPglite, logger }), {
          host: "127.0.0.1",
          port: 0,
          logger,
          onClose: () => onPglite.close(),
        }),
        (base) => measure("todos service, PGlite (file-backed, Prisma)", `${base}/users/${USER}/todos`),
      ),
    );
  } finally {
    await rm(dataDir, { recursive: true, force: true });
    await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
    await admin.end();
  }

  console.log(
    `\nGET /users/:id/todos, ${USER_ROWS} items of ${TOTAL_ROWS} rows, ${CONNECTIONS} connections, ${SECONDS} s, node ${process.version}\n`,
  );
  console.log("| server | req/s | p50 ms | p99 ms | non-2xx | errors |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const r of rows)
    console.log(`| ${r.target} | ${r.reqPerSec} | ${r.p50} | ${r.p99} | ${r.non2xx} | ${r.errors} |`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
