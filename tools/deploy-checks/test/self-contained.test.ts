import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT, repoPath, repoTree } from "../src/repo";

/**
 * A user's clone is all there is: no test, script, benchmark or CI step may read a folder beside the
 * checkout (the team's machines have a `shared` folder beside it; nobody else does). Docs may mention it;
 * code may not. (This file writes its examples of such reads in pieces, so that it holds none itself.)
 */
const SKIPPED_DIRS = /(^|\/)(node_modules|\.git|dist|generated|coverage|data)(\/|$)/;
const CODE = /\.(ts|js|cjs|mjs|json|ya?ml|sh|toml)$|(^|\/)(Dockerfile|run|[^/.]+)$/;

/** The parent folder's name, written so that this file's own text holds no read beside the checkout. */
const UP = ".".repeat(2);

/** Every text file that could run or configure something (not docs, not build output). */
function codeFiles(): string[] {
  return repoTree().filter((file) => {
    if (SKIPPED_DIRS.test(file) || !CODE.test(file) || file.endsWith(".md")) return false;
    const stat = statSync(repoPath(file));
    return stat.isFile() && stat.size < 2_000_000;
  });
}

/** The relative paths written in `text` (`../x`, `../../y`) that resolve outside the repository from `file`. */
function pathsOutside(file: string, text: string): string[] {
  const out: string[] = [];
  if (/["'`]\.\.["'`]\s*,\s*["'`]shared["'`]/.test(text)) out.push(`"${UP}", "shared"`);
  for (const match of text.matchAll(/["'`\s(=]((?:\.\.\/)+[^"'`\s)]*)/g)) {
    const relative = match[1] as string;
    const resolved = path.resolve(path.dirname(repoPath(file)), relative);
    if (path.relative(REPO_ROOT, resolved).startsWith("..")) out.push(relative);
  }
  return out;
}

describe("the repository on its own", () => {
  it("finds code files to check (the walk itself works)", () => {
    const files = codeFiles();
    expect(files).toContain(".ci/run");
    expect(files).toContain("services/decider/test/replay/recordings.ts");
  });

  it("has no code, test, script or CI file that reads a path beside the checkout", () => {
    const offenders = codeFiles().flatMap((file) =>
      pathsOutside(file, readFileSync(repoPath(file), "utf8")).map((p) => `${file}: ${p}`),
    );
    expect(offenders).toStrictEqual([]);
  });

  it("flags a path that climbs out of the repository, and not one that stays inside", () => {
    const file = "services/decider/test/replay/recordings.ts";
    const climbing = `${`${UP}/`.repeat(5)}shared/fixtures/x`;
    expect(pathsOutside(file, `path.resolve(__dirname, "${climbing}")`)).toStrictEqual([climbing]);
    expect(pathsOutside(file, `path.join("${UP}", "shared", "fixtures")`)).toStrictEqual([`"${UP}", "shared"`]);
    expect(pathsOutside(file, 'path.resolve(__dirname, "../fixtures/llama-server-b10573")')).toStrictEqual([]);
    expect(pathsOutside(file, 'import { x } from "../../src/decide/probe";')).toStrictEqual([]);
  });

  it("keeps the recordings of a real llama-server in the repository, with their README", () => {
    const dir = "services/decider/test/fixtures/llama-server-b10573";
    const readme = readFileSync(repoPath(dir, "README.md"), "utf8");
    expect(readme).toMatch(/b10573/);
    expect(repoTree().filter((f) => f.startsWith(`${dir}/exchanges/`)).length).toBeGreaterThan(0);
  });
});
