/**
 * Why the storage could not be opened at start, said for an operator: the variable that chose it
 * (DATABASE_URL, TODOS_DATA_DIR), what went wrong, what to do. The driver's own errors are bare
 * (`connect ECONNREFUSED 127.0.0.1:1`, `database "x" does not exist`), so they are recognised by their
 * errno or PostgreSQL error code, falling back to the message; anything unrecognised keeps its message,
 * still naming the variable.
 */

/** The URL without its password, for messages. */
function shown(databaseUrl: string): string {
  try {
    const url = new URL(databaseUrl);
    if (url.password !== "") url.password = "***";
    return url.toString();
  } catch {
    return "(not a URL)";
  }
}

/** The errno / SQLSTATE code of an error or of the first cause that has one. */
function codeOf(err: unknown): string | undefined {
  for (let e = err, i = 0; e !== undefined && e !== null && i < 5; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

export function storageStartupError(err: unknown, where: { databaseUrl: string | undefined; dataDir: string }): Error {
  const message = err instanceof Error ? err.message : String(err);
  if (where.databaseUrl === undefined) {
    return new Error(
      `TODOS_DATA_DIR=${where.dataDir}: the embedded database could not be opened: ${message}` +
        " (check that the directory is writable, or set DATABASE_URL to use PostgreSQL)",
      { cause: err },
    );
  }
  const url = shown(where.databaseUrl);
  let host = "";
  let database = "";
  try {
    const parsed = new URL(where.databaseUrl);
    host = `${parsed.hostname}:${parsed.port || "5432"}`;
    database = decodeURIComponent(parsed.pathname.slice(1));
  } catch {
    // Refused by the config schema already.
  }
  const code = codeOf(err);
  const hint = (() => {
    if (code === "ECONNREFUSED" || /ECONNREFUSED/.test(message)) {
      return `nothing accepts connections at ${host}: is PostgreSQL running there, and is DATABASE_URL's host and port right?`;
    }
    if (code === "ENOTFOUND" || code === "EAI_AGAIN" || /ENOTFOUND|EAI_AGAIN/.test(message)) {
      return `the host in DATABASE_URL (${host}) cannot be resolved: check its spelling, or use an IP address`;
    }
    if (code === "ETIMEDOUT" || code === "EHOSTUNREACH" || /timeout|ETIMEDOUT|EHOSTUNREACH/i.test(message)) {
      return `no answer from ${host} in time: check the address, the network and any firewall between`;
    }
    if (code === "3D000" || /database ".*" does not exist/.test(message)) {
      return `create it on ${host} (\`createdb ${database}\`, or CREATE DATABASE) or name an existing one in DATABASE_URL`;
    }
    if (code === "28P01" || code === "28000" || /password authentication failed|no pg_hba.conf entry/.test(message)) {
      return `the server at ${host} refused the user or password in DATABASE_URL: check them, and the server's pg_hba.conf`;
    }
    if (code === "42501" || /permission denied/.test(message)) {
      return "the user in DATABASE_URL may not create the tables the migrations need: grant it CREATE on the database (or run them as an owner)";
    }
    return "check DATABASE_URL and that the server is reachable";
  })();
  return new Error(`DATABASE_URL=${url}: ${message}: ${hint}`, { cause: err });
}
