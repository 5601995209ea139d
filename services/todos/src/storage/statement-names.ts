import { createHash } from "node:crypto";

/** Distinct statements named at most; Prisma sends a few dozen shapes, so this is only a safety bound. */
export const NAMED_STATEMENTS_MAX = 1_000;

/**
 * adapter-pg's `statementNameGenerator`: a name per SQL text makes `pg` prepare each statement once per
 * connection and afterwards send only Bind/Execute, so PostgreSQL skips parsing and planning it again
 * (measured in the README, "Performance"). Safe here because:
 * - the name is a digest of the text, so two different statements never share a name on a connection;
 * - Prisma's SQL carries every value as a bind parameter, so the texts are a small fixed set (the query
 *   shapes of our repository), and past NAMED_STATEMENTS_MAX texts new ones go unnamed (""), as before;
 * - the schema is migrated before the pool opens, so no prepared plan outlives a change of its table.
 * Not safe behind a pooler in transaction mode that does not track prepared statements (PgBouncer before
 * 1.21, or without max_prepared_statements): see the README.
 */
export function statementNames(max: number = NAMED_STATEMENTS_MAX): (query: { sql: string }) => string {
  const names = new Map<string, string>();
  return ({ sql }) => {
    const known = names.get(sql);
    if (known !== undefined) return known;
    if (names.size >= max) return ""; // pg's unnamed statement, parsed with every query
    const name = `todos_${createHash("sha256").update(sql).digest("hex").slice(0, 32)}`;
    names.set(sql, name);
    return name;
  };
}
