import { existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { anchors, links, markdownFiles, slug } from "../src/markdown";
import { REPO_ROOT } from "../src/repo";

/** Where a link in `file` leads that does not: `file:line target (why)`; external links are not fetched. */
function brokenLinks(file: string, text: string, read: (file: string) => string | undefined): string[] {
  const broken: string[] = [];
  for (const { target, line } of links(text)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: and the like: outside the repository
    const [pathPart = "", anchor] = target.split("#", 2);
    const decoded = decodeURIComponent(pathPart);
    const linked = decoded === "" ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), decoded));
    const where = `${file}:${line} ${target}`;
    if (linked.startsWith("..") || path.posix.isAbsolute(decoded)) {
      broken.push(`${where} (outside the repository)`);
      continue;
    }
    const full = path.join(REPO_ROOT, linked);
    if (!existsSync(full)) {
      broken.push(`${where} (no such file)`);
      continue;
    }
    if (anchor === undefined || anchor === "") continue;
    if (statSync(full).isDirectory() || !linked.endsWith(".md")) {
      broken.push(`${where} (an anchor into a file that is not Markdown)`);
      continue;
    }
    const linkedText = read(linked);
    if (linkedText === undefined || !anchors(linkedText).has(decodeURIComponent(anchor))) {
      broken.push(`${where} (no heading or anchor "${anchor}" in ${linked})`);
    }
  }
  return broken;
}

describe("every Markdown file's relative links and #anchors", () => {
  const files = markdownFiles();
  const cache = new Map<string, string>();
  const read = (file: string) => {
    if (!cache.has(file)) {
      const full = path.join(REPO_ROOT, file);
      cache.set(file, existsSync(full) ? readFileSync(full, "utf8") : "");
    }
    return cache.get(file);
  };

  it("finds the READMEs and the docs pages", () => {
    expect(files).toEqual(
      expect.arrayContaining(["README.md", "services/decider/README.md", "docs/configuration.md", "docs/errors.md"]),
    );
  });

  it("lead to a file that exists and, with an anchor, to a heading (GitHub's slugs) or an anchor in it", () => {
    const broken = files.flatMap((file) => brokenLinks(file, read(file) ?? "", read));
    expect(broken).toStrictEqual([]);
  });
});

describe("the link check itself", () => {
  const pages: Record<string, string> = {
    "docs/a.md": "# Page A\n\n## Scaling out: `docker/compose.scale.yml`\n\n## Notes\n\n## Notes\n",
    "README.md": "# Root\n\n## Where to go\n",
  };
  const read = (file: string) => pages[file];

  it("slugs headings as GitHub does", () => {
    expect(slug("Scaling out: `docker/compose.scale.yml`")).toBe("scaling-out-dockercomposescaleyml");
    expect(slug("The decider with its embedded engine: `--target embedded`")).toBe(
      "the-decider-with-its-embedded-engine---target-embedded",
    );
    expect(slug("Validation answers 422, as Jev and llama.cpp do")).toBe(
      "validation-answers-422-as-jev-and-llamacpp-do",
    );
    expect(slug("The decider's [SDK](x.md) *in* detail")).toBe("the-deciders-sdk-in-detail");
    expect([...anchors(pages["docs/a.md"] as string)]).toStrictEqual([
      "page-a",
      "scaling-out-dockercomposescaleyml",
      "notes",
      "notes-1",
    ]);
  });

  it("reports a missing file, a missing anchor and a link out of the repository, and passes good ones", () => {
    // docs/a.md is not on disk: the file checks run against the real tree, so only README.md exists there.
    const text = [
      "[ok](#where-to-go) [ok](docs/deploy.md#hardening) [web](https://example.com/x#y)",
      "[gone](docs/nope.md) [bad](#nowhere) [out](../elsewhere.md)",
      "`[in code](docs/nope.md)`",
      "```md",
      "[in a block](docs/nope.md)",
      "```",
    ].join("\n");
    expect(
      brokenLinks("README.md", text, (file) => read(file) ?? readFileSync(path.join(REPO_ROOT, file), "utf8")),
    ).toStrictEqual([
      "README.md:2 docs/nope.md (no such file)",
      'README.md:2 #nowhere (no heading or anchor "nowhere" in README.md)',
      "README.md:2 ../elsewhere.md (outside the repository)",
    ]);
  });
});
