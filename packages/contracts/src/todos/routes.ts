import { HealthResponse } from "../core/health";
import { defineRoutes, errorResponses, type ResponseContract } from "../core/route";
import {
  CreateTodoRequest,
  ItemParams,
  TODO_MESSAGES,
  TodoDeleteResponse,
  TodoItem,
  TodoListQuery,
  TodoListResponse,
  TodoListV1Response,
  TodosErrorBody,
  TodosReadyResponse,
  TodoWriteResponse,
  UpdateTodoRequest,
  UserParams,
} from "./schemas";

/** Every todos error answers with one body, TodosErrorBody. */
const error = errorResponses(TodosErrorBody);
const BAD_USER = error("Invalid userId (1-128 characters, no NUL or unpaired surrogates)");
const BAD_LIST_REQUEST = error("Invalid userId, limit, page or after (or page with after)");
const NOT_FOUND = error("No such item for this user (also for a malformed itemId)");
const INTERNAL = error("Unexpected failure, a storage failure included");

/**
 * The list answers' extra headers: where the rest of the list is, when this answer stopped before its end
 * (Link), and where to continue from later, the last page's included (List-Cursor). A new relation on the
 * last page would have broken clients that follow `rel="next"` until it is absent, so the end of the list
 * has its own header instead.
 */
const LIST_LINK = {
  Link: {
    description:
      '`<…>; rel="next"`: the URL of the rest of the list (same route, `after=` a cursor, or the next `page`), sent only when there is more. Without `limit`/`page` an answer holds at most TODOS_LIST_MAX_ITEMS items (1,000) and TODOS_LIST_MAX_BYTES of items (1 MiB).',
  },
  "List-Cursor": {
    description:
      "The cursor after the last item of this answer, for `after=`: on the last page too, so a client tailing the list asks again later with it and gets only what was created since. Items are in commit order, so no item created later can land before it. On every answer that holds an item, every `after=` answer and the unpaged first window (`0` when the list is empty).",
  },
};

/** The realm of the todos' `WWW-Authenticate` challenge. */
export const TODOS_AUTH_REALM = "todos";

/**
 * What sign-in (TODOS_AUTH=jwt) adds to every `auth: "bearer"` route; 503 only with a key set fetched from
 * the provider (TODOS_JWT_JWKS_URL).
 */
export const TODOS_AUTH_RESPONSES = {
  401: error(
    "No bearer token, or one that is invalid (bad signature or algorithm, wrong iss/aud, expired, no exp/iat/sub, a lifetime over the service's maximum, issued in the future)",
    {
      "WWW-Authenticate": {
        description: `\`Bearer realm="${TODOS_AUTH_REALM}"\`, plus \`error="invalid_token"\` when a token was sent`,
      },
    },
  ),
  403: error("The token's subject is not this userId (and it is no admin token)"),
  503: error(
    "The provider's key set could not be fetched (down, an error status, over the fetch deadline or the size cap, not a key set)",
    { "Retry-After": { description: "Seconds to wait before trying again (the key set fetch deadline)" } },
  ),
} satisfies Record<number, ResponseContract>;

/**
 * What the Host check adds to every route but the probes' (`/health`, `/ready`): 421 for a request whose
 * `Host` is not in TODOS_ALLOWED_HOSTS (or a loopback name), the answer a page on a rebound DNS name gets. On
 * with sign-in off (the default), and with sign-in on when TODOS_ALLOWED_HOSTS is set.
 */
export const TODOS_HOST_RESPONSES = {
  421: error(
    `\`{ "error": "${TODO_MESSAGES.hostNotAllowed}" }\`: the request's Host is not a name this service answers for`,
  ),
} satisfies Record<number, ResponseContract>;

/**
 * Every endpoint of the todos service, in registration order. The per-user routes want a bearer JWT when
 * sign-in is on; /health and /ready stay open. GET /metrics, /openapi.json and /docs are not listed. Each
 * route with a body also gives the body reader's and the body schema's refusals (the common responses, after
 * the routes).
 */
export const todosRoutes = defineRoutes(
  {
    health: {
      method: "get",
      path: "/health",
      summary: "The process is up.",
      auth: "none",
      responses: { 200: { description: "Up", schema: HealthResponse } },
    },
    ready: {
      method: "get",
      path: "/ready",
      summary: "The database answers.",
      auth: "none",
      responses: {
        200: { description: "Database reachable", schema: TodosReadyResponse },
        503: error("Database unreachable"),
      },
    },
    listTodos: {
      method: "get",
      path: "/users/:userId/todos",
      summary: "The user's items, oldest first, a window at a time; `limit`/`page` page them.",
      auth: "bearer",
      params: UserParams,
      query: TodoListQuery,
      responses: {
        200: { description: "The items", schema: TodoListResponse, headers: LIST_LINK },
        400: BAD_LIST_REQUEST,
        500: INTERNAL,
      },
    },
    listTodosV1: {
      method: "get",
      path: "/v1/user/:userId/todos",
      summary: "The seed client's path: the same list as a bare array.",
      auth: "bearer",
      params: UserParams,
      query: TodoListQuery,
      responses: {
        200: { description: "The items as a bare array", schema: TodoListV1Response, headers: LIST_LINK },
        400: BAD_LIST_REQUEST,
        500: INTERNAL,
      },
    },
    createTodo: {
      method: "post",
      path: "/users/:userId/todos",
      summary: "Creates an item for the user.",
      auth: "bearer",
      params: UserParams,
      body: CreateTodoRequest,
      responses: {
        201: {
          description: "Created",
          schema: TodoWriteResponse,
          headers: { Location: { description: "Path of the new item" } },
        },
        409: error(
          "The user's list already holds the most items the service allows (TODOS_MAX_ITEMS_PER_USER, 10,000 by default): nothing was created; delete items first",
        ),
      },
    },
    getTodo: {
      method: "get",
      path: "/users/:userId/todos/:itemId",
      summary: "One of the user's items: where a create's `Location` header points.",
      auth: "bearer",
      params: ItemParams,
      responses: {
        200: { description: "The item", schema: TodoItem },
        400: BAD_USER,
        404: NOT_FOUND,
        500: INTERNAL,
      },
    },
    updateTodo: {
      method: "put",
      path: "/users/:userId/todos/:itemId",
      summary: "Changes the title and/or completion of one of the user's items.",
      auth: "bearer",
      params: ItemParams,
      body: UpdateTodoRequest,
      responses: {
        200: { description: "Updated", schema: TodoWriteResponse },
        404: NOT_FOUND,
      },
    },
    deleteTodo: {
      method: "delete",
      path: "/users/:userId/todos/:itemId",
      summary: "Deletes one of the user's items.",
      auth: "bearer",
      params: ItemParams,
      responses: {
        200: { description: "Deleted", schema: TodoDeleteResponse },
        400: BAD_USER,
        404: NOT_FOUND,
        500: INTERNAL,
      },
    },
  },
  {
    withBody: {
      400: error("Body null or not an object (`{ error }` only), or field problems (with `details`)"),
      413: error("Body over 64 KiB"),
      415: error("Body in a Content-Encoding or charset the service cannot read"),
      500: error("Body is not parseable JSON (the seed's documented behaviour), or an unexpected failure"),
    },
  },
);
export type TodosRoutes = typeof todosRoutes;
