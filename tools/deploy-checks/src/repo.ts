import { readFileSync } from "node:fs";
import path from "node:path";
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
}

export interface ComposeFile {
  name?: string;
  services: Record<string, ComposeService>;
  volumes?: Record<string, unknown>;
}

export function loadCompose(...parts: string[]): ComposeFile {
  return parse(readRepoFile(...parts)) as ComposeFile;
}

/** The compose files of the stack: the main one and the alternative model servers layered over it. */
export const COMPOSE_FILES = ["docker-compose.yml", "docker/compose.ollama.yml", "docker/compose.vllm.yml"];

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
  // Loaded at run time from dist/ (built by `pnpm build` before the tests), not imported from source, so
  // this package checks exactly what ships.
  const todos = require("@localdecider/todos/dist/config") as { configSchema: z.ZodObject };
  const decider = require("@localdecider/decider/dist/config") as { configSchema: z.ZodObject };
  return { todos: todos.configSchema, decider: decider.configSchema };
}

/** A schema field's default as it would appear in an env file (`""` when the variable is optional). */
export function envDefault(schema: z.ZodObject, key: string): string {
  const field = schema.shape[key] as z.ZodType;
  const result = field.safeParse(undefined);
  if (!result.success) throw new Error(`${key} has no default and is required`);
  return result.data === undefined ? "" : String(result.data);
}
