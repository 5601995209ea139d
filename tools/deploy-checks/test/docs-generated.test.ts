import path from "node:path";
import type { z } from "zod";
import { readRepoFile } from "../src/repo";

/** The generator behind `pnpm docs:gen` (plain CommonJS beside this package's tests). */
const generator = require("../scripts/gen-docs.js") as {
  pages(): [page: string, current: string, generated: string][];
  sections(): Record<string, Record<string, string>>;
  fill(text: string, generated: Record<string, string>, page?: string): string;
  configTable(schema: z.ZodObject, docs: Record<string, string>): string;
  errorTable(statuses: Record<string, number>, docs: Record<string, string>): string;
  table(header: string[], rows: string[][]): string;
  begin(name: string): string;
  end(name: string): string;
};

/** A table's cells without the padding that aligns its columns. */
const squeeze = (text: string) => text.replace(/ {2,}\|/g, " |");

describe("the generated docs (pnpm docs:gen)", () => {
  it.each(generator.pages().map(([page, current, generated]) => [page, current, generated]))(
    "%s is what its schema or catalogue generates (run `pnpm docs:gen` after changing either)",
    (_page, current, generated) => {
      expect(current).toBe(generated);
    },
  );

  it("holds a section for every variable of both services and every decider error code", () => {
    const config = squeeze(readRepoFile("docs", "configuration.md"));
    const todos = require("@localdecider/todos/config") as { configSchema: z.ZodObject };
    const decider = require("@localdecider/decider/config") as { configSchema: z.ZodObject };
    for (const schema of [todos.configSchema, decider.configSchema]) {
      for (const name of Object.keys(schema.shape)) expect(config).toContain(`| \`${name}\` |`);
    }
    const errors = squeeze(readRepoFile("docs", "errors.md"));
    const catalogue = require("@localdecider/decider/errors") as { DECIDER_ERROR_STATUS: Record<string, number> };
    for (const [code, status] of Object.entries(catalogue.DECIDER_ERROR_STATUS)) {
      expect(errors).toContain(`| ${status} | \`${code}\` |`);
    }
  });

  it("lists every todos error message (the contracts' and the sign-in's) in docs/errors.md, with its status", () => {
    // The todos service's own dependencies: this package reaches its dist/ and its contracts through it.
    const todosDir = path.dirname(require.resolve("@localdecider/todos/package.json"));
    const contracts = require(require.resolve("@localdecider/contracts/todos", { paths: [todosDir] })) as {
      TODO_MESSAGES: Record<string, string>;
    };
    const auth = require(path.join(todosDir, "dist", "http", "auth.js")) as { AUTH_MESSAGES: Record<string, string> };
    const { deleted: _success, ...errorMessages } = contracts.TODO_MESSAGES;
    const table = squeeze(readRepoFile("docs", "errors.md").split("## todos")[1] ?? "");
    const missing = [...Object.values(errorMessages), ...Object.values(auth.AUTH_MESSAGES)].filter(
      (message) =>
        !new RegExp(`\\| \\d{3} \\| \`\\{ "error": "${message.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}"`).test(table),
    );
    expect(missing).toStrictEqual([]);
  });
});

describe("the generator itself", () => {
  const { configSchema } = require("@localdecider/decider/config") as { configSchema: z.ZodObject };
  const { CONFIG_DOCS } = require("@localdecider/decider/config-docs") as { CONFIG_DOCS: Record<string, string> };

  it("notices a page that no longer says what the schema says", () => {
    const [, current] = generator.pages().find(([page]) => page === "docs/configuration.md") ?? [];
    const sections = generator.sections()["docs/configuration.md"] as Record<string, string>;
    const drifted = (current as string).replace(/(\| `LOCALDECIDER_PORT` +\| `)8080`/, "$18081`");
    expect(drifted).not.toBe(current);
    expect(generator.fill(drifted, sections)).toBe(current);
  });

  it("shows each variable's written default, accepted values and meaning", () => {
    const table = squeeze(generator.configTable(configSchema, CONFIG_DOCS));
    expect(table).toContain("| `LOCALDECIDER_PORT` | `8080` | whole number 0-65535 |");
    expect(table).toContain("| `LOCALDECIDER_BODY_LIMIT` | `1mb` |");
    expect(table).toContain("| `LOCALDECIDER_UPSTREAM_PROTOCOL` | `auto` | `auto`, `systemone`, `chat`, `decisions` |");
    expect(table).toContain("| `LOCALDECIDER_PACK_PROMPTS` | `true` | `true` or `false` |");
    expect(table).toContain("| `LOCALDECIDER_API_KEY` | unset |");
  });

  it("refuses a variable without a description and a description without its variable", () => {
    const { LOCALDECIDER_PORT: _port, ...lacking } = CONFIG_DOCS;
    expect(() => generator.configTable(configSchema, lacking)).toThrow(
      "no description in CONFIG_DOCS for: LOCALDECIDER_PORT",
    );
    expect(() => generator.configTable(configSchema, { ...CONFIG_DOCS, LOCALDECIDER_GONE: "x" })).toThrow(
      "CONFIG_DOCS describes variables the schema lacks: LOCALDECIDER_GONE",
    );
    expect(() => generator.errorTable({ a_code: 400 }, {})).toThrow("no description in DECIDER_ERROR_DOCS for: a_code");
  });

  it("lays tables out as the formatter does: every column as wide as its widest cell", () => {
    expect(
      generator
        .table(
          ["A", "`b`"],
          [
            ["1", "xyzzy"],
            ["22", "é…"],
          ],
        )
        .split("\n"),
    ).toStrictEqual(["| A   | `b`   |", "| --- | ----- |", "| 1   | xyzzy |", "| 22  | é…    |"]);
  });

  it("refuses a page without the markers of its section", () => {
    expect(() => generator.fill("# A page\n", { "decider-config": "x" }, "docs/x.md")).toThrow(
      'docs/x.md lacks the markers of its generated section "decider-config"',
    );
    const page = `a\n${generator.begin("s")}\nold\n${generator.end("s")}\nb\n`;
    expect(generator.fill(page, { s: "new" })).toBe(`a\n${generator.begin("s")}\n\nnew\n\n${generator.end("s")}\nb\n`);
  });
});
