import { execFile } from "node:child_process";
import { readdirSync } from "node:fs";
import { promisify } from "node:util";
import { psqlFromEnv } from "@localdecider/test-env/psql";
import { interpolate, loadCompose, repoPath } from "../src/repo";

// Least privilege for todos in compose (issue 24, point 10): todos connects as a role of its own that owns
// its database and is no superuser. docker-compose.yml's one-shot db-setup makes that role by running
// docker/postgres/todos-role.sql as the superuser; here the same file runs through psql against the
// machine's PostgreSQL (TODOS_TEST_ADMIN_URL, as the todos suites use it), and the role then applies todos'
// migrations and writes through them.
const run = promisify(execFile);
const ADMIN_URL = process.env.TODOS_TEST_ADMIN_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";
const SCRIPT = repoPath("docker", "postgres", "todos-role.sql");
const MIGRATIONS = repoPath("services", "todos", "prisma", "migrations");

const compose = loadCompose("docker-compose.yml");
const suffix = `${process.pid}_${Date.now()}`;
const ROLE = `todos_role_${suffix}`;
const DB = `todos_db_${suffix}`;
const OLD_DB = `todos_old_${suffix}`;

/** The role's password as setUp gives it by default (a server with password auth checks it). */
const ROLE_PASSWORD = "first-password";

/** A database URL of the test's server: another database, or another role (with the role's password). */
function urlFor(database: string, user?: string): string {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${database}`;
  if (user !== undefined) {
    url.username = user;
    url.password = ROLE_PASSWORD;
  }
  return url.toString();
}

/** psql on `url`: one SQL text (`-c`) or a file (`-f`); its stdout, unaligned, or the failure. */
async function psql(url: string, input: { sql?: string; file?: string }, env: NodeJS.ProcessEnv = {}) {
  const args = ["--no-psqlrc", "-v", "ON_ERROR_STOP=1", "-At", url];
  if (input.sql !== undefined) args.push("-c", input.sql);
  if (input.file !== undefined) args.push("-f", input.file);
  // psql from the global setup: the machine's, or Debian's unpacked client (test/setup/global.ts).
  const found = psqlFromEnv();
  return (await run(found.psql, args, { env: { ...process.env, ...found.env, ...env } })).stdout.trim();
}

/** What db-setup runs, as it runs it: the superuser, the role, password and database from the environment. */
function setUp(database: string, password = ROLE_PASSWORD, user = ROLE) {
  return psql(
    ADMIN_URL,
    { file: SCRIPT },
    { TODOS_DB_USER: user, TODOS_DB_PASSWORD: password, TODOS_DB_NAME: database },
  );
}

/** todos' migrations, in order, applied with psql as `user` (what the service's runner sends). */
async function migrate(database: string, user?: string) {
  for (const name of readdirSync(MIGRATIONS)
    .filter((n) => /^\d+_/.test(n))
    .sort()) {
    await psql(urlFor(database, user), { file: `${MIGRATIONS}/${name}/migration.sql` });
  }
}

const owners = (database: string) =>
  psql(urlFor(database), {
    sql: `SELECT DISTINCT pg_get_userbyid(relowner) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND relkind IN ('r', 'S') UNION
        SELECT DISTINCT pg_get_userbyid(proowner) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'public'`,
  });

afterAll(async () => {
  for (const database of [DB, OLD_DB]) {
    await psql(ADMIN_URL, { sql: `DROP DATABASE IF EXISTS "${database}" WITH (FORCE)` });
  }
  await psql(ADMIN_URL, { sql: `DROP ROLE IF EXISTS "${ROLE}"` });
});

describe("docker-compose.yml: todos' database role", () => {
  it("connects todos as POSTGRES_USER, which is not the server's superuser, set up by db-setup before todos starts", () => {
    const superuser = interpolate(String(compose.services.postgres?.environment?.POSTGRES_USER), {});
    const url = interpolate(String(compose.services.todos?.environment?.DATABASE_URL), { POSTGRES_PASSWORD: "x" });
    expect({ superuser, todosUser: new URL(url).username }).toStrictEqual({
      superuser: "postgres",
      todosUser: "todos",
    });
    // Whatever .env says, db-setup runs as the superuser and gives todos' role the same name todos uses.
    const setup = compose.services["db-setup"];
    expect(setup?.environment?.PGUSER).toBe(compose.services.postgres?.environment?.POSTGRES_USER);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation syntax, not a JS template
    expect(setup?.environment?.TODOS_DB_USER).toBe("${POSTGRES_USER:-todos}");
    expect(String(compose.services.todos?.environment?.DATABASE_URL)).toMatch(
      /^postgresql:\/\/\$\{POSTGRES_USER:-todos\}:/,
    );
    expect(setup?.entrypoint).toStrictEqual(["psql", "--no-psqlrc", "--quiet", "--file", "/setup/todos-role.sql"]);
    expect(setup?.configs).toStrictEqual([{ source: "todos-role", target: "/setup/todos-role.sql" }]);
    expect(compose.configs?.["todos-role"]).toStrictEqual({ file: "./docker/postgres/todos-role.sql" });
    expect(compose.services.todos?.depends_on?.["db-setup"]).toStrictEqual({
      condition: "service_completed_successfully",
    });
  });
});

describe("docker/postgres/todos-role.sql against PostgreSQL", () => {
  it("makes a login role that is no superuser and owns its new database; runs again, changing only the password", async () => {
    await setUp(DB);
    const role = `SELECT rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls
      FROM pg_roles WHERE rolname = '${ROLE}'`;
    expect(await psql(ADMIN_URL, { sql: role })).toBe("t|f|f|f|f|f");
    const database = `SELECT pg_get_userbyid(datdba), datacl::text FROM pg_database WHERE datname = '${DB}'`;
    const made = await psql(ADMIN_URL, { sql: database });
    expect(made).toBe(`${ROLE}|{${ROLE}=CTc/${ROLE}}`);
    const password = `SELECT rolpassword FROM pg_authid WHERE rolname = '${ROLE}'`;
    const first = await psql(ADMIN_URL, { sql: password });
    expect(first).toMatch(/^SCRAM-SHA-256\$/);
    await setUp(DB, "second-password");
    expect(await psql(ADMIN_URL, { sql: role })).toBe("t|f|f|f|f|f");
    expect(await psql(ADMIN_URL, { sql: database })).toBe(made);
    expect(await psql(ADMIN_URL, { sql: password })).not.toBe(first);
  });

  it("lets that role apply todos' migrations and write an item, counted by their trigger", async () => {
    await setUp(DB);
    await migrate(DB, ROLE);
    const user = urlFor(DB, ROLE);
    await psql(user, {
      sql: `INSERT INTO "TodoItem" ("id", "userId", "title", "completed", "updatedAt")
        VALUES (gen_random_uuid(), 'alice', 'first', false, now())`,
    });
    expect(await psql(user, { sql: `SELECT "items" FROM "TodoListSize" WHERE "userId" = 'alice'` })).toBe("1");
    expect(await owners(DB)).toBe(ROLE);
    // Nothing beyond its database: it can make no role and no database.
    await expect(psql(user, { sql: `CREATE ROLE "${ROLE}_x"` })).rejects.toThrow(/permission denied/);
    await expect(psql(user, { sql: `CREATE DATABASE "${DB}_x"` })).rejects.toThrow(/permission denied/);
  });

  it("gives the role a database an older stack made as the superuser, so that its migrations can change it", async () => {
    await psql(ADMIN_URL, { sql: `CREATE DATABASE "${OLD_DB}"` });
    await migrate(OLD_DB);
    expect(await owners(OLD_DB)).toBe("postgres");
    await setUp(OLD_DB);
    expect(await owners(OLD_DB)).toBe(ROLE);
    // What a later migration may do: change a table and replace the count's trigger function.
    const user = urlFor(OLD_DB, ROLE);
    await psql(user, { sql: `ALTER TABLE "TodoItem" ADD COLUMN "note" TEXT` });
    await psql(user, {
      sql: `CREATE OR REPLACE FUNCTION "todo_list_size_clear"() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN DELETE FROM "TodoListSize"; RETURN NULL; END'`,
    });
  });

  it("refuses, changing nothing, when POSTGRES_USER names the superuser itself", async () => {
    const before = await psql(ADMIN_URL, { sql: "SELECT rolsuper FROM pg_roles WHERE rolname = current_user" });
    const refused = setUp(DB, "pw", "postgres");
    await expect(refused).rejects.toMatchObject({
      code: 3,
      stderr: expect.stringContaining("POSTGRES_USER names the superuser (POSTGRES_ADMIN_USER)"),
    });
    expect(await psql(ADMIN_URL, { sql: "SELECT rolsuper FROM pg_roles WHERE rolname = current_user" })).toBe(before);
  });
});
