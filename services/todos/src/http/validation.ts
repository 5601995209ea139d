import { TODO_MESSAGES } from "@localdecider/contracts/todos";
import { AppError, type RequestPart, validationDetails } from "@localdecider/service-kit";
import type { z } from "zod";

/**
 * The todos' answer to a request part that fails its contract schema (registerRoutes checks params, then
 * query, then body):
 * - a bad `:userId` is 400 "Invalid userId" with its problems; a malformed `:itemId` cannot name an item,
 *   so it is the 404 of a missing one, decided without asking the database;
 * - a bad `limit`/`page`/`after` is 400 "Invalid query parameters" with details;
 * - the seed's rule for bodies: absent, null or not a plain object is `{ error: "Invalid request body" }`
 *   exactly; field problems add `details`.
 */
export function invalidTodosRequest(part: RequestPart, error: z.ZodError, value: unknown): AppError {
  if (part === "params") {
    const userIssues = error.issues.filter((issue) => issue.path[0] === "userId");
    if (userIssues.length === 0) return new AppError(404, TODO_MESSAGES.notFound);
    return new AppError(400, TODO_MESSAGES.invalidUserId, {
      details: userIssues.map((issue) => ({ path: "userId", message: issue.message })),
    });
  }
  if (part === "query") {
    return new AppError(400, TODO_MESSAGES.invalidQuery, { details: validationDetails(error, { root: "" }) });
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return new AppError(400, TODO_MESSAGES.invalidBody);
  }
  return new AppError(400, TODO_MESSAGES.invalidBody, { details: validationDetails(error, { root: "" }) });
}
