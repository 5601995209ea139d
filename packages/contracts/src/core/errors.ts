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

/**
 * The status both services answer a request with when its `Host` is not a name they serve (their Host check,
 * against DNS rebinding): 421 Misdirected Request, "not a server that answers for this authority". The
 * decider's body carries `code: "host_not_allowed"`; the todos body is `{ error }` like every todos error.
 */
export const HOST_NOT_ALLOWED_STATUS = 421;
