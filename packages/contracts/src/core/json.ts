import { z } from "zod";

/** Any JSON value. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/**
 * Any JSON value, accepted exactly as `z.json()` accepts it, but as one named schema: its recursion refers
 * to itself by the id, so an OpenAPI document holds it once as the component `JsonValue` (each `z.json()`
 * is a fresh unnamed recursive schema, which generators emit once per use under made-up names).
 */
export const JsonValue: z.ZodType<JsonValue> = z
  .lazy(() =>
    z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(JsonValue), z.record(z.string(), JsonValue)]),
  )
  .meta({ id: "JsonValue" });
