import { z } from "zod";
import { defineRoutes, errorResponses, type Reply, type SuccessBody } from "../src";
import { deciderRoutes } from "../src/decider";
import { todosRoutes } from "../src/todos";

const Problem = z.object({ error: z.string() });
const error = errorResponses(Problem);
const Thing = z.object({ id: z.string() });

const routes = defineRoutes(
  {
    ping: { method: "get", path: "/ping", summary: "Ping", auth: "none", responses: { 204: { description: "Up" } } },
    create: {
      method: "post",
      path: "/things",
      summary: "Creates a thing",
      auth: "bearer",
      body: Thing,
      responses: { 201: { description: "Created", schema: Thing }, 400: error("Its own 400") },
    },
  },
  { withBody: { 400: error("Not JSON"), 413: error("Too large", { "Retry-After": { description: "Never" } }) } },
);

describe("errorResponses", () => {
  it("gives responses with the router's one error body, and headers only when given", () => {
    expect(error("Gone")).toStrictEqual({ description: "Gone", schema: Problem });
    expect(error("Busy", { "Retry-After": { description: "Seconds" } })).toStrictEqual({
      description: "Busy",
      schema: Problem,
      headers: { "Retry-After": { description: "Seconds" } },
    });
  });
});

describe("defineRoutes", () => {
  it("merges the common responses into each route with a body, under the route's own, and leaves the others", () => {
    expect(routes.create.responses).toStrictEqual({
      201: { description: "Created", schema: Thing },
      400: { description: "Its own 400", schema: Problem },
      413: { description: "Too large", schema: Problem, headers: { "Retry-After": { description: "Never" } } },
    });
    expect(routes.ping.responses).toStrictEqual({ 204: { description: "Up" } });
    // The merged statuses are in the types too; a route without a body has none of them.
    expect(routes.create.responses[413].description).toBe("Too large");
    // @ts-expect-error ping has no body, so no 413
    expect(routes.ping.responses[413]).toBeUndefined();
  });

  it("keeps the literal types a handler's reply and a client's result are checked against", () => {
    const reply: Reply<typeof routes.create> = { status: 201, body: { id: "a" } };
    // @ts-expect-error a common (error) status is no reply a handler returns
    const refused: Reply<typeof routes.create> = { status: 413, body: { error: "x" } };
    const result: SuccessBody<typeof routes.create> = { id: "a" };
    expect([reply.status, refused.status, result.id]).toStrictEqual([201, 413, "a"]);
  });

  it("gives each service's routes with a body the router's common responses", () => {
    expect(Object.keys(deciderRoutes.systemOne.responses)).toStrictEqual([
      "200",
      "400",
      "413",
      "415",
      "422",
      "429",
      "502",
      "503",
      "504",
    ]);
    // The route's own 413 (too many questions, or the body limit) wins over the common one; 415 is the common one.
    expect(deciderRoutes.systemOne.responses[413].description).toMatch(/^too_many_questions: .*payload_too_large: /);
    expect(deciderRoutes.systemOne.responses[415].description).toBe(
      "A body in a character set other than UTF-8 (e.g. charset=latin1)",
    );
    for (const route of [todosRoutes.createTodo, todosRoutes.updateTodo]) {
      expect(route.responses[400]).toBe(todosRoutes.updateTodo.responses[400]);
      expect([413, 415, 500].map((status) => route.responses[status as 413 | 415 | 500].description)).toStrictEqual([
        "Body over 64 KiB",
        "Body in a Content-Encoding or charset the service cannot read",
        "Body is not parseable JSON (the seed's documented behaviour), or an unexpected failure",
      ]);
    }
    expect(Object.keys(todosRoutes.deleteTodo.responses)).toStrictEqual(["200", "400", "404", "500"]);
  });
});
