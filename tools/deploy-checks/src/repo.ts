import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { parse } from "yaml";
import type { z } from "zod";

/** The repository root (this package lives in tools/deploy-checks). */
export const REPO_ROOT = path.resolve(__dirname, "..", "..", "..");

export function repoPath(...parts: string[]): string {
  return path.join(REPO_ROOT, ...parts);
}

export function readRepoFile(...parts: string[]): string {
  return readFileSync(repoPath(...parts), "utf8");
}

/** A compose file as parsed YAML; only the parts the checks read are typed. */
export interface ComposeService {
  image?: string;
  build?: { context?: string; dockerfile?: string };
  command?: string[];
  environment?: Record<string, string | number | null>;
  ports?: string[];
  volumes?: string[];
  depends_on?: Record<string, { condition?: string }>;
  healthcheck?: { test?: string[] | string; start_period?: string };
  cap_add?: string[];
  cap_drop?: string[];
  read_only?: boolean;
  security_opt?: string[];
  stop_grace_period?: string;
  tmpfs?: string[];
  user?: string;
  deploy?: { replicas?: number };
  configs?: { source: string; target: string }[];
  entrypoint?: string[];
  restart?: string;
}

/**
 * A one-shot service (compose's db-setup): it runs once per `up`, exits, and is never restarted; others wait
 * for it with `condition: service_completed_successfully`. It has no healthcheck: it is never up for long.
 */
export function isOneShot(service: ComposeService): boolean {
  return service.restart === "no";
}

export interface ComposeFile {
  name?: string;
  services: Record<string, ComposeService>;
  volumes?: Record<string, unknown>;
  configs?: Record<string, { file?: string }>;
}

/**
 * Compose's `!reset` tag (Compose 2.24+): in an override, the attribute is removed instead of merged with
 * the main file's. Parsed as this marker, which mergeCompose acts on.
 */
export const RESET = Symbol("!reset");
const COMPOSE_TAGS = (["seq", "map", undefined] as const).map((collection) => ({
  tag: "!reset",
  ...(collection === undefined ? {} : { collection }),
  resolve: () => RESET,
}));

export function loadCompose(...parts: string[]): ComposeFile {
  return parse(readRepoFile(...parts), { customTags: COMPOSE_TAGS }) as ComposeFile;
}

/**
 * The compose files of the stack: the main one, then the overrides layered over it: the alternative model
 * servers, and the scaled-out stack (replicas behind a proxy).
 */
export const COMPOSE_FILES = [
  "docker-compose.yml",
  "docker/compose.ollama.yml",
  "docker/compose.vllm.yml",
  "docker/compose.llama-decision.yml",
  "docker/compose.scale.yml",
];

/**
 * `docker compose -f a.yml -f b.yml`, for the keys these checks read: a key of b replaces a's, except
 * sequences, which Compose merges (kept once each: cap_add, cap_drop, security_opt, tmpfs, volumes, ...),
 * and mappings (environment, depends_on), merged key by key; `!reset` removes the key.
 */
export function mergeCompose(base: ComposeFile, override: ComposeFile): ComposeFile {
  const services: Record<string, ComposeService> = { ...base.services };
  for (const [name, over] of Object.entries(override.services)) {
    const merged: Record<string, unknown> = { ...(services[name] ?? {}) };
    for (const [key, value] of Object.entries(over)) {
      const current = merged[key];
      if (value === RESET) {
        delete merged[key];
      } else if (Array.isArray(current) && Array.isArray(value) && key !== "command") {
        merged[key] = [...new Set([...current, ...value])];
      } else if (isPlainObject(current) && isPlainObject(value) && key !== "healthcheck") {
        merged[key] = { ...current, ...value };
      } else {
        merged[key] = value;
      }
    }
    services[name] = merged as ComposeService;
  }
  return {
    ...base,
    ...override,
    services,
    volumes: { ...base.volumes, ...override.volumes },
    configs: { ...base.configs, ...override.configs },
  };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A Compose duration (`190s`, `1m30s`, `20m`, `1h`) in seconds. */
export function durationSeconds(text: string): number {
  const units: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 0.001 };
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text) throw new Error(`not a duration: ${text}`);
  return parts.reduce((sum, p) => sum + Number(p[1]) * (units[p[2] as string] as number), 0);
}

export interface Interpolation {
  name: string;
  /** The `:-default` part (`""` for `${NAME:-}`), undefined when there is none. */
  fallback: string | undefined;
  /** `${NAME:?message}`: compose refuses to start without the variable. */
  required: boolean;
}

/** A compose file's text without its comment lines, which compose does not interpolate. */
export function composeText(file: string): string {
  return readRepoFile(file)
    .split("\n")
    .filter((line) => !/^\s*#/.test(line))
    .join("\n");
}

/** Names that hold credentials: never given a value in a committed file. */
export const SECRET_NAME = /PASSWORD|API_KEY|(^|_)TOKEN$|SECRET/;

/** Every `${NAME...}` in a compose file's text (`$${...}` is an escaped literal and skipped). */
export function interpolations(text: string): Interpolation[] {
  const found: Interpolation[] = [];
  for (const m of text.matchAll(/(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*)|(:?\?)([^}]*))?\}/g)) {
    found.push({ name: m[1] as string, fallback: m[2] === undefined ? undefined : (m[3] ?? ""), required: !!m[4] });
  }
  return found;
}

/**
 * A value of a compose file as Compose fills it in from `env` (.env and the shell): `$$` is a literal `$`;
 * `${NAME}` and `$NAME`; `${NAME:-default}` (unset or empty) and `${NAME-default}` (unset); `${NAME:?message}`
 * and `${NAME?message}` throw compose's refusal with the message when NAME is unset (or empty, with `:`).
 */
export function interpolate(value: string, env: Record<string, string | undefined>): string {
  const pattern = /\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))/g;
  return value.replace(pattern, (_match, dollar, braced, colon, op, text, bare) => {
    if (dollar !== undefined) return "$";
    const name = (braced ?? bare) as string;
    const set = env[name];
    const missing = set === undefined || (colon === ":" && set === "");
    if (op === "-") return missing ? text : (set as string);
    if (op === "?" && missing) throw new Error(`required variable ${name} is missing a value: ${text}`);
    return set ?? "";
  });
}

/** One variable of .env.example: `NAME=value`, or `# NAME=value` for one compose sets itself. */
export interface EnvExampleEntry {
  name: string;
  value: string;
  /** Written as a comment: compose fixes the value for the containers, so .env cannot change it. */
  setByCompose: boolean;
  /** The comment lines right above it. */
  description: string;
}

export function parseEnvExample(text: string): EnvExampleEntry[] {
  const entries: EnvExampleEntry[] = [];
  let block: string[] = [];
  let previous: EnvExampleEntry | undefined;
  for (const line of text.split("\n")) {
    const m = /^(# )?([A-Z][A-Z0-9_]*)=(.*)$/.exec(line);
    if (m) {
      // Consecutive variables share the comment above the first (POSTGRES_USER, POSTGRES_PASSWORD, ...).
      const description = block.length > 0 ? block.join(" ").trim() : (previous?.description ?? "");
      previous = { name: m[2] as string, value: m[3] as string, setByCompose: m[1] !== undefined, description };
      entries.push(previous);
      block = [];
    } else if (line.startsWith("#")) {
      block.push(line.replace(/^#\s?/, ""));
      previous = undefined;
    } else {
      block = [];
      previous = undefined;
    }
  }
  return entries;
}

/** The services' config schemas, from their built output: the one list of variables each service reads. */
export function serviceSchemas(): Record<"todos" | "decider", z.ZodObject> {
  // Loaded at run time through each package's `./config` export (its dist/, which `pnpm test` builds when
  // stale), not imported from source, so this package checks exactly what ships.
  const todos = require("@localdecider/todos/config") as { configSchema: z.ZodObject };
  const decider = require("@localdecider/decider/config") as { configSchema: z.ZodObject };
  return { todos: todos.configSchema, decider: decider.configSchema };
}

/**
 * Whether an env file's value for a variable means the service's default: it parses to what the default
 * parses to (`1mb` and `1048576` alike), and an optional variable is left empty.
 */
export function meansDefault(schema: z.ZodObject, key: string, text: string): boolean {
  const field = schema.shape[key] as z.ZodType;
  const given = field.safeParse(text === "" ? undefined : text);
  const fallback = field.safeParse(undefined);
  return given.success && fallback.success && isDeepStrictEqual(given.data, fallback.data);
}

/** A schema field's default as it would appear in an env file (`""` when the variable is optional). */
export function envDefault(schema: z.ZodObject, key: string): string {
  const field = schema.shape[key] as z.ZodType;
  const result = field.safeParse(undefined);
  if (!result.success) throw new Error(`${key} has no default and is required`);
  return result.data === undefined ? "" : String(result.data);
}

/** One line of .dockerignore: a pattern relative to the build context root, `!` to take a match back. */
export interface DockerignoreEntry {
  pattern: string;
  exclude: boolean;
}

export function parseDockerignore(text: string): DockerignoreEntry[] {
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"))
    .map((line) => ({ pattern: line.replace(/^!/, ""), exclude: !line.startsWith("!") }));
}

// A .dockerignore pattern as Docker reads it (moby/patternmatcher): relative to the context root whatever
// its leading `/`; `*` and `?` stay within one path segment; `**` spans any number of segments. So `*.log`
// matches `a.log` at the root only, and `**/*.log` matches it at any depth.
// (Line comments: the patterns hold the characters that would end a block comment.)
export function dockerignoreRegExp(pattern: string): RegExp {
  const clean = path.posix
    .normalize(pattern)
    .replace(/^(\.\/|\/)+/, "")
    .replace(/\/+$/, "");
  let source = "";
  for (let i = 0; i < clean.length; i++) {
    const c = clean[i] as string;
    if (c === "*" && clean[i + 1] === "*") {
      i++;
      if (clean[i + 1] === "/") {
        i++;
        source += "(?:.*/)?";
      } else {
        source += ".*";
      }
    } else if (c === "*") source += "[^/]*";
    else if (c === "?") source += "[^/]";
    else source += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${source}$`);
}

/**
 * Every file and directory under the repository root, as root-relative POSIX paths; node_modules and .git
 * are listed but not descended into.
 */
export function repoTree(): string[] {
  const found: string[] = [];
  const walk = (relative: string) => {
    for (const entry of readdirSync(path.join(REPO_ROOT, relative), { withFileTypes: true })) {
      const child = relative === "" ? entry.name : `${relative}/${entry.name}`;
      found.push(child);
      if (entry.isDirectory() && entry.name !== "node_modules" && entry.name !== ".git") walk(child);
    }
  };
  walk("");
  return found;
}
