import { z } from "zod";

/**
 * The one error body both services answer with. `code` is a stable machine-readable name; the todos
 * service omits it where its seed fixes the body to `{ error }` exactly.
 */
export const ErrorBody = z.object({
  error: z.string(),
  code: z.string().optional(),
  details: z.array(z.unknown()).optional(),
});
export type ErrorBody = z.infer<typeof ErrorBody>;

/** One entry of `details` for a rejected field: where it is and what is wrong with it. */
export const ValidationIssue = z.object({
  path: z.string(),
  message: z.string(),
});
export type ValidationIssue = z.infer<typeof ValidationIssue>;
