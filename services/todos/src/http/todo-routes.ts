import { TODO_MESSAGES, type TodoItem, type TodosRoutes } from "@localdecider/contracts/todos";
import { AppError, type RouteHandlers } from "@localdecider/service-kit";
import type { TodoRecord, TodoRepository } from "../storage/repository";
import { toPage } from "./validation";

function toItem(record: TodoRecord): TodoItem {
  return {
    id: record.id,
    title: record.title,
    completed: record.completed,
    createdAt: record.createdAt.toISOString(),
    updatedAt: record.updatedAt.toISOString(),
  };
}

/**
 * One handler per contract in todosRoutes (@localdecider/contracts). Parameters, query and body arrive
 * checked against the contract's schemas (registerRoutes, with invalidTodosRequest's errors); sign-in, when
 * on, has already run.
 */
export function todoHandlers(repository: TodoRepository, maxItemsPerUser: number): RouteHandlers<TodosRoutes> {
  // Item ids are UUIDs, stored in lower case; the path may spell them in either.
  const itemIdOf = (itemId: string) => itemId.toLowerCase();
  return {
    health: () => ({ status: 200, body: { status: "ok" } }),
    ready: async () => {
      try {
        await repository.ping();
      } catch (err) {
        throw new AppError(503, "Database unavailable", { cause: err });
      }
      return { status: 200, body: { status: "ready", storage: repository.kind } };
    },
    listTodos: async ({ params, query }) => {
      const items = await repository.list(params.userId, toPage(query));
      return { status: 200, body: { todoItems: items.map(toItem) } };
    },
    listTodosV1: async ({ params, query }) => {
      const items = await repository.list(params.userId, toPage(query));
      return { status: 200, body: items.map(toItem) };
    },
    createTodo: async ({ params, body }) => {
      const record = await repository.create(params.userId, body, maxItemsPerUser);
      if (record === undefined) {
        throw new AppError(409, TODO_MESSAGES.listFull, {
          details: [
            { path: "todoItems", message: `holds the most items allowed (${maxItemsPerUser}); delete some first` },
          ],
        });
      }
      const created = toItem(record);
      return {
        status: 201,
        body: { success: true, todoItem: created },
        headers: { Location: `/users/${encodeURIComponent(params.userId)}/todos/${created.id}` },
      };
    },
    getTodo: async ({ params }) => {
      const record = await repository.get(params.userId, itemIdOf(params.itemId));
      if (record === undefined) throw new AppError(404, TODO_MESSAGES.notFound);
      return { status: 200, body: toItem(record) };
    },
    updateTodo: async ({ params, body }) => {
      const updated = await repository.update(params.userId, itemIdOf(params.itemId), body);
      if (updated === undefined) throw new AppError(404, TODO_MESSAGES.notFound);
      return { status: 200, body: { success: true, todoItem: toItem(updated) } };
    },
    deleteTodo: async ({ params }) => {
      if (!(await repository.delete(params.userId, itemIdOf(params.itemId)))) {
        throw new AppError(404, TODO_MESSAGES.notFound);
      }
      return { status: 200, body: { message: TODO_MESSAGES.deleted } };
    },
  };
}
