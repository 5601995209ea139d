import { statementNames } from "../src/storage/statement-names";

describe("statementNames (adapter-pg's prepared statement names)", () => {
  it("when the same SQL comes again, then it gets the same name, and different SQL a different one", () => {
    const name = statementNames();
    const list = name({ sql: 'SELECT "id" FROM "TodoItem" WHERE "userId" = $1' });
    expect(list).toMatch(/^todos_[0-9a-f]{32}$/);
    expect(name({ sql: 'SELECT "id" FROM "TodoItem" WHERE "userId" = $1' })).toBe(list);
    expect(name({ sql: 'SELECT "id" FROM "TodoItem" WHERE "userId" = $1 LIMIT $2' })).not.toBe(list);
    // Names fit PostgreSQL's 63-byte identifiers.
    expect(list.length).toBeLessThanOrEqual(63);
  });

  it("when more distinct statements than the bound arrive, then the new ones go unnamed and the known ones keep their names", () => {
    const name = statementNames(2);
    const a = name({ sql: "SELECT 1" });
    const b = name({ sql: "SELECT 2" });
    expect(name({ sql: "SELECT 3" })).toBe("");
    expect(name({ sql: "SELECT 1" })).toBe(a);
    expect(name({ sql: "SELECT 2" })).toBe(b);
  });
});
