import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { repoPath } from "../src/repo";

/**
 * Each service's image should load its own contracts only (issue 20): `@localdecider/contracts` is the shared
 * core, `/decider` and `/todos` each service's own. These checks read the sources and load the built entry
 * points; image-replay.test.ts checks what a started image actually loaded.
 */

/** The `.ts` files under a repository folder, generated code left out. */
function sources(folder: string): string[] {
  return readdirSync(repoPath(folder), { recursive: true, encoding: "utf8" })
    .filter((file) => file.endsWith(".ts") && !/(^|\/)generated\//.test(file))
    .map((file) => `${folder}/${file.split(path.sep).join("/")}`);
}

/** Every module a source file names: static imports and re-exports, `import()` and `require()`. */
function specifiers(text: string): string[] {
  const found = text.matchAll(/(?:\bfrom\s*|^\s*import\s*|\bimport\s*\(\s*|\brequire\s*\(\s*)["']([^"']+)["']/gm);
  return [...found].map((m) => m[1] as string);
}

/** `file: specifier` for each contracts module the files name that `allowed` does not hold. */
function foreignContracts(files: string[], allowed: string[]): string[] {
  return files.flatMap((file) =>
    specifiers(readFileSync(repoPath(file), "utf8"))
      .filter((s) => /^@localdecider\/contracts(\/|$)/.test(s) && !allowed.includes(s))
      .map((s) => `${file}: ${s}`),
  );
}

/**
 * The files of the built contracts package (relative to its dist/) that requiring `entry` loads, resolved
 * from `service`'s folder as the service itself resolves it.
 */
function loadedBy(service: string, entry: string): string[] {
  const script = `const { realpathSync } = require("node:fs");
const { dirname, join, relative, sep } = require("node:path");
require(${JSON.stringify(entry)});
const dist = join(realpathSync(dirname(require.resolve("@localdecider/contracts/package.json"))), "dist");
const files = Object.keys(require.cache).filter((file) => file.startsWith(dist + sep));
console.log(JSON.stringify(files.map((file) => relative(dist, file).split(sep).join("/")).sort()));`;
  const out = execFileSync(process.execPath, ["-e", script], { cwd: repoPath("services", service), encoding: "utf8" });
  return JSON.parse(out) as string[];
}

describe("contracts per service", () => {
  it("finds the services' contract imports to check (the scan itself works)", () => {
    const decider = sources("services/decider/src");
    const named = decider.flatMap((file) => specifiers(readFileSync(repoPath(file), "utf8")));
    expect(named).toEqual(expect.arrayContaining(["@localdecider/contracts", "@localdecider/contracts/decider"]));
    expect(specifiers('import type { A } from "x";\nexport * from "y";\nconst z = require("z");')).toStrictEqual([
      "x",
      "y",
      "z",
    ]);
  });

  it.each([
    ["decider", "todos"],
    ["todos", "decider"],
  ])("services/%s/src imports the shared core and its own subpath only, never /%s", (service) => {
    const allowed = ["@localdecider/contracts", `@localdecider/contracts/${service}`];
    expect(foreignContracts(sources(`services/${service}/src`), allowed)).toStrictEqual([]);
  });

  it("the service kit, which both images hold, imports the shared core only", () => {
    expect(foreignContracts(sources("packages/service-kit/src"), ["@localdecider/contracts"])).toStrictEqual([]);
  });

  it("the shared core loads no service's contracts, and each service's subpath not the other's", () => {
    const core = loadedBy("decider", "@localdecider/contracts");
    expect(core).toContain("index.js");
    expect(core.filter((file) => !file.startsWith("core/") && file !== "index.js")).toStrictEqual([]);
    const decider = loadedBy("decider", "@localdecider/contracts/decider");
    expect(decider).toContain("decider/routes.js");
    expect(decider.filter((file) => file.startsWith("todos/"))).toStrictEqual([]);
    const todos = loadedBy("todos", "@localdecider/contracts/todos");
    expect(todos).toContain("todos/routes.js");
    expect(todos.filter((file) => file.startsWith("decider/"))).toStrictEqual([]);
  });
});
