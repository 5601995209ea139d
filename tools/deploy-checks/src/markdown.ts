import { readdirSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT } from "./repo";

/** Folders never walked for documentation: installed and built files, and git's own. */
const SKIPPED = new Set(["node_modules", "dist", ".git", "coverage", "eval-out", "data"]);

/** Every Markdown file of the repository, as root-relative POSIX paths, sorted. */
export function markdownFiles(root = REPO_ROOT): string[] {
  const found: string[] = [];
  const walk = (relative: string) => {
    for (const entry of readdirSync(path.join(root, relative), { withFileTypes: true })) {
      const child = relative === "" ? entry.name : `${relative}/${entry.name}`;
      if (entry.isDirectory()) {
        if (!SKIPPED.has(entry.name)) walk(child);
      } else if (entry.name.endsWith(".md")) {
        found.push(child);
      }
    }
  };
  walk("");
  return found.sort();
}

/** One fenced code block: its info string (`sh`, `ts`, ...), its lines, and the line it starts on (1-based). */
export interface CodeBlock {
  info: string;
  lines: string[];
  line: number;
}

/** The fenced code blocks of a Markdown text (``` or ~~~ fences, at most 3 spaces of indent, as CommonMark). */
export function codeBlocks(text: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  let open: { fence: string; block: CodeBlock } | undefined;
  text.split("\n").forEach((line, i) => {
    if (open === undefined) {
      const m = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)/.exec(line);
      if (m) open = { fence: m[1] as string, block: { info: (m[2] as string).toLowerCase(), lines: [], line: i + 1 } };
      return;
    }
    const close = new RegExp(`^ {0,3}${open.fence[0]}{${open.fence.length},}\\s*$`);
    if (close.test(line)) {
      blocks.push(open.block);
      open = undefined;
    } else {
      open.block.lines.push(line);
    }
  });
  return blocks;
}

/** The text outside fenced code blocks and inline code spans (where links and headings are not read). */
export function proseLines(text: string): { line: number; text: string; raw: string }[] {
  const out: { line: number; text: string; raw: string }[] = [];
  let fence: string | undefined;
  text.split("\n").forEach((line, i) => {
    const m = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence === undefined && m) {
      fence = m[1] as string;
      return;
    }
    if (fence !== undefined) {
      if (new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`).test(line)) fence = undefined;
      return;
    }
    out.push({ line: i + 1, text: line.replace(/(`+)(?:(?!\1).)+?\1/g, ""), raw: line });
  });
  return out;
}

/**
 * A heading's anchor as GitHub makes it (github-slugger): the rendered text (code spans keep their text,
 * links their label, emphasis marks go) in lower case, every character but letters, digits, `_`, `-` and
 * spaces removed, each space a `-`.
 */
export function slug(heading: string): string {
  const rendered = heading
    .replace(/`([^`]*)`/g, "$1")
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]+>/g, "")
    .replace(/\*+/g, "");
  return rendered
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, "")
    .replace(/ /g, "-");
}

/** Every anchor a Markdown text has: its headings' slugs (a repeated one gets -1, -2, ...) and `id`/`name` attributes. */
export function anchors(text: string): Set<string> {
  const found = new Set<string>();
  const seen = new Map<string, number>();
  for (const { text: line, raw } of proseLines(text)) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(raw);
    if (heading) {
      const base = slug(heading[1] as string);
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      found.add(count === 0 ? base : `${base}-${count}`);
    }
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) found.add(m[1] as string);
  }
  return found;
}

/** One link of a Markdown text: its target as written, and where it is. */
export interface Link {
  target: string;
  line: number;
}

/** The inline links and images (`[text](target)`, `![alt](target "title")`) of a Markdown text, outside code. */
export function links(text: string): Link[] {
  const found: Link[] = [];
  for (const { line, text: prose } of proseLines(text)) {
    for (const m of prose.matchAll(/!?\[(?:[^\]]|\][^(])*?\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      found.push({ target: m[1] as string, line });
    }
  }
  return found;
}
