import { z } from "zod";

/** A configuration that does not validate; the message names every offending variable. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

export interface LoadConfigOptions {
  /**
   * What a number variable counts, for its error message (`LOCALDECIDER_TIMEOUT: "3m" is not a number (write
   * seconds as a bare number, no "m"): expected seconds, ...`). Variables ending in `_PORT` are ports, `_MS`
   * milliseconds, `_SECONDS` and `_TIMEOUT` seconds without being listed.
   */
  units?: Record<string, string>;
}

/**
 * Validates the environment against the service's one config schema. Empty strings count as unset so
 * that `FOO=` in an env file falls back to the documented default instead of failing a number parse. A
 * number that does not parse or is out of range is named with its value, its unit and its range
 * (numberProblem), not zod's bare `expected number, received NaN`.
 */
export function loadConfig<S extends z.ZodType>(
  schema: S,
  env: NodeJS.ProcessEnv = process.env,
  options: LoadConfigOptions = {},
): z.infer<S> {
  const cleaned: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (value !== undefined && value.trim() !== "") cleaned[key] = value;
  }
  const result = schema.safeParse(cleaned);
  if (!result.success) {
    const shape = shapeOf(schema);
    throw new ConfigError(
      result.error.issues.map((issue) => {
        const key = issue.path.length === 1 ? String(issue.path[0]) : undefined;
        const field = key === undefined ? undefined : shape[key];
        const value = key === undefined ? undefined : cleaned[key];
        const better =
          key === undefined || field === undefined || value === undefined
            ? undefined
            : numberProblem(issue, value, field, unitOf(key, options.units));
        return `${issue.path.join(".") || "(config)"}: ${better ?? issue.message}`;
      }),
    );
  }
  return result.data;
}

/** The object shape under a schema (through .superRefine and the like), or {} for a schema that has none. */
function shapeOf(schema: z.ZodType): Record<string, z.ZodType> {
  const shape = (schema as unknown as { shape?: Record<string, z.ZodType> }).shape;
  return shape ?? {};
}

/** The unit a variable counts: listed, or by the naming convention of its suffix. */
export function unitOf(key: string, units: Record<string, string> = {}): string | undefined {
  if (units[key] !== undefined) return units[key];
  if (key.endsWith("_PORT")) return "a TCP port";
  if (key.endsWith("_MS")) return "milliseconds";
  // The services' convention: timeouts are whole seconds (LOCALDECIDER_TIMEOUT), durations in ms say so.
  if (key.endsWith("_SECONDS") || key.endsWith("_TIMEOUT")) return "seconds";
  return undefined;
}

interface NumberSpec {
  int: boolean;
  min?: { value: number; inclusive: boolean };
  max?: { value: number; inclusive: boolean };
  fallback?: unknown;
}

/** A number schema's bounds and default, read through .default()/.optional() wrappers; undefined for a non-number. */
function numberSpec(field: z.ZodType): NumberSpec | undefined {
  let inner = field as unknown as { _zod: { def: Record<string, unknown> } };
  let fallback: unknown;
  for (let i = 0; i < 10 && inner._zod.def.innerType !== undefined; i++) {
    if (inner._zod.def.type === "default") fallback = inner._zod.def.defaultValue;
    inner = inner._zod.def.innerType as typeof inner;
  }
  if (inner._zod.def.type !== "number") return undefined;
  const spec: NumberSpec = { int: false, fallback };
  for (const check of (inner._zod.def.checks ?? []) as { _zod: { def: Record<string, unknown> } }[]) {
    const def = check._zod.def;
    if (def.check === "number_format" && String(def.format).includes("int")) spec.int = true;
    if (def.check === "greater_than") spec.min = { value: Number(def.value), inclusive: def.inclusive === true };
    if (def.check === "less_than") spec.max = { value: Number(def.value), inclusive: def.inclusive === true };
  }
  return spec;
}

/** `0-65535`, `more than 0 and at most 86400`, `at least 1`; empty without bounds. */
function rangeText(spec: NumberSpec): string {
  const { min, max } = spec;
  if (spec.int && min?.inclusive && max?.inclusive) return `${min.value}-${max.value}`;
  const parts = [
    min === undefined ? undefined : `${min.inclusive ? "at least" : "more than"} ${min.value}`,
    max === undefined ? undefined : `${max.inclusive ? "at most" : "less than"} ${max.value}`,
  ].filter((p) => p !== undefined);
  return parts.join(" and ");
}

/**
 * The message for a number variable whose value zod refused (not a number, not whole, out of range): the
 * value as given, what was expected (the unit, whole or not, the range) and the default. Undefined for any
 * other problem, which keeps zod's or the schema's own message.
 */
export function numberProblem(
  issue: z.core.$ZodIssue,
  value: string,
  field: z.ZodType,
  unit: string | undefined,
): string | undefined {
  const spec = numberSpec(field);
  if (spec === undefined) return undefined;
  const range = rangeText(spec);
  const expected = [
    unit === undefined ? undefined : unit,
    `${spec.int ? "a whole number" : "a number"}${range === "" ? "" : ` ${range}`}`,
  ]
    .filter((p) => p !== undefined)
    .join(", ");
  const fallback = spec.fallback === undefined ? "" : ` (default ${String(spec.fallback)})`;
  const shown = JSON.stringify(value);
  if (issue.code === "invalid_type" && issue.expected === "number") {
    // "3m", "10s", "2 min": a unit written after the number, which the variable does not take.
    const suffix = /^\s*-?\d+(?:\.\d+)?\s*([a-z]+)\s*$/i.exec(value)?.[1];
    const hint = suffix === undefined ? "" : ` (write ${unit ?? "it"} as a bare number, no "${suffix}")`;
    return `${shown} is not a number${hint}: expected ${expected}${fallback}`;
  }
  if (issue.code === "invalid_type" && issue.expected === "int") {
    return `${shown} is not a whole number: expected ${expected}${fallback}`;
  }
  if (issue.code === "too_small" || issue.code === "too_big") {
    return `${shown} is out of range: expected ${expected}${fallback}`;
  }
  return undefined;
}

const UNITS: Record<string, number> = {
  b: 1,
  k: 1024,
  kb: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
};

/**
 * A size in bytes as people write it: `512kb`, `2MB`, `2m`, `1.5 mb` (units are powers of 1024, any case),
 * or a plain number of bytes. Anything else, and anything below `min` bytes, is refused with a message that
 * says what was understood, so that `2m` can never silently mean 2 bytes.
 */
export function byteSize(options: { min: number; fallback: string }) {
  return z
    .string()
    .default(options.fallback)
    .transform((text, ctx) => {
      const match = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
      const factor = match === null ? undefined : UNITS[(match[2] ?? "").toLowerCase() || "b"];
      if (match === null || factor === undefined) {
        ctx.addIssue({ code: "custom", message: `not a size: write it like 512kb, 2mb or 1gb (got "${text}")` });
        return z.NEVER;
      }
      const bytes = Math.floor(Number(match[1]) * factor);
      if (bytes < options.min) {
        ctx.addIssue({
          code: "custom",
          message: `"${text}" is ${bytes} bytes; at least ${options.min} bytes are needed (write units: 512kb, 2mb)`,
        });
        return z.NEVER;
      }
      return bytes;
    });
}

/** Variables of the repository's test tooling, which share the services' prefixes and are never config. */
const TOOLING_VARIABLE = /^(LOCALDECIDER|TODOS)_TEST_|^LOCALDECIDER_STATIC_CHECKS$/;

/** Edit distance with transpositions (`PROT` -> `PORT` is one edit), for suggesting a known name. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) (d[0] as number[])[j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i] as number[];
      const prev = d[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min((prev[j] as number) + 1, (row[j - 1] as number) + 1, (prev[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        row[j] = Math.min(row[j] as number, ((d[i - 2] as number[])[j - 2] as number) + 1);
      }
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}

export interface UnknownVariable {
  variable: string;
  /** The known name closest to it, when one is close (a third of its length in edits, at most). */
  closest?: string;
}

/**
 * The variables in `env` that start with one of the service's prefixes but are no variable of its config
 * schema (`LOCALDECIDER_PROT`), each with the closest known name. The service warns about them at start: a
 * misspelt variable would otherwise be ignored without a word, the default silently taking its place.
 */
export function unknownVariables(
  schema: z.ZodType,
  prefixes: string[],
  env: NodeJS.ProcessEnv = process.env,
): UnknownVariable[] {
  const known = Object.keys(shapeOf(schema));
  return Object.keys(env)
    .filter((name) => prefixes.some((p) => name.startsWith(p)) && !known.includes(name) && !TOOLING_VARIABLE.test(name))
    .sort()
    .map((variable) => {
      const ranked = known
        .map((name) => ({ name, distance: editDistance(variable, name) }))
        .sort((a, b) => a.distance - b.distance);
      const best = ranked[0];
      return best !== undefined && best.distance <= Math.max(2, Math.floor(variable.length / 3))
        ? { variable, closest: best.name }
        : { variable };
    });
}

/** One warning line per unknown variable (unknownVariables), for the logger the service has just made. */
export function warnUnknownVariables(
  logger: { warn: (message: string, meta: object) => unknown },
  schema: z.ZodType,
  prefixes: string[],
  env: NodeJS.ProcessEnv = process.env,
): void {
  for (const { variable, closest } of unknownVariables(schema, prefixes, env)) {
    logger.warn(
      closest === undefined
        ? `${variable} is not a variable of this service: ignored`
        : `${variable} is not a variable of this service: ignored (did you mean ${closest}?)`,
      { variable, ...(closest === undefined ? {} : { closest }) },
    );
  }
}
