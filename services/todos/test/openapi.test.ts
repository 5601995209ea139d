import { todosRoutes } from "@localdecider/contracts/todos";
import { buildTodosOpenApi } from "../src/app";

describe("the route contracts as an OpenAPI document", () => {
  it("documents every contract under its name as operationId, with its statuses, and nothing else", () => {
    const doc = buildTodosOpenApi({ hostCheck: false });
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops).map(
        ([method, op]) =>
          `${op.operationId} ${method.toUpperCase()} ${path} ${Object.keys(op.responses as object).join(",")}`,
      ),
    );
    expect(operations.sort()).toStrictEqual([
      "createTodo POST /users/{userId}/todos 201,400,409,413,415,500",
      "deleteTodo DELETE /users/{userId}/todos/{itemId} 200,400,404,500",
      "getTodo GET /users/{userId}/todos/{itemId} 200,400,404,500",
      "health GET /health 200",
      "listTodos GET /users/{userId}/todos 200,400,500",
      "listTodosV1 GET /v1/user/{userId}/todos 200,400,500",
      "ready GET /ready 200,503",
      "updateTodo PUT /users/{userId}/todos/{itemId} 200,400,404,413,415,500",
    ]);
    expect(Object.keys(todosRoutes).sort()).toStrictEqual(operations.map((o) => o.split(" ")[0]).sort());
  });

  it("describes the list's paging parameters with their bounds, its Link and List-Cursor headers, and the create's 409 for a full list", () => {
    const doc = buildTodosOpenApi({ hostCheck: false });
    for (const path of ["/users/{userId}/todos", "/v1/user/{userId}/todos"]) {
      const parameters = doc.paths[path]?.get?.parameters as { in: string; name: string; description?: string }[];
      expect(parameters.filter((p) => p.in === "query").map((p) => [p.name, p.description])).toStrictEqual([
        [
          "limit",
          'Page size, 1-100 (decimal digits, given once). Alone: the first page. Without limit and page: a window of the list, with `Link: <…>; rel="next"` to the rest.',
        ],
        [
          "page",
          "Page number, 1-1000000 (decimal digits, given once), of pages of `limit` items (100 without limit). A page past the end is empty.",
        ],
        [
          "after",
          'Continue the list after this cursor: copy the whole URL from the `Link: <…>; rel="next"` header of the previous answer, or, at the end of the list, the `List-Cursor` header (to ask later for what was added since). Not with `page`.',
        ],
      ]);
      const responses = doc.paths[path]?.get?.responses as Record<string, { headers?: object }> | undefined;
      expect(Object.keys(responses?.["200"]?.headers ?? {})).toStrictEqual(["Link", "List-Cursor"]);
    }
    const responses = doc.paths["/users/{userId}/todos"]?.post?.responses as Record<string, { description: string }>;
    expect(responses["409"]?.description).toMatch(/^The user's list already holds the most items/);
  });

  it("with the Host check on, adds its 421 to every route but the probes'", () => {
    const statuses = (doc: ReturnType<typeof buildTodosOpenApi>) =>
      Object.entries(doc.paths).flatMap(([path, ops]) =>
        Object.entries(ops).map(
          ([method, op]) => `${method.toUpperCase()} ${path} ${Object.keys(op.responses as object).join(",")}`,
        ),
      );
    expect(statuses(buildTodosOpenApi({ hostCheck: true })).sort()).toStrictEqual([
      "DELETE /users/{userId}/todos/{itemId} 200,400,404,421,500",
      "GET /health 200",
      "GET /ready 200,503",
      "GET /users/{userId}/todos 200,400,421,500",
      "GET /users/{userId}/todos/{itemId} 200,400,404,421,500",
      "GET /v1/user/{userId}/todos 200,400,421,500",
      "POST /users/{userId}/todos 201,400,409,413,415,421,500",
      "PUT /users/{userId}/todos/{itemId} 200,400,404,413,415,421,500",
    ]);
  });
});
