import { z } from "zod";

/**
 * The todos API contract (issue 2). The seed fixes the field names, the success bodies and the messages;
 * everything it left open (limits, paging, 404s) is decided here and documented in services/todos/README.md.
 */

export const TODO_MESSAGES = {
  invalidBody: "Invalid request body",
  invalidUserId: "Invalid userId",
  invalidQuery: "Invalid query parameters",
  invalidPath: "Invalid path parameter",
  notFound: "Todo item not found",
  listFull: "Todo list is full",
  routeNotFound: "Not found",
  deleted: "Todo item deleted successfully",
  tooLarge: "Request body too large",
  unsupportedEncoding: "Unsupported request body encoding",
  aborted: "Request body was not fully received",
  internal: "Internal server error",
  hostNotAllowed: "Host not allowed: this service answers only for the names in TODOS_ALLOWED_HOSTS",
} as const;

export const TITLE_MAX_LENGTH = 500;
export const USER_ID_MAX_LENGTH = 128;
export const PAGE_LIMIT_MAX = 100;
/**
 * Highest page number: keeps the row offset (page - 1) * limit well inside a 32-bit integer (a list holds at
 * most TODOS_MAX_ITEMS_PER_USER items, 1,000,000 at the very most, so no page past 10,000 holds any).
 */
export const PAGE_MAX = 1_000_000;

// Lengths are counted in Unicode code points, as Postgres counts VARCHAR(n), not in UTF-16 units.
const codePoints = (s: string) => [...s].length;
// Postgres text cannot hold NUL, and a lone surrogate cannot be encoded as UTF-8 (it would be stored as
// U+FFFD, a different string from the one sent), so both are rejected up front instead of failing later.
const storable = (s: string) =>
  !s.includes("\u0000") && !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);

/** `:userId`: 1–128 code points of storable text. */
export const UserId = z
  .string()
  .refine((s) => codePoints(s) >= 1 && codePoints(s) <= USER_ID_MAX_LENGTH, {
    error: `must be 1-${USER_ID_MAX_LENGTH} characters`,
  })
  .refine(storable, { error: "must not contain NUL or unpaired surrogate characters" });

/** `:itemId`: the server generates UUIDs, so anything else cannot name an item. */
export const ItemId = z.string().regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);

/** Path parameters of the per-user routes. */
export const UserParams = z.object({ userId: UserId });
export const ItemParams = z.object({ userId: UserId, itemId: ItemId });

const Title = z
  .string({ error: (issue) => (issue.input === undefined ? "is required" : "must be a string") })
  .trim()
  .refine((s) => codePoints(s) >= 1, { error: "must not be empty" })
  .refine((s) => codePoints(s) <= TITLE_MAX_LENGTH, { error: `must be at most ${TITLE_MAX_LENGTH} characters` })
  .refine(storable, { error: "must not contain NUL or unpaired surrogate characters" });
const Completed = z.boolean({ error: "must be a boolean" });

/** POST body. Unknown fields (`id`, `userId` included) are dropped: they never change identity or owner. */
export const CreateTodoRequest = z.object({
  title: Title,
  completed: Completed.default(false),
});
export type CreateTodoRequest = z.infer<typeof CreateTodoRequest>;

/** PUT body: any non-empty subset of the editable fields. */
export const UpdateTodoRequest = z
  .object({ title: Title.optional(), completed: Completed.optional() })
  .refine((patch) => patch.title !== undefined || patch.completed !== undefined, {
    error: "must contain at least one of title, completed",
  });
export type UpdateTodoRequest = z.infer<typeof UpdateTodoRequest>;

// Query values arrive as strings (an array when repeated); only plain decimal digits are accepted.
const PositiveInt = (max: number) =>
  z
    .string({ error: "must be given once" })
    .regex(/^[1-9][0-9]*$/, { error: "must be a positive integer", abort: true })
    .refine((s) => s.length <= String(max).length && Number(s) <= max, { error: `must be at most ${max}` })
    .transform(Number);

/**
 * Where a list window starts: after the item of this number in the list's order (decimal digits: `0` is
 * before the first item), the cursor the service writes into the `Link: <…>; rel="next"` of a list answer that
 * stopped before the end and into the `List-Cursor` header of every list answer; clients copy it and need not
 * read it. The second form, `<creation time in ms>_<id>`, is the cursor handed out before the list was ordered
 * by commit (issue 35): still accepted, so that links saved then keep working.
 */
export const LIST_CURSOR =
  /^(?:([0-9]{1,19})|(-?[0-9]{1,15})_([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}))$/;

/**
 * The list's parameters written as arrays or objects (`after[]=x`, `limit[0]=1`, `page[a]=2`): a query parser
 * that reads brackets would make them the parameter; the service's (Express's "simple") leaves them as other
 * names. Either way they are refused, as a repeated parameter is, rather than ignored: ignored, `after[]=x`
 * answered the first page as if no cursor had been given.
 */
const BRACKETED_PARAMETER = /^(limit|page|after)\[/;

/**
 * `GET` list query: `limit` 1–100 and `page` 1–1,000,000, both optional; or `after`, a cursor from a
 * `Link: <…>; rel="next"` or a `List-Cursor` header, with an optional `limit`. Other parameters are ignored,
 * but not the bracketed forms of these three (BRACKETED_PARAMETER). `limit` alone is page 1;
 * `page` alone uses the largest limit (100). Without `limit` and `page` a window of the list is answered
 * (TODOS_LIST_MAX_ITEMS items, TODOS_LIST_MAX_BYTES of JSON), with a `Link` to the rest when there is more.
 */
export const TodoListQuery = z
  .looseObject({
    limit: PositiveInt(PAGE_LIMIT_MAX)
      .optional()
      .meta({
        description: `Page size, 1-${PAGE_LIMIT_MAX} (decimal digits, given once). Alone: the first page. Without limit and page: a window of the list, with \`Link: <…>; rel="next"\` to the rest.`,
      }),
    page: PositiveInt(PAGE_MAX)
      .optional()
      .meta({
        description: `Page number, 1-${PAGE_MAX} (decimal digits, given once), of pages of \`limit\` items (${PAGE_LIMIT_MAX} without limit). A page past the end is empty.`,
      }),
    after: z
      .string({ error: "must be given once" })
      .regex(LIST_CURSOR, { error: "must be a cursor copied from a list answer (its Link or List-Cursor header)" })
      .optional()
      .meta({
        description:
          'Continue the list after this cursor: copy the whole URL from the `Link: <…>; rel="next"` header of the previous answer, or, at the end of the list, the `List-Cursor` header (to ask later for what was added since). Not with `page`.',
      }),
  })
  .superRefine((query, ctx) => {
    for (const key of Object.keys(query)) {
      const name = BRACKETED_PARAMETER.exec(key)?.[1];
      if (name !== undefined) {
        ctx.addIssue({ code: "custom", path: [name], message: `must be given once, as ${name}=… (not ${key}=…)` });
      }
    }
  })
  .refine((query) => query.after === undefined || query.page === undefined, {
    path: ["page"],
    error: "must not be given with after (a cursor already says where the list continues)",
  });
export type TodoListQuery = z.infer<typeof TodoListQuery>;

export const TodoItem = z.object({
  id: z.uuid(),
  title: z.string(),
  completed: z.boolean(),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
});
export type TodoItem = z.infer<typeof TodoItem>;

/** `GET /users/:userId/todos` */
export const TodoListResponse = z.object({ todoItems: z.array(TodoItem) });
export type TodoListResponse = z.infer<typeof TodoListResponse>;

/** `GET /v1/user/:userId/todos`: the seed's client example expects a bare array. */
export const TodoListV1Response = z.array(TodoItem);
export type TodoListV1Response = z.infer<typeof TodoListV1Response>;

/** `POST /users/:userId/todos` (201, with `Location`) and `PUT /users/:userId/todos/:itemId` (200). */
export const TodoWriteResponse = z.object({ success: z.literal(true), todoItem: TodoItem });
export type TodoWriteResponse = z.infer<typeof TodoWriteResponse>;

/** `DELETE /users/:userId/todos/:itemId` */
export const TodoDeleteResponse = z.object({ message: z.literal(TODO_MESSAGES.deleted) });
export type TodoDeleteResponse = z.infer<typeof TodoDeleteResponse>;

/** Every todos error: the seed fixes it to `{ error }`; field problems add `details` (no `code`). */
export const TodosErrorBody = z.strictObject({
  error: z.string(),
  details: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
});
export type TodosErrorBody = z.infer<typeof TodosErrorBody>;

/** `GET /ready` when the database answers. */
export const TodosReadyResponse = z.object({
  status: z.literal("ready"),
  storage: z.enum(["postgres", "pglite"]),
});
export type TodosReadyResponse = z.infer<typeof TodosReadyResponse>;
