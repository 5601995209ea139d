import { TODO_MESSAGES, type TodoListQuery, type TodosRoutes } from "@localdecider/contracts/todos";
import { AppError, type RouteHandlers } from "@localdecider/service-kit";
import type { TodoRepository } from "../storage/repository";
import { type ListLimits, listAnswer, pageOf } from "./list-window";
import { toItem } from "./todo-item";

/**
 * One handler per contract in todosRoutes (@localdecider/contracts). Parameters, query and body arrive
 * checked against the contract's schemas (registerRoutes, with invalidTodosRequest's errors); sign-in, when
 * on, has already run.
 */
export function todoHandlers(
  repository: TodoRepository,
  maxItemsPerUser: number,
  listLimits: ListLimits,
): RouteHandlers<TodosRoutes> {
  // Item ids are UUIDs, stored in lower case; the path may spell them in either.
  const itemIdOf = (itemId: string) => itemId.toLowerCase();
  /**
   * One window of the list (list-window.ts), the Link to the rest when there is more, and the cursor to
   * continue from later (List-Cursor), the last page's included.
   */
  const listWindow = async (userId: string, query: TodoListQuery, path: string) => {
    const fetched = await repository.list(userId, pageOf(query, listLimits));
    const { items, next, cursor } = listAnswer(fetched, query, listLimits, path);
    const headers: Record<string, string> = {};
    if (next !== undefined) headers.Link = `<${next}>; rel="next"`;
    if (cursor !== undefined) headers["List-Cursor"] = cursor;
    return { items, headers: next === undefined && cursor === undefined ? undefined : headers };
  };
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
      const { items, headers } = await listWindow(
        params.userId,
        query,
        `/users/${encodeURIComponent(params.userId)}/todos`,
      );
      return { status: 200, body: { todoItems: items }, ...(headers === undefined ? {} : { headers }) };
    },
    listTodosV1: async ({ params, query }) => {
      const { items, headers } = await listWindow(
        params.userId,
        query,
        `/v1/user/${encodeURIComponent(params.userId)}/todos`,
      );
      return { status: 200, body: items, ...(headers === undefined ? {} : { headers }) };
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
