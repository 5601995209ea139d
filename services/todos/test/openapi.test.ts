import { buildOpenApiDocument } from "@localdecider/service-kit";
import { todoRoutes } from "../src/http/todo-routes";
import type { TodoRepository } from "../src/storage/repository";

const unused = {} as TodoRepository; // only the route table is read, no handler runs

describe("the route table as an OpenAPI document", () => {
  it("when handed to the kit's generator, documents every route with its statuses", () => {
    const doc = buildOpenApiDocument({ info: { title: "todos", version: "0.1.0" }, routes: todoRoutes(unused) });
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops).map(
        ([method, op]) => `${method.toUpperCase()} ${path} ${Object.keys(op.responses as object).join(",")}`,
      ),
    );
    expect(operations.sort()).toStrictEqual([
      "DELETE /users/{userId}/todos/{itemId} 200,400,404,500",
      "GET /health 200",
      "GET /ready 200,503",
      "GET /users/{userId}/todos 200,400,500",
      "GET /v1/user/{userId}/todos 200,400,500",
      "POST /users/{userId}/todos 201,400,413,415,500",
      "PUT /users/{userId}/todos/{itemId} 200,400,404,413,415,500",
    ]);
  });
});
