import type { ValidationIssue } from "@localdecider/contracts";

/**
 * Limits on the shape of a decision request, checked before schema validation: zod (and JSON.stringify,
 * which renders the state) recurse once per nesting level, so a body of a few thousand nested arrays
 * within the size limit would overflow the stack. JSON.parse itself does not recurse.
 */
export const INPUT_LIMITS = {
  /** Nesting levels anywhere in the body (the body itself is level 1). */
  maxDepth: 64,
  /** JSON values in the whole body: every object, array, string, number, boolean and null. */
  maxValues: 100_000,
} as const;

/** The first limit the body breaks, as a validation issue, or undefined. Iterative: it cannot overflow. */
export function inputLimitIssue(body: unknown): ValidationIssue | undefined {
  const stack: [unknown, number, string][] = [[body, 1, "body"]];
  let values = 0;
  while (stack.length > 0) {
    const [value, depth, path] = stack.pop() as [unknown, number, string];
    values += 1;
    if (values > INPUT_LIMITS.maxValues) {
      return { path: "body", message: `the body holds more than ${INPUT_LIMITS.maxValues} JSON values` };
    }
    if (typeof value !== "object" || value === null) continue;
    if (depth > INPUT_LIMITS.maxDepth) {
      return { path, message: `nested deeper than ${INPUT_LIMITS.maxDepth} levels` };
    }
    const entries = Array.isArray(value) ? value.entries() : Object.entries(value);
    for (const [key, child] of entries) {
      // Paths name the way down without building every one: only the first offender's is shown.
      stack.push([child, depth + 1, depth <= 4 ? `${path === "body" ? "" : `${path}.`}${String(key)}` : path]);
    }
  }
  return undefined;
}

/**
 * How many questions a body holds (its `questions` object's keys, System One; or its `questions` list's
 * entries, Decisions; 0 when it has none or they are neither, which the schema then refuses). Counted on the
 * raw body, before zod validates each of them.
 */
export function questionCount(body: unknown): number {
  if (typeof body !== "object" || body === null || !Object.hasOwn(body, "questions")) return 0;
  const questions = (body as { questions: unknown }).questions;
  if (Array.isArray(questions)) return questions.length;
  return typeof questions === "object" && questions !== null ? Object.keys(questions).length : 0;
}
