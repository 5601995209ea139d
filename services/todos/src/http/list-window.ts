import {
  LIST_CURSOR,
  PAGE_LIMIT_MAX,
  PAGE_MAX,
  TODO_MESSAGES,
  type TodoItem,
  type TodoListQuery,
} from "@localdecider/contracts/todos";
import { AppError } from "@localdecider/service-kit";
import { DEFAULT_LIST_MAX_ITEMS } from "../config";
import type { ListPosition, Page } from "../storage/repository";

/**
 * How much one list answer holds when the client does not page it itself (no `limit`/`page`): at most
 * `maxItems` items (TODOS_LIST_MAX_ITEMS) and at most `maxBytes` bytes of items as JSON
 * (TODOS_LIST_MAX_BYTES). The rest is one `Link: <…>; rel="next"` away. Before, an unpaged list answered
 * every item at once: 10,000 items of 500 control characters were 31.5 MB, and 60 of them took 1 GB.
 */
export interface ListLimits {
  maxItems: number;
  maxBytes: number;
}

export const DEFAULT_LIST_LIMITS: ListLimits = { maxItems: DEFAULT_LIST_MAX_ITEMS, maxBytes: 1024 * 1024 };

/** Cursor times a timestamp column can hold (years 1 to 9999): anything else is refused, not sent to SQL. */
const CURSOR_TIME = { min: Date.UTC(1, 0, 1) - 365 * 86_400_000, max: Date.UTC(9999, 11, 31, 23, 59, 59, 999) };

/** The cursor of an item: the list continues after it. Its form is LIST_CURSOR (contracts). */
export function cursorOf(item: Pick<TodoItem, "id" | "createdAt">): string {
  return `${Date.parse(item.createdAt)}_${item.id}`;
}

/** A cursor the contract's pattern accepted, as a list position; 400 when its time is out of range. */
function positionOf(cursor: string): ListPosition {
  const match = LIST_CURSOR.exec(cursor);
  const ms = Number(match?.[1]);
  if (match === null || !(ms >= CURSOR_TIME.min && ms <= CURSOR_TIME.max)) {
    throw new AppError(400, TODO_MESSAGES.invalidQuery, {
      details: [{ path: "after", message: 'must be a cursor copied from a Link: <…>; rel="next" header' }],
    });
  }
  return { createdAt: new Date(ms), id: match[2] as string };
}

/**
 * What to ask storage for: the window the query names, one item longer, so that the answer knows whether
 * more follow. `limit`/`page` (offset pages, as before), `after` (a cursor, with `limit` or the default
 * window), or neither (the default window from the start).
 */
export function pageOf(query: TodoListQuery, limits: ListLimits): Page {
  const { limit, page, after } = query;
  if (after !== undefined) return { limit: (limit ?? limits.maxItems) + 1, after: positionOf(after) };
  if (limit === undefined && page === undefined) return { limit: limits.maxItems + 1, offset: 0 };
  const size = limit ?? PAGE_LIMIT_MAX;
  return { limit: size + 1, offset: ((page ?? 1) - 1) * size };
}

/** An upper bound of `item`'s bytes as JSON: 6 per UTF-16 unit of the title (`\u0001`), 200 for the rest. */
function boundOf(item: TodoItem): number {
  return 200 + 6 * item.title.length;
}

/** How many of `items` fit `maxBytes` of JSON (at least one: a single item always fits an answer). */
function fitting(items: TodoItem[], maxBytes: number): number {
  let bound = 0;
  for (const item of items) bound += boundOf(item);
  // Nearly every list is far under the budget: its bound says so without serialising anything twice.
  if (bound <= maxBytes) return items.length;
  let bytes = 0;
  for (let i = 0; i < items.length; i++) {
    bytes += Buffer.byteLength(JSON.stringify(items[i])) + 1;
    if (bytes > maxBytes) return Math.max(i, 1);
  }
  return items.length;
}

/**
 * The answer to a list query, from what storage returned for pageOf(query): the items, and the URL of the
 * rest (for `Link: <url>; rel="next"`) when the window stopped before the end of the list. `path` is the
 * route's own path for this user (the legacy route links to itself).
 */
export function listAnswer(
  fetched: TodoItem[],
  query: TodoListQuery,
  limits: ListLimits,
  path: string,
): { items: TodoItem[]; next?: string } {
  const explicitPages = query.after === undefined && (query.limit !== undefined || query.page !== undefined);
  const size = explicitPages ? (query.limit ?? PAGE_LIMIT_MAX) : (query.limit ?? limits.maxItems);
  let items = fetched.slice(0, size);
  let more = fetched.length > size;
  const fit = fitting(items, limits.maxBytes);
  if (fit < items.length) {
    items = items.slice(0, fit);
    more = true;
  }
  if (!more || items.length === 0) return { items };
  const last = items[items.length - 1] as TodoItem;
  if (explicitPages && fit === size) {
    // A whole page: the next page by number, as the client counts them.
    const next = (query.page ?? 1) + 1;
    if (next > PAGE_MAX) return { items };
    return { items, next: `${path}?limit=${size}&page=${next}` };
  }
  const limit = query.limit === undefined ? "" : `&limit=${query.limit}`;
  return { items, next: `${path}?after=${cursorOf(last)}${limit}` };
}
