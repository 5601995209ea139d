import { ItemId, PAGE_LIMIT_MAX, TODO_MESSAGES, TodoListQuery, UserId } from "@localdecider/contracts";
import { AppError, validationDetails } from "@localdecider/service-kit";
import type { z } from "zod";
import type { Page } from "../storage/repository";

export function parseUserId(raw: unknown): string {
  const result = UserId.safeParse(raw);
  if (!result.success) {
    throw new AppError(400, TODO_MESSAGES.invalidUserId, {
      details: result.error.issues.map((issue) => ({ path: "userId", message: issue.message })),
    });
  }
  return result.data;
}

/** A malformed item id cannot name an item: 404, decided without asking the database. */
export function parseItemId(raw: unknown): string {
  const result = ItemId.safeParse(raw);
  if (!result.success) throw new AppError(404, TODO_MESSAGES.notFound);
  return result.data.toLowerCase();
}

/**
 * The seed's rule first: a body that is absent, null or not a plain object is `{ error: "Invalid request
 * body" }` exactly; then the field rules, whose failures add `details`.
 */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new AppError(400, TODO_MESSAGES.invalidBody);
  }
  const result = schema.safeParse(body);
  if (!result.success)
    throw new AppError(400, TODO_MESSAGES.invalidBody, { details: validationDetails(result.error, { root: "" }) });
  return result.data;
}

/** The page asked for, or undefined for the whole list. */
export function parsePage(query: unknown): Page | undefined {
  const result = TodoListQuery.safeParse(query ?? {});
  if (!result.success)
    throw new AppError(400, TODO_MESSAGES.invalidQuery, { details: validationDetails(result.error, { root: "" }) });
  const { limit, page } = result.data;
  if (limit === undefined && page === undefined) return undefined;
  const size = limit ?? PAGE_LIMIT_MAX;
  return { limit: size, offset: ((page ?? 1) - 1) * size };
}
