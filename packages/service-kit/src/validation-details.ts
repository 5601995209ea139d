import type { z } from "zod";

/** One entry of an error's `details`: the dotted path of the offending field and what is wrong with it. */
export interface ValidationDetail {
  path: string;
  message: string;
}

/**
 * zod issues as `details` entries, with dotted paths (`questions.q1.criteria`). `root` names the value as a
 * whole, for issues with an empty path. A bad record key only says "Invalid key in record"; the key
 * schema's own messages say why, so those are used instead.
 */
export function validationDetails(error: z.ZodError, options: { root: string }): ValidationDetail[] {
  return error.issues.map((issue) => ({
    path: issue.path.length === 0 ? options.root : issue.path.map(String).join("."),
    message: issue.code === "invalid_key" ? issue.issues.map((i) => i.message).join("; ") : issue.message,
  }));
}
