import {
  CreateTodoRequest,
  HealthResponse,
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
} from "@localdecider/contracts";
import { AppError } from "@localdecider/service-kit";
import type { Request, RequestHandler } from "express";
import type { z } from "zod";
import type { TodoRecord, TodoRepository } from "../storage/repository";
import { parseBody, parseItemId, parsePage, parseUserId } from "./validation";

/**
 * Every route of the service in one table: createApp registers them in this order, and the same table
 * can drive OpenAPI generation (request/response schemas per status) or per-route metrics labels (path).
 */
export interface RouteDefinition {
  method: "get" | "post" | "put" | "delete";
  /** Express path, also the metrics label. */
  path: string;
  summary: string;
  request?: { query?: z.ZodType; body?: z.ZodType };
  responses: Record<number, z.ZodType>;
  handler: RequestHandler;
}

function toItem(record: TodoRecord): TodoItem {
  return {
    id: record.id,
    title: record.title,
    completed: record.completed,
    createdAt: record.createdAt.toISOString(),
    updatedAt: record.updatedAt.toISOString(),
  };
}

export function todoRoutes(repository: TodoRepository): RouteDefinition[] {
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
      responses: { 200: HealthResponse },
      handler: (_req, res) => {
        res.json({ status: "ok" });
      },
    },
    {
      method: "get",
      path: "/ready",
      summary: "The database answers.",
      responses: { 200: TodosReadyResponse, 503: TodosErrorBody },
      handler: async (_req, res) => {
        try {
          await repository.ping();
        } catch (err) {
          throw new AppError(503, "Database unavailable", { cause: err });
        }
        res.json({ status: "ready", storage: repository.kind });
      },
    },
    {
      method: "get",
      path: "/users/:userId/todos",
      summary: "The user's items, oldest first; `limit`/`page` page them.",
      request: { query: TodoListQuery },
      responses: { 200: TodoListResponse, 400: TodosErrorBody },
      handler: async (req, res) => {
        res.json({ todoItems: await list(req) });
      },
    },
    {
      method: "get",
      path: "/v1/user/:userId/todos",
      summary: "The seed client's path: the same list as a bare array.",
      request: { query: TodoListQuery },
      responses: { 200: TodoListV1Response, 400: TodosErrorBody },
      handler: async (req, res) => {
        res.json(await list(req));
      },
    },
    {
      method: "post",
      path: "/users/:userId/todos",
      summary: "Creates an item for the user.",
      request: { body: CreateTodoRequest },
      responses: { 201: TodoWriteResponse, 400: TodosErrorBody, 413: TodosErrorBody },
      handler: async (req, res) => {
        const userId = parseUserId(req.params.userId);
        const input = parseBody(CreateTodoRequest, req.body);
        const created = toItem(await repository.create(userId, input));
        res
          .status(201)
          .location(`/users/${encodeURIComponent(userId)}/todos/${created.id}`)
          .json({ success: true, todoItem: created });
      },
    },
    {
      method: "put",
      path: "/users/:userId/todos/:itemId",
      summary: "Changes the title and/or completion of one of the user's items.",
      request: { body: UpdateTodoRequest },
      responses: { 200: TodoWriteResponse, 400: TodosErrorBody, 404: TodosErrorBody, 413: TodosErrorBody },
      handler: async (req, res) => {
        const userId = parseUserId(req.params.userId);
        const itemId = parseItemId(req.params.itemId);
        const patch = parseBody(UpdateTodoRequest, req.body);
        const updated = await repository.update(userId, itemId, patch);
        if (updated === undefined) throw new AppError(404, TODO_MESSAGES.notFound);
        res.json({ success: true, todoItem: toItem(updated) });
      },
    },
    {
      method: "delete",
      path: "/users/:userId/todos/:itemId",
      summary: "Deletes one of the user's items.",
      responses: { 200: TodoDeleteResponse, 400: TodosErrorBody, 404: TodosErrorBody },
      handler: async (req, res) => {
        const userId = parseUserId(req.params.userId);
        const itemId = parseItemId(req.params.itemId);
        if (!(await repository.delete(userId, itemId))) throw new AppError(404, TODO_MESSAGES.notFound);
        res.json({ message: TODO_MESSAGES.deleted });
      },
    },
  ];
}
