#!/usr/bin/env node
/**
 * `pnpm docs:gen`: writes the generated parts of the docs from their one source, between the markers
 *   <!-- BEGIN GENERATED: <name> (pnpm docs:gen) --> ... <!-- END GENERATED: <name> -->
 * - docs/configuration.md: each service's variables (name, default, accepted values from its zod config
 *   schema; meaning from the CONFIG_DOCS map beside it, src/config-docs.ts);
 * - docs/errors.md: the decider's error codes (status from the contracts' DECIDER_ERROR_STATUS, meaning from
 *   DECIDER_ERROR_DOCS in services/decider/src/errors.ts).
 * It reads the packages' built dist/ (the root script builds first). `--check` writes nothing and exits 1
 * naming each page that differs; test/docs-generated.test.ts runs the same comparison in `pnpm test`.
 *
 * Plain CommonJS, no build of its own: it lives in deploy-checks for that package's workspace dependencies.
 */
const { readFileSync, writeFileSync } = require("node:fs");
const path = require("node:path");

const REPO_ROOT = path.resolve(__dirname, "..", "..", "..");

/** The zod definition under a schema (zod 4 keeps it at `_zod.def`). */
const defOf = (schema) => schema._zod.def;

/** The written default of a field (`"1mb"`, not the 1048576 it parses to), or undefined when it has none. */
function defaultOf(field) {
  let current = field;
  for (let i = 0; i < 20 && current !== undefined; i++) {
    const def = defOf(current);
    if (def.type === "default") return def.defaultValue;
    current = def.innerType ?? def.in;
  }
  return undefined;
}

/** `whole number 0-65535`, `number above 0, at most 86400`, from a number schema's checks. */
function numberText(def) {
  let int = false;
  let min;
  let max;
  for (const check of def.checks ?? []) {
    const c = defOf(check);
    if (c.check === "number_format" && String(c.format).includes("int")) int = true;
    if (c.check === "greater_than") min = { value: c.value, inclusive: c.inclusive };
    if (c.check === "less_than") max = { value: c.value, inclusive: c.inclusive };
  }
  const kind = int ? "whole number" : "number";
  if (int && min?.inclusive && max?.inclusive) return `${kind} ${min.value}-${max.value}`;
  const bounds = [
    min === undefined ? undefined : `${min.inclusive ? "at least" : "above"} ${min.value}`,
    max === undefined ? undefined : `${max.inclusive ? "at most" : "below"} ${max.value}`,
  ].filter((b) => b !== undefined);
  return bounds.length === 0 ? kind : `${kind}, ${bounds.join(", ")}`;
}

/** What a field accepts, as far as its schema says it plainly (enums, numbers, booleans), else "". */
function acceptsOf(field) {
  const parses = (text) => field.safeParse(text);
  const yes = parses("true");
  const no = parses("false");
  if (yes.success && no.success && yes.data === true && no.data === false) return "`true` or `false`";
  let current = field;
  for (let i = 0; i < 20 && current !== undefined; i++) {
    const def = defOf(current);
    if (def.type === "enum")
      return Object.values(def.entries)
        .map((v) => `\`${v}\``)
        .join(", ");
    if (def.type === "literal") return def.values.map((v) => `\`${v}\``).join(", ");
    if (def.type === "number") return numberText(def);
    if (def.type === "union") return def.options.map(acceptsOf).join(" or ");
    current = def.innerType ?? (def.type === "pipe" && defOf(def.in).type !== "string" ? def.in : undefined);
    // z.coerce.number() and the like: a pipe whose input is the number itself.
    if (def.type === "pipe" && current === undefined && defOf(def.out).type === "number") current = def.out;
  }
  return "";
}

/** A table cell: pipes escaped, one line. */
const cell = (text) =>
  String(text)
    .replace(/\|/g, "\\|")
    .replace(/\s*\n\s*/g, " ");

/** Characters as Biome's Markdown formatter counts them when it aligns a table's columns (code points). */
const width = (text) => [...text].length;

/**
 * A Markdown table laid out as `pnpm format` (Biome) lays it out, every column padded to its widest cell,
 * so that the generated page and the formatter agree and neither rewrites the other's output.
 */
function table(header, rows) {
  const widths = header.map((_, i) => Math.max(3, ...[header, ...rows].map((row) => width(row[i]))));
  const line = (row) => `| ${row.map((text, i) => text + " ".repeat(widths[i] - width(text))).join(" | ")} |`;
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

/** The markdown table of one service's variables, in the schema's order. */
function configTable(schema, docs) {
  const names = Object.keys(schema.shape);
  const missing = names.filter((name) => typeof docs[name] !== "string" || docs[name].trim() === "");
  if (missing.length > 0) throw new Error(`no description in CONFIG_DOCS for: ${missing.join(", ")}`);
  const stale = Object.keys(docs).filter((name) => !names.includes(name));
  if (stale.length > 0) throw new Error(`CONFIG_DOCS describes variables the schema lacks: ${stale.join(", ")}`);
  const rows = names.map((name) => {
    const field = schema.shape[name];
    const fallback = defaultOf(field);
    const shown = fallback === undefined ? "unset" : `\`${fallback}\``;
    return [`\`${name}\``, cell(shown), cell(acceptsOf(field)), cell(docs[name])];
  });
  return table(["Variable", "Default", "Accepts", "Meaning"], rows);
}

function errorTable(statuses, docs) {
  const codes = Object.keys(statuses);
  const missing = codes.filter((code) => typeof docs[code] !== "string");
  if (missing.length > 0) throw new Error(`no description in DECIDER_ERROR_DOCS for: ${missing.join(", ")}`);
  const rows = codes.map((code) => [String(statuses[code]), `\`${code}\``, cell(docs[code])]);
  return table(["Status", "`code`", "When"], rows);
}

/** Every generated section: page -> section name -> its content, from the built packages. */
function sections(load = require) {
  const decider = { ...load("@localdecider/decider/config"), ...load("@localdecider/decider/config-docs") };
  const todos = { ...load("@localdecider/todos/config"), ...load("@localdecider/todos/config-docs") };
  const errors = load("@localdecider/decider/errors");
  return {
    "docs/configuration.md": {
      "todos-config": configTable(todos.configSchema, todos.CONFIG_DOCS),
      "decider-config": configTable(decider.configSchema, decider.CONFIG_DOCS),
    },
    "docs/errors.md": {
      "decider-errors": errorTable(errors.DECIDER_ERROR_STATUS, errors.DECIDER_ERROR_DOCS),
    },
  };
}

const begin = (name) => `<!-- BEGIN GENERATED: ${name} (pnpm docs:gen) -->`;
const end = (name) => `<!-- END GENERATED: ${name} -->`;

/** The page with each named section's content replaced; throws when a page lacks a section's markers. */
function fill(text, generated, page = "page") {
  let out = text;
  for (const [name, content] of Object.entries(generated)) {
    const start = out.indexOf(begin(name));
    const stop = out.indexOf(end(name));
    if (start === -1 || stop === -1 || stop < start) {
      throw new Error(`${page} lacks the markers of its generated section "${name}":\n${begin(name)}\n${end(name)}`);
    }
    out = `${out.slice(0, start + begin(name).length)}\n\n${content}\n\n${out.slice(stop)}`;
  }
  return out;
}

/** [page, its text now, its text as generated] for every generated page. */
function pages(root = REPO_ROOT, load = require) {
  return Object.entries(sections(load)).map(([page, generated]) => {
    const current = readFileSync(path.join(root, page), "utf8");
    return [page, current, fill(current, generated, page)];
  });
}

function main() {
  const check = process.argv.includes("--check");
  const stale = [];
  for (const [page, current, generated] of pages()) {
    if (current === generated) continue;
    stale.push(page);
    if (!check) writeFileSync(path.join(REPO_ROOT, page), generated);
  }
  if (check && stale.length > 0) {
    process.stderr.write(`out of date (run pnpm docs:gen): ${stale.join(", ")}\n`);
    process.exit(1);
  }
  process.stderr.write(stale.length === 0 ? "docs: up to date\n" : `docs: wrote ${stale.join(", ")}\n`);
}

if (require.main === module) main();

module.exports = { sections, fill, pages, configTable, errorTable, table, defaultOf, acceptsOf, begin, end };
