import { z } from "zod";

/** A configuration that does not validate; the message names every offending variable. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

/**
 * Validates the environment against the service's one config schema. Empty strings count as unset so
 * that `FOO=` in an env file falls back to the documented default instead of failing a number parse.
 */
export function loadConfig<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv = process.env): z.infer<S> {
  const cleaned: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (value !== undefined && value.trim() !== "") cleaned[key] = value;
  }
  const result = schema.safeParse(cleaned);
  if (!result.success) {
    throw new ConfigError(
      result.error.issues.map((issue) => `${issue.path.join(".") || "(config)"}: ${issue.message}`),
    );
  }
  return result.data;
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
