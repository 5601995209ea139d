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
import type { ListedTodo, ListPosition, Page } from "../storage/repository";

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
/** The largest item number (Postgres bigint): a larger cursor is refused, not sent to SQL. */
const SEQ_MAX = 9_223_372_036_854_775_807n;

/** The cursor of an item: the list continues after it. Its form is LIST_CURSOR (contracts): its number. */
export function cursorOf(item: Pick<ListedTodo, "seq">): string {
  return item.seq;
}

function badCursor(): AppError {
  return new AppError(400, TODO_MESSAGES.invalidQuery, {
    details: [
      { path: "after", message: "must be a cursor copied from a list answer (its Link or List-Cursor header)" },
    ],
  });
}

/**
 * A cursor the contract's pattern accepted, as a list position; 400 when out of range. The old form
 * (`<ms>_<id>`, handed out before the list was ordered by commit) still names its place in the list.
 */
function positionOf(cursor: string): ListPosition {
  const match = LIST_CURSOR.exec(cursor);
  if (match === null) throw badCursor();
  const [, seq, time, id] = match;
  if (seq !== undefined) {
    if (BigInt(seq) > SEQ_MAX) throw badCursor();
    return { seq };
  }
  const ms = Number(time);
  if (!(ms >= CURSOR_TIME.min && ms <= CURSOR_TIME.max)) throw badCursor();
  return { createdAt: new Date(ms), id: id as string };
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

/** A listed item as the API shows it: its place in the order (seq) stays out; its cursor carries it. */
function itemOf(listed: ListedTodo): TodoItem {
  return {
    id: listed.id,
    title: listed.title,
    completed: listed.completed,
    createdAt: listed.createdAt,
    updatedAt: listed.updatedAt,
  };
}

/** An upper bound of `item`'s bytes as JSON: 6 per UTF-16 unit of the title (`\u0001`), 200 for the rest. */
function boundOf(item: { title: string }): number {
  return 200 + 6 * item.title.length;
}

/** How many of `records` fit `maxBytes` of JSON as items (at least one: a single item always fits an answer). */
function fitting(records: ListedTodo[], maxBytes: number): number {
  let bound = 0;
  for (const record of records) bound += boundOf(record);
  // Nearly every list is far under the budget: its bound says so without serialising anything twice.
  if (bound <= maxBytes) return records.length;
  let bytes = 0;
  for (let i = 0; i < records.length; i++) {
    bytes += Buffer.byteLength(JSON.stringify(itemOf(records[i] as ListedTodo))) + 1;
    if (bytes > maxBytes) return Math.max(i, 1);
  }
  return records.length;
}

/** A list answer: its items, the URL of the rest when there is more, and the cursor to continue from later. */
export interface ListAnswer {
  items: TodoItem[];
  /** For `Link: <next>; rel="next"`: only when the answer stopped before the end of the list. */
  next?: string;
  /** For `List-Cursor`: after the last item answered, the last page's included (see contracts' LIST_LINK). */
  cursor?: string;
}

/**
 * The answer to a list query, from what storage returned for pageOf(query): the items, the URL of the rest
 * (for `Link: <url>; rel="next"`) when the window stopped before the end of the list, and the cursor after
 * its last item (for `List-Cursor`). `path` is the route's own path for this user (the legacy route links to
 * itself). Without items the cursor is the one asked `after` (nothing was passed), or `0` for the unpaged
 * first window (the list is empty: everything is after 0); an empty offset page has none (past the end,
 * its place is unknown).
 */
export function listAnswer(fetched: ListedTodo[], query: TodoListQuery, limits: ListLimits, path: string): ListAnswer {
  const explicitPages = query.after === undefined && (query.limit !== undefined || query.page !== undefined);
  const size = explicitPages ? (query.limit ?? PAGE_LIMIT_MAX) : (query.limit ?? limits.maxItems);
  let kept = fetched.length > size ? fetched.slice(0, size) : fetched;
  let more = fetched.length > size;
  const fit = fitting(kept, limits.maxBytes);
  if (fit < kept.length) {
    kept = kept.slice(0, fit);
    more = true;
  }
  const items = kept.map(itemOf);
  const last = kept[kept.length - 1];
  if (last === undefined) {
    if (query.after !== undefined) return { items, cursor: query.after };
    return explicitPages ? { items } : { items, cursor: "0" };
  }
  const cursor = cursorOf(last);
  if (!more) return { items, cursor };
  if (explicitPages && fit === size) {
    // A whole page: the next page by number, as the client counts them.
    const next = (query.page ?? 1) + 1;
    if (next > PAGE_MAX) return { items, cursor };
    return { items, cursor, next: `${path}?limit=${size}&page=${next}` };
  }
  const limit = query.limit === undefined ? "" : `&limit=${query.limit}`;
  return { items, cursor, next: `${path}?after=${cursor}${limit}` };
}
