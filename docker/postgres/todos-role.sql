-- Gives the todos service a role of its own that owns its database and nothing else, so that todos never
-- connects as the server's superuser. Run by docker-compose.yml's one-shot `db-setup` service as the
-- superuser (POSTGRES_ADMIN_USER), before todos starts, on every `up`: every step is idempotent, so it also
-- sets a changed POSTGRES_PASSWORD, and moves a database made by an older stack (whose todos connected as the
-- superuser) to the new role. psql 15 or later (\getenv); run by hand:
--   TODOS_DB_USER=todos TODOS_DB_PASSWORD=... TODOS_DB_NAME=todos psql -U postgres -f docker/postgres/todos-role.sql
\set ON_ERROR_STOP on
\getenv app_user TODOS_DB_USER
\getenv app_password TODOS_DB_PASSWORD
\getenv app_db TODOS_DB_NAME

-- The role todos connects as must not be the one running this: it would stay a superuser.
SELECT :'app_user' = current_user AS same_role \gset
\if :same_role
DO 'BEGIN RAISE EXCEPTION ''POSTGRES_USER names the superuser (POSTGRES_ADMIN_USER): give todos a role of its own''; END';
\endif

-- The role: it may log in and nothing more (no superuser, no creating roles or databases, no replication).
SELECT format('CREATE ROLE %I', :'app_user')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'app_user') \gexec
ALTER ROLE :"app_user" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
  PASSWORD :'app_password';

-- Its database, which it owns: as owner it creates its tables in the public schema (owned by
-- pg_database_owner) and applies its migrations itself. Other roles, but the superuser, may not connect.
SELECT format('CREATE DATABASE %I OWNER %I', :'app_db', :'app_user')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'app_db') \gexec
ALTER DATABASE :"app_db" OWNER TO :"app_user";
REVOKE ALL ON DATABASE :"app_db" FROM PUBLIC;

-- A database made before this role existed holds tables, sequences and functions (the item count's
-- triggers) owned by whoever made them: each becomes the role's, so that its migrations can change them.
\connect :"app_db"
SELECT format('ALTER %s %s OWNER TO %I',
              CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                             ELSE 'TABLE' END,
              c.oid::regclass, :'app_user')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'S', 'v', 'm')
  AND c.relowner <> (SELECT oid FROM pg_roles WHERE rolname = :'app_user')
  -- A sequence owned by a column follows its table.
  AND NOT (c.relkind = 'S' AND EXISTS (SELECT FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'a'))
ORDER BY c.oid \gexec
SELECT format('ALTER ROUTINE %s OWNER TO %I', p.oid::regprocedure, :'app_user')
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'public' AND p.proowner <> (SELECT oid FROM pg_roles WHERE rolname = :'app_user')
ORDER BY p.oid \gexec
