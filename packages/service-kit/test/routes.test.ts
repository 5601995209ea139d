import type { RouteContracts } from "@localdecider/contracts";
import express, { type RequestHandler } from "express";
import request from "supertest";
import { z } from "zod";
import {
  AppError,
  errorHandler,
  jsonBody,
  type RegisterRoutesOptions,
  type RouteHandlers,
  registerRoutes,
} from "../src";
import { createLogger } from "../src/logger";

const Item = z.object({ id: z.string(), title: z.string() });
const routes = {
  getItem: {
    method: "get",
    path: "/lists/:listId/items/:itemId",
    summary: "One item",
    auth: "none",
    params: z.object({ listId: z.string().min(2), itemId: z.string() }),
    query: z.object({ upper: z.enum(["yes", "no"]).optional() }),
    responses: { 200: { description: "The item", schema: Item } },
  },
  addItem: {
    method: "post",
    path: "/lists/:listId/items",
    summary: "Adds an item",
    auth: "bearer",
    params: z.object({ listId: z.string() }),
    body: z.object({ title: z.string().min(1) }),
    responses: {
      201: { description: "Added", schema: Item, headers: { Location: { description: "Its path" } } },
      204: { description: "Nothing to add" },
    },
  },
} satisfies RouteContracts;

const handlers: RouteHandlers<typeof routes> = {
  getItem: ({ params, query }) => ({
    status: 200,
    body: { id: params.itemId, title: query.upper === "yes" ? "MILK" : "milk" },
  }),
  addItem: ({ params, body }) =>
    body.title === "-"
      ? { status: 204, body: undefined }
      : { status: 201, body: { id: "1", title: body.title }, headers: { Location: `/lists/${params.listId}/items/1` } },
};

// Typecheck (pnpm typecheck fails if any of these is accepted): a missing handler, a handler for no
// contract, a reply off the contract.
const typeErrors: RouteHandlers<typeof routes>[] = [
  // @ts-expect-error addItem has no handler
  { getItem: handlers.getItem },
  // @ts-expect-error removeItem has no contract
  { ...handlers, removeItem: handlers.getItem },
  {
    ...handlers,
    // @ts-expect-error 200 is not a status addItem answers with
    addItem: () => ({ status: 200, body: { id: "1", title: "t" } }),
  },
  {
    ...handlers,
    // @ts-expect-error the body misses title
    getItem: () => ({ status: 200, body: { id: "1" } }),
  },
];

function app(overrides: Partial<RegisterRoutesOptions> = {}, seen: string[] = []) {
  const a = express();
  const authenticate: RequestHandler = (req, _res, next) => {
    seen.push(`auth ${req.path}`);
    next(req.get("authorization") === "Bearer ok" ? undefined : new AppError(401, "no"));
  };
  registerRoutes(a, routes, handlers, {
    authenticate,
    jsonBody: jsonBody({ limit: 100 }),
    invalid: (part, error) => new AppError(400, `invalid ${part}`, { details: error.issues.map((i) => i.message) }),
    ...overrides,
  });
  a.use(errorHandler({ logger: createLogger({ service: "t", level: "silent" }) }));
  return a;
}

describe("registerRoutes", () => {
  it("has its type errors checked by tsc (the list above), not at run time", () => {
    expect(typeErrors).toHaveLength(4);
  });

  it("hands the handler its parsed parts and answers its status, headers and body", async () => {
    const res = await request(app()).get("/lists/ab/items/7?upper=yes");
    expect([res.status, res.body]).toStrictEqual([200, { id: "7", title: "MILK" }]);
    const added = await request(app()).post("/lists/ab/items").set("authorization", "Bearer ok").send({ title: "x" });
    expect([added.status, added.headers.location, added.body]).toStrictEqual([
      201,
      "/lists/ab/items/1",
      { id: "1", title: "x" },
    ]);
    const empty = await request(app()).post("/lists/ab/items").set("authorization", "Bearer ok").send({ title: "-" });
    expect([empty.status, empty.text]).toStrictEqual([204, ""]);
  });

  it("checks params, then query, then body, each with the service's error", async () => {
    expect((await request(app()).get("/lists/a/items/7?upper=maybe")).body.error).toBe("invalid params");
    expect((await request(app()).get("/lists/ab/items/7?upper=maybe")).body.error).toBe("invalid query");
    const res = await request(app()).post("/lists/ab/items").set("authorization", "Bearer ok").send({ title: "" });
    expect([res.status, res.body.error]).toStrictEqual([400, "invalid body"]);
  });

  it("authenticates auth: bearer routes before the body is read, and only those", async () => {
    const seen: string[] = [];
    const res = await request(app({}, seen)).post("/lists/ab/items").send("{not json");
    expect(res.status).toBe(401);
    await request(app({}, seen)).get("/lists/ab/items/7");
    expect(seen).toStrictEqual(["auth /lists/ab/items"]);
    const open = await request(app({ authenticate: undefined }))
      .post("/lists/ab/items")
      .send({ title: "x" });
    expect(open.status).toBe(201);
  });

  it("runs checkBody before the body's schema", async () => {
    const res = await request(
      app({
        checkBody: () => {
          throw new AppError(400, "too deep");
        },
      }),
    )
      .post("/lists/ab/items")
      .set("authorization", "Bearer ok")
      .send({ title: "" });
    expect(res.body.error).toBe("too deep");
  });

  it("answers a method no contract declares on a known path with the service's 405 and Allow; unknown paths stay 404", async () => {
    const a = app({
      methodNotAllowed: (method, allowed) => new AppError(405, `${method} is not allowed here`, { details: allowed }),
    });
    a.use((_req, res) => res.status(404).json({ error: "not found" }));
    const put = await request(a).put("/lists/ab/items/7").send({ title: "x" });
    expect([put.status, put.headers.allow, put.body]).toStrictEqual([
      405,
      "GET, HEAD, OPTIONS",
      { error: "PUT is not allowed here", details: ["GET", "HEAD", "OPTIONS"] },
    ]);
    const get = await request(a).get("/lists/ab/items");
    expect([get.status, get.headers.allow, get.body.error]).toStrictEqual([
      405,
      "POST, OPTIONS",
      "GET is not allowed here",
    ]);
    const options = await request(a).options("/lists/ab/items");
    expect([options.status, options.headers.allow, options.text]).toStrictEqual([204, "POST, OPTIONS", ""]);
    // HEAD is served by the GET route, not refused.
    expect((await request(a).head("/lists/ab/items/7")).status).toBe(200);
    expect((await request(a).patch("/nowhere")).status).toBe(404);
  });

  it("without methodNotAllowed, a wrong method falls through to the service's 404", async () => {
    const a = app();
    a.use((_req, res) => res.status(404).json({ error: "not found" }));
    expect((await request(a).put("/lists/ab/items/7")).status).toBe(404);
  });

  it("refuses at boot a missing handler, a handler without a contract and an inconsistent route list", () => {
    const register = (r: RouteContracts, h: Record<string, unknown>) => () =>
      registerRoutes(express(), r, h as RouteHandlers<RouteContracts>, {
        jsonBody: jsonBody({ limit: 100 }),
        invalid: () => new AppError(400, "x"),
      });
    expect(register(routes, { getItem: handlers.getItem })).toThrow(
      "routes do not match their contracts: addItem: no handler",
    );
    expect(register(routes, { ...handlers, removeItem: handlers.getItem })).toThrow(
      "removeItem: a handler for a route that has no contract",
    );
    const { params: _unused, ...withoutParams } = routes.getItem;
    expect(register({ getItem: withoutParams }, { getItem: handlers.getItem })).toThrow(
      "getItem: path parameter :listId has no schema in params; getItem: path parameter :itemId has no schema in params",
    );
    expect(
      register(
        { a: routes.addItem, b: { ...routes.addItem, params: z.object({ listId: z.string(), x: z.string() }) } },
        {
          a: handlers.addItem,
          b: handlers.addItem,
        },
      ),
    ).toThrow("b: POST /lists/:listId/items is already a; b: params.x is not in the path /lists/:listId/items");
  });
});
