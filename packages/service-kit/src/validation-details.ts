import type { z } from "zod";
import { clip, ECHO_LIMITS } from "./clip";

/** One entry of an error's `details`: the dotted path of the offending field and what is wrong with it. */
export interface ValidationDetail {
  path: string;
  message: string;
}

/**
 * zod issues as `details` entries, with dotted paths (`questions.q1.criteria`). `root` names the value as a
 * whole, for issues with an empty path. A bad record key only says "Invalid key in record"; the key
 * schema's own messages say why, so those are used instead.
 *
 * Bounded, since a path holds the request's own keys and a body can hold thousands of bad fields (a 1 MB
 * body of bad questions made a 5 MB answer): the first ECHO_LIMITS.details issues are listed, each path
 * clipped to ECHO_LIMITS.quote characters, and one more entry (at `root`) says how many were left out.
 */
export function validationDetails(error: z.ZodError, options: { root: string }): ValidationDetail[] {
  const listed = error.issues.slice(0, ECHO_LIMITS.details).map((issue) => ({
    path: issue.path.length === 0 ? options.root : clip(issue.path.map(String).join("."), ECHO_LIMITS.quote),
    message: issue.code === "invalid_key" ? issue.issues.map((i) => i.message).join("; ") : issue.message,
  }));
  const left = error.issues.length - listed.length;
  if (left > 0) {
    listed.push({
      path: options.root,
      message: `and ${left} more problems (the first ${ECHO_LIMITS.details} are listed)`,
    });
  }
  return listed;
}
