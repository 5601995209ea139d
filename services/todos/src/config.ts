import { LOG_LEVELS } from "@localdecider/service-kit";
import { z } from "zod";

/**
 * The service's whole configuration, read from the environment at boot. Keys are the variable names, and
 * each carries its documented default, so the README's config table is exactly this list.
 */
export const configSchema = z.object({
  /** Interface to listen on. */
  TODOS_HOST: z.string().default("127.0.0.1"),
  /** TCP port to listen on (0 picks a free one). */
  TODOS_PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  /** PostgreSQL connection string; when unset the embedded PGlite database in TODOS_DATA_DIR is used. */
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, { error: "must be a postgres:// or postgresql:// URL" })
    .optional(),
  /** Directory of the embedded PGlite database, relative to the working directory unless absolute. */
  TODOS_DATA_DIR: z.string().default("./data/todos"),
  /** winston level; "silent" turns logging off. */
  LOG_LEVEL: z.enum(LOG_LEVELS).default("info"),
});

export type Config = z.infer<typeof configSchema>;
