/**
 * Enough of the Caddyfile format to check docker/Caddyfile without Caddy: `{$VAR:default}` substitution,
 * comments, quoted tokens, nested blocks and `import` of snippets. Each line is a directive (its tokens)
 * with the block that follows it, if any. Caddy's own `caddy adapt` is the authority; this reads what the
 * checks need from the same text (docs/deploy.md, "Scaling out", says how it was checked with Caddy).
 */
export interface CaddyDirective {
  tokens: string[];
  block: CaddyDirective[];
}

export interface Caddyfile {
  /** The leading `{ ... }` block, if any. */
  global: CaddyDirective[];
  /** Every site block, keyed by its addresses as written (`:3000`), snippets' imports expanded. */
  sites: Map<string, CaddyDirective[]>;
}

/** Caddy's parse-time environment placeholders: `{$NAME}` and `{$NAME:default}`. */
export function substituteEnv(text: string, env: Record<string, string | undefined>): string {
  return text.replace(/\{\$([A-Za-z_][A-Za-z0-9_]*)(?::([^}]*))?\}/g, (_m, name: string, fallback?: string) => {
    const value = env[name];
    return value !== undefined && value !== "" ? value : (fallback ?? "");
  });
}

/** Tokens per line; a `#` that starts a token begins a comment; double quotes group a token. */
function lines(text: string): string[][] {
  const result: string[][] = [];
  for (const raw of text.split("\n")) {
    const tokens: string[] = [];
    for (const m of raw.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g)) {
      if (m[2]?.startsWith("#")) break;
      tokens.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, "$1") : (m[2] as string));
    }
    if (tokens.length > 0) result.push(tokens);
  }
  return result;
}

function parseBlock(all: string[][], start: number): { block: CaddyDirective[]; next: number } {
  const block: CaddyDirective[] = [];
  let i = start;
  while (i < all.length) {
    const tokens = all[i] as string[];
    if (tokens.length === 1 && tokens[0] === "}") return { block, next: i + 1 };
    if (tokens[tokens.length - 1] === "{") {
      const inner = parseBlock(all, i + 1);
      block.push({ tokens: tokens.slice(0, -1), block: inner.block });
      i = inner.next;
    } else {
      block.push({ tokens, block: [] });
      i++;
    }
  }
  return { block, next: i };
}

function expandImports(block: CaddyDirective[], snippets: Map<string, CaddyDirective[]>): CaddyDirective[] {
  return block.flatMap((d) => {
    if (d.tokens[0] !== "import") return [{ tokens: d.tokens, block: expandImports(d.block, snippets) }];
    const snippet = snippets.get(d.tokens[1] ?? "");
    if (snippet === undefined) throw new Error(`import of an unknown snippet: ${d.tokens.join(" ")}`);
    return expandImports(snippet, snippets);
  });
}

export function parseCaddyfile(text: string, env: Record<string, string | undefined>): Caddyfile {
  const top = parseBlock(lines(substituteEnv(text, env)), 0).block;
  const snippets = new Map<string, CaddyDirective[]>();
  const result: Caddyfile = { global: [], sites: new Map() };
  top.forEach((entry, index) => {
    const name = /^\((.+)\)$/.exec(entry.tokens[0] ?? "")?.[1];
    if (index === 0 && entry.tokens.length === 0) result.global = entry.block;
    else if (name !== undefined) snippets.set(name, entry.block);
  });
  for (const entry of top) {
    if (entry.tokens.length === 0 || /^\(.+\)$/.test(entry.tokens[0] ?? "")) continue;
    result.sites.set(entry.tokens.join(" "), expandImports(entry.block, snippets));
  }
  return result;
}

/** The first directive named `name` in a block or any block nested in it, depth first. */
export function findDirective(block: CaddyDirective[], name: string): CaddyDirective | undefined {
  for (const d of block) {
    if (d.tokens[0] === name) return d;
    const inner = findDirective(d.block, name);
    if (inner !== undefined) return inner;
  }
  return undefined;
}
