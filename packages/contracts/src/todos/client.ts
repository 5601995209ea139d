import { type ApiError, type Client, type ClientOptions, createClient } from "../core/client";
import { type TodosRoutes, todosRoutes } from "./routes";

/** Errors a todos client throws for an error status (todos error bodies carry no code). */
export type TodosApiError = ApiError<never>;

/** `createTodosClient({ baseUrl, token? })`: listTodos, createTodo, updateTodo, deleteTodo, ... */
export function createTodosClient(options: ClientOptions): Client<TodosRoutes> {
  return createClient(todosRoutes, options);
}
