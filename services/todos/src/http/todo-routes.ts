import {
  CreateTodoRequest,
  HealthResponse,
  ItemId,
  TODO_MESSAGES,
  TodoDeleteResponse,
  type TodoItem,
  TodoListQuery,
  TodoListResponse,
  TodoListV1Response,
  TodosErrorBody,
  TodosReadyResponse,
  TodoWriteResponse,
  UpdateTodoRequest,
  UserId,
} from "@localdecider/contracts";
import { AppError, type RouteDoc } from "@localdecider/service-kit";
import type { Request, RequestHandler } from "express";
import { z } from "zod";
import type { TodoRecord, TodoRepository } from "../storage/repository";
import { authResponses, BEARER_SCHEME, requireUser, type TodosAuth } from "./auth";
import { parseBody, parseItemId, parsePage, parseUserId } from "./validation";

/**
 * Every route of the service in one table: createApp registers them in this order. Each entry is the
 * kit's RouteDoc (the zod schemas it validates with, responses per status), so the same table can be
 * handed to `buildOpenApiDocument({ routes })`; `path` is also the metrics route label. `authenticate`,
 * set on the per-user routes when sign-in is on, runs first, before the body is read.
 */
export type RouteDefinition = RouteDoc & { handler: RequestHandler; authenticate?: RequestHandler };

export interface TodoRoutesOptions {
  /** Sign-in; when set, the per-user routes require a bearer JWT and document 401/403 (and 503 for a key set). */
  auth?: TodosAuth | undefined;
}

const error = (description: string) => ({ description, schema: TodosErrorBody });
const BAD_USER = error("Invalid userId (1-128 characters, no NUL or unpaired surrogates)");
const NOT_FOUND = error("No such item for this user (also for a malformed itemId)");
const BAD_BODY = error("Body null or not an object (`{ error }` only), or field problems (with `details`)");
const TOO_LARGE = error("Body over 64 KiB");
const UNSUPPORTED = error("Body in a Content-Encoding or charset the service cannot read");
const MALFORMED = error("Body is not parseable JSON (the seed's documented behaviour), or an unexpected failure");
const INTERNAL = error("Unexpected failure, a storage failure included");
const UserParams = z.object({ userId: UserId });
const ItemParams = z.object({ userId: UserId, itemId: ItemId });

function toItem(record: TodoRecord): TodoItem {
  return {
    id: record.id,
    title: record.title,
    completed: record.completed,
    createdAt: record.createdAt.toISOString(),
    updatedAt: record.updatedAt.toISOString(),
  };
}

export function todoRoutes(repository: TodoRepository, options: TodoRoutesOptions = {}): RouteDefinition[] {
  const { auth } = options;
  // A route under /users/:userId (or the seed's /v1/user/:userId): with sign-in on, only that user's token
  // (or an admin token) reaches it. /health and /ready stay open.
  const perUser = (route: RouteDefinition): RouteDefinition =>
    auth === undefined
      ? route
      : {
          ...route,
          security: [{ [BEARER_SCHEME]: [] }],
          responses: { ...route.responses, ...authResponses(auth) },
          authenticate: requireUser(auth),
        };

  const list = async (req: Request): Promise<TodoItem[]> => {
    const userId = parseUserId(req.params.userId);
    const page = parsePage(req.query);
    return (await repository.list(userId, page)).map(toItem);
  };

  return [
    {
      method: "get",
      path: "/health",
      summary: "The process is up.",
      responses: { 200: { description: "Up", schema: HealthResponse } },
      handler: (_req, res) => {
        res.json({ status: "ok" });
      },
    },
    {
      method: "get",
      path: "/ready",
      summary: "The database answers.",
      responses: {
        200: { description: "Database reachable", schema: TodosReadyResponse },
        503: error("Database unreachable"),
      },
      handler: async (_req, res) => {
        try {
          await repository.ping();
        } catch (err) {
          throw new AppError(503, "Database unavailable", { cause: err });
        }
        res.json({ status: "ready", storage: repository.kind });
      },
    },
    perUser({
      method: "get",
      path: "/users/:userId/todos",
      summary: "The user's items, oldest first; `limit`/`page` page them.",
      params: UserParams,
      query: TodoListQuery,
      responses: {
        200: { description: "The items", schema: TodoListResponse },
        400: error("Invalid userId, limit or page"),
        500: INTERNAL,
      },
      handler: async (req, res) => {
        res.json({ todoItems: await list(req) });
      },
    }),
    perUser({
      method: "get",
      path: "/v1/user/:userId/todos",
      summary: "The seed client's path: the same list as a bare array.",
      params: UserParams,
      query: TodoListQuery,
      responses: {
        200: { description: "The items as a bare array", schema: TodoListV1Response },
        400: error("Invalid userId, limit or page"),
        500: INTERNAL,
      },
      handler: async (req, res) => {
        res.json(await list(req));
      },
    }),
    perUser({
      method: "post",
      path: "/users/:userId/todos",
      summary: "Creates an item for the user.",
      params: UserParams,
      body: CreateTodoRequest,
      responses: {
        201: {
          description: "Created",
          schema: TodoWriteResponse,
          headers: { Location: { description: "Path of the new item" } },
        },
        400: BAD_BODY,
        413: TOO_LARGE,
        415: UNSUPPORTED,
        500: MALFORMED,
      },
      handler: async (req, res) => {
        const userId = parseUserId(req.params.userId);
        const input = parseBody(CreateTodoRequest, req.body);
        const created = toItem(await repository.create(userId, input));
        res
          .status(201)
          .location(`/users/${encodeURIComponent(userId)}/todos/${created.id}`)
          .json({ success: true, todoItem: created });
      },
    }),
    perUser({
      method: "put",
      path: "/users/:userId/todos/:itemId",
      summary: "Changes the title and/or completion of one of the user's items.",
      params: ItemParams,
      body: UpdateTodoRequest,
      responses: {
        200: { description: "Updated", schema: TodoWriteResponse },
        400: BAD_BODY,
        404: NOT_FOUND,
        413: TOO_LARGE,
        415: UNSUPPORTED,
        500: MALFORMED,
      },
      handler: async (req, res) => {
        const userId = parseUserId(req.params.userId);
        const itemId = parseItemId(req.params.itemId);
        const patch = parseBody(UpdateTodoRequest, req.body);
        const updated = await repository.update(userId, itemId, patch);
        if (updated === undefined) throw new AppError(404, TODO_MESSAGES.notFound);
        res.json({ success: true, todoItem: toItem(updated) });
      },
    }),
    perUser({
      method: "delete",
      path: "/users/:userId/todos/:itemId",
      summary: "Deletes one of the user's items.",
      params: ItemParams,
      responses: {
        200: { description: "Deleted", schema: TodoDeleteResponse },
        400: BAD_USER,
        404: NOT_FOUND,
        500: INTERNAL,
      },
      handler: async (req, res) => {
        const userId = parseUserId(req.params.userId);
        const itemId = parseItemId(req.params.itemId);
        if (!(await repository.delete(userId, itemId))) throw new AppError(404, TODO_MESSAGES.notFound);
        res.json({ message: TODO_MESSAGES.deleted });
      },
    }),
  ];
}
