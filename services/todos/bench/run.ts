/**
 * `pnpm --filter @localdecider/todos bench`: the todos service against its floors, every server in its own
 * process and the load generator (wrk, `apt-get install wrk`) in another, so no server shares its event
 * loop with the load. Servers:
 * - node:http + pg, and Express 5 + pg with a bare handler (bench/baseline-server.ts), same SQL;
 * - the service (the built src/main.ts) on PostgreSQL and on its embedded PGlite database.
 * Routes: `GET /users/:id/todos` for a user with 20 items among 10,000 rows, and `POST /users/:id/todos`
 * spread over 1,000 users.
 * Rounds are interleaved (round 1 of every server and route, then round 2, ...), so a change in the
 * machine's load hits all of them alike; the table holds each figure's median over the rounds and the
 * ratio of req/s to Express + pg. Needs PostgreSQL (BENCH_ADMIN_URL). Loopback only, bounded.
 *
 * BENCH_SECONDS (8) per round, BENCH_ROUNDS (3), BENCH_CONNECTIONS (50); BENCH_PROFILE=<dir> starts the
 * service processes with --cpu-prof and writes their profiles there. BENCH_ROUTES (`list,create`) picks the
 * routes. BENCH_COMPARE=<path of another build's dist/.bench/src/main.js> adds that build of the service on
 * PostgreSQL as one more server of the same run (a before/after on the same machine, same rounds).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { migratePglite, migratePostgres } from "../src/storage/open-storage";

const SECONDS = bounded("BENCH_SECONDS", 8, 1, 120);
const ROUNDS = bounded("BENCH_ROUNDS", 3, 1, 9);
const CONNECTIONS = bounded("BENCH_CONNECTIONS", 50, 1, 500);
const PROFILE_DIR = process.env.BENCH_PROFILE;
const ADMIN_URL = process.env.BENCH_ADMIN_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";
const USER = "bench-user";
const WRITER = "bench-writer";
/**
 * The create rounds spread their items over this many users (`bench-writer-0` ...), as a service's traffic
 * does. Creates for one user wait for each other at the database (the per-user item limit locks the user's
 * count until commit: README, "Limits"), so the creates of a single user measure that user's ceiling, not
 * the service's.
 */
const WRITERS = 1000;
const TOTAL_ROWS = 10_000;
const USER_ROWS = 20;
/** wrk's own limit: a request unanswered after this counts as a timeout. */
const WRK_TIMEOUT = "2s";

function bounded(name: string, fallback: number, min: number, max: number): number {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`${name} must be ${min}..${max}`);
  return value;
}

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

interface Target {
  name: string;
  /** The node arguments (script first) and extra environment of its process. */
  args: string[];
  env: NodeJS.ProcessEnv;
  profiled: boolean;
}

interface Running {
  child: ChildProcess;
  base: string;
}

interface Sample {
  reqPerSec: number;
  /** The server process's CPU time (user + system) per answered request: steadier than req/s on a busy machine. */
  cpuUsPerReq: number;
  p50: number;
  p99: number;
  /** Non-2xx answers, socket errors and timeouts. */
  non2xx: number;
  errors: number;
  timeouts: number;
}

const ALL_ROUTES = ["list", "create"] as const;
type Route = (typeof ALL_ROUTES)[number];
const ROUTES: Route[] = (process.env.BENCH_ROUTES ?? "list,create").split(",").map((name) => {
  const route = ALL_ROUTES.find((r) => r === name.trim());
  if (route === undefined) throw new Error(`BENCH_ROUTES: "${name}" is not one of ${ALL_ROUTES.join(", ")}`);
  return route;
});
const COMPARE = process.env.BENCH_COMPARE;

async function start(target: Target): Promise<Running> {
  const flags = target.profiled && PROFILE_DIR !== undefined ? ["--cpu-prof", `--cpu-prof-dir=${PROFILE_DIR}`] : [];
  const child = spawn(process.execPath, [...flags, ...target.args], {
    env: processEnv(target.env),
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let seen = "";
    child.once("exit", (code) => reject(new Error(`${target.name} exited with ${code} before listening`)));
    child.stdout?.on("data", (chunk: Buffer) => {
      seen += chunk.toString();
      const match = /"message":"listening"[^\n]*"port":(\d+)|"port":(\d+)[^\n]*"message":"listening"/.exec(seen);
      if (match) resolve(Number(match[1] ?? match[2]));
    });
  });
  child.stdout?.resume();
  return { child, base: `http://127.0.0.1:${port}` };
}

/** The bench's environment without a DATABASE_URL of its own (PGlite mode needs it absent), plus the target's. */
function processEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.DATABASE_URL;
  return { ...env, ...extra };
}

async function stop(running: Running): Promise<void> {
  const exited = new Promise((resolve) => running.child.once("exit", resolve));
  running.child.kill("SIGTERM");
  await exited;
}

const execFileAsync = promisify(execFile);

function toMs(text: string): number {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text);
  if (!match) throw new Error(`wrk latency "${text}"`);
  const scale = { us: 0.001, ms: 1, s: 1000, m: 60_000 }[match[2] as "us" | "ms" | "s" | "m"];
  return Number(match[1]) * scale;
}

/** CPU time of a process so far, in µs, from /proc (Linux; clock ticks of 10 ms). */
async function cpuUs(pid: number | undefined): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** One wrk run in its own process against the server `pid`; its summary parsed. */
async function wrk(pid: number | undefined, url: string, seconds: number, script?: string): Promise<Sample> {
  const args = ["-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, `--timeout`, WRK_TIMEOUT, "--latency"];
  if (script !== undefined) args.push("-s", script);
  const cpuBefore = await cpuUs(pid);
  const { stdout } = await execFileAsync("wrk", [...args, url]);
  const cpu = (await cpuUs(pid)) - cpuBefore;
  const requests = Number(/(\d+) requests in/.exec(stdout)?.[1] ?? 0);
  const find = (re: RegExp) => re.exec(stdout)?.[1];
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(stdout);
  return {
    reqPerSec: Number(find(/Requests\/sec:\s+([\d.]+)/)),
    cpuUsPerReq: requests === 0 ? 0 : cpu / requests,
    p50: toMs(find(/\s50%\s+(\S+)/) ?? "0ms"),
    p99: toMs(find(/\s99%\s+(\S+)/) ?? "0ms"),
    non2xx: Number(find(/Non-2xx or 3xx responses: (\d+)/) ?? 0),
    errors: socket ? Number(socket[1]) + Number(socket[2]) + Number(socket[3]) : 0,
    timeouts: socket ? Number(socket[4]) : 0,
  };
}

async function checkAnswers(name: string, base: string): Promise<void> {
  const listed = await fetch(`${base}/users/${USER}/todos`);
  const body = (await listed.json()) as { todoItems?: unknown[] };
  if (listed.status !== 200 || body.todoItems?.length !== USER_ROWS) throw new Error(`${name}: bad list answer`);
  const created = await fetch(`${base}/users/${WRITER}/todos`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ title: "bench item", completed: false }),
  });
  if (created.status !== 201) throw new Error(`${name}: create answered ${created.status}`);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

async function main(): Promise<void> {
  const dbName = `todos_bench_${process.pid}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${dbName}"`);
  const dbUrl = new URL(ADMIN_URL);
  dbUrl.pathname = `/${dbName}`;
  const databaseUrl = dbUrl.toString();
  const work = await mkdtemp(path.join(tmpdir(), "todos-bench-"));
  const dataDir = path.join(work, "pglite");
  const script = path.join(work, "create.lua");
  const running: Running[] = [];
  const loadBefore = loadavg();
  try {
    await migratePostgres(databaseUrl);
    const seeder = new pg.Client({ connectionString: databaseUrl });
    await seeder.connect();
    await seeder.query(SEED);
    await seeder.end();
    const seed = await PGlite.create(dataDir);
    await migratePglite(seed);
    await seed.exec(SEED);
    await seed.close();
    await writeFile(
      script,
      `wrk.method = "POST"\nwrk.body = '{"title":"bench item","completed":false}'\n` +
        `wrk.headers["Content-Type"] = "application/json"\n` +
        `local n = 0\nrequest = function()\n  n = n + 1\n` +
        `  return wrk.format(nil, "/users/${WRITER}-" .. (n % ${WRITERS}) .. "/todos")\nend\n`,
    );

    const baseline = path.join(__dirname, "baseline-server.js");
    const service = path.join(__dirname, "..", "src", "main.js");
    const targets: Target[] = [
      {
        name: "node:http + pg pool(10), same SQL",
        args: [baseline, "raw"],
        env: { DATABASE_URL: databaseUrl },
        profiled: false,
      },
      {
        name: "Express 5 + pg pool(10), bare handler",
        args: [baseline, "express"],
        env: { DATABASE_URL: databaseUrl },
        profiled: false,
      },
      {
        name: "services/todos on PostgreSQL",
        args: [service],
        env: { DATABASE_URL: databaseUrl, TODOS_PORT: "0", LOG_LEVEL: "info" },
        profiled: true,
      },
      {
        name: "services/todos on PGlite",
        args: [service],
        env: { TODOS_DATA_DIR: dataDir, TODOS_PORT: "0", LOG_LEVEL: "info" },
        profiled: true,
      },
      ...(COMPARE === undefined
        ? []
        : [
            {
              name: "services/todos on PostgreSQL, BENCH_COMPARE build",
              args: [COMPARE],
              env: { DATABASE_URL: databaseUrl, TODOS_PORT: "0", LOG_LEVEL: "info" },
              profiled: true,
            },
          ]),
    ];
    for (const target of targets) {
      const r = await start(target);
      running.push(r);
      await checkAnswers(target.name, r.base);
      // Warm-up (JIT, pool connections, Prisma's caches), not counted.
      await wrk(r.child.pid, `${r.base}/users/${USER}/todos`, 2);
    }
    const samples = targets.map(() => ({ list: [] as Sample[], create: [] as Sample[] }));
    for (let round = 1; round <= ROUNDS; round++) {
      for (const route of ROUTES) {
        for (const [i, target] of targets.entries()) {
          const { base, child } = running[i] as Running;
          const sample =
            route === "list"
              ? await wrk(child.pid, `${base}/users/${USER}/todos`, SECONDS)
              : await wrk(child.pid, `${base}/users/${WRITER}/todos`, SECONDS, script);
          samples[i]?.[route].push(sample);
          console.error(
            `round ${round} ${route} ${target.name}: ${Math.round(sample.reqPerSec)} req/s, p99 ${sample.p99} ms, ` +
              `${Math.round(sample.cpuUsPerReq)} CPU µs/req`,
          );
        }
      }
    }
    printTable(targets, samples, loadBefore);
  } finally {
    await Promise.all(running.map(stop));
    await rm(work, { recursive: true, force: true });
    await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
    await admin.end();
  }
}

function printTable(targets: Target[], samples: Record<Route, Sample[]>[], loadBefore: number[]): void {
  const floor = samples[1] as Record<Route, Sample[]>;
  const floorRate = (route: Route) => median(floor[route].map((s) => s.reqPerSec));
  const fmt = (n: number) => (n >= 10 ? Math.round(n).toString() : n.toFixed(1));
  console.log(
    `\n${CONNECTIONS} connections (wrk -t1, its own process), ${ROUNDS} interleaved rounds of ${SECONDS} s, medians; ` +
      `node ${process.version}; load average ${loadBefore.map((l) => l.toFixed(2)).join(" ")} before, ` +
      `${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")} after\n`,
  );
  const columns = ROUTES.flatMap((r) => [`${r} req/s`, `${r} p50 / p99 ms`, `${r} × Express`, `${r} CPU µs/req`]);
  console.log(`| server | ${columns.join(" | ")} | non-2xx / errors / timeouts |`);
  console.log(`|---|${columns.map(() => "---:").join("|")}|---:|`);
  for (const [i, target] of targets.entries()) {
    const s = samples[i] as Record<Route, Sample[]>;
    const cells = ROUTES.flatMap((route) => {
      const rate = median(s[route].map((x) => x.reqPerSec));
      return [
        fmt(rate),
        `${fmt(median(s[route].map((x) => x.p50)))} / ${fmt(median(s[route].map((x) => x.p99)))}`,
        `${(rate / floorRate(route)).toFixed(2)}×`,
        fmt(median(s[route].map((x) => x.cpuUsPerReq))),
      ];
    });
    const all = [...s.list, ...s.create];
    const sum = (pick: (x: Sample) => number) => all.reduce((n, x) => n + pick(x), 0);
    console.log(
      `| ${target.name} | ${cells.join(" | ")} | ${sum((x) => x.non2xx)} / ${sum((x) => x.errors)} / ${sum((x) => x.timeouts)} |`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
