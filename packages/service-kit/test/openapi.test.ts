import { JsonValue, type RouteContracts, toOpenApiPath } from "@localdecider/contracts";
import express from "express";
import request from "supertest";
import { z } from "zod";
import { buildOpenApiDocument, docsRouter, type JsonObject, type OpenApiDocument } from "../src";
import { expectResponseMatchesOpenApi, openApiResponseValidator, validateOpenApi31 } from "../src/test-utils";

// A small service shaped like the real ones: named shared schemas, defaults, recursive JSON, an error body.
const ErrorBody = z.object({ error: z.string(), code: z.string().optional() }).meta({ id: "ErrorBody" });
const TodoItem = z
  .object({ id: z.uuid(), title: z.string().min(1).max(500), completed: z.boolean() })
  .meta({ id: "TodoItem" });
const CreateTodo = z.object({ title: z.string().min(1), completed: z.boolean().default(false) });
const UserParams = z.object({ userId: z.string().min(1).describe("Owner of the list") });
const Decide = z.object({ model: z.string(), state: JsonValue });

const routes = {
  getUsersUserIdTodos: {
    method: "get",
    path: "/users/:userId/todos",
    auth: "none",
    summary: "List a user's todo items",
    params: UserParams,
    query: z.object({ limit: z.coerce.number().int().positive().optional() }),
    responses: {
      200: { description: "The items", schema: z.object({ todoItems: z.array(TodoItem) }) },
      500: { description: "Storage failure", schema: ErrorBody },
    },
  },
  postUsersUserIdTodos: {
    method: "post",
    path: "/users/:userId/todos",
    auth: "none",
    summary: "Add a todo item",
    params: UserParams,
    body: CreateTodo,
    responses: {
      201: { description: "Created", schema: z.object({ success: z.literal(true), todoItem: TodoItem }) },
      400: { description: "Invalid body", schema: ErrorBody },
    },
  },
  deleteUsersUserIdTodosItemId: {
    method: "delete",
    path: "/users/:userId/todos/:itemId",
    auth: "none",
    summary: "Delete a todo item",
    responses: { 200: { description: "Deleted", schema: z.object({ message: z.string() }) } },
  },
  postV1Decide: {
    method: "post",
    path: "/v1/decide",
    summary: "Decide",
    body: Decide,
    auth: "bearer",
    responses: {
      200: {
        description: "Answers",
        schema: z.object({ model: z.string(), echo: JsonValue }),
        headers: { "x-request-id": { description: "Request id" } },
      },
      503: { description: "Busy", schema: ErrorBody, headers: { "retry-after": { description: "Seconds" } } },
    },
  },
  getHealth: {
    method: "get",
    path: "/health",
    summary: "Liveness",
    auth: "none",
    responses: { 204: { description: "Alive" } },
  },
} satisfies RouteContracts;

function sampleDocument(): OpenApiDocument {
  return buildOpenApiDocument({
    info: { title: "Sample <API>", version: "1.2.3" },
    routes,
    auth: {
      scheme: "bearerAuth",
      definition: { type: "http", scheme: "bearer" },
      responses: { 401: { description: "No or wrong bearer", schema: ErrorBody } },
    },
  });
}

describe("buildOpenApiDocument", () => {
  it("produces a document the official OpenAPI 3.1 schema accepts", async () => {
    const result = await validateOpenApi31(sampleDocument());
    expect(result.report).toMatchObject({ valid: true });
    expect(result.valid).toBe(true);
  });

  it("is rejected by that validator when the document is broken, so the check can fail", async () => {
    // OpenAPI 3.1 lets an operation omit responses, but a parameter must say where it goes.
    const broken = { ...sampleDocument(), paths: { "/x": { get: { parameters: [{ name: "a", in: "body" }] } } } };
    expect((await validateOpenApi31(broken as OpenApiDocument)).valid).toBe(false);
    const older = { ...sampleDocument(), openapi: "3.0.3" };
    expect((await validateOpenApi31(older as unknown as OpenApiDocument)).valid).toBe(false);
  });

  it("turns Express paths into OpenAPI paths with required path parameters", () => {
    const doc = sampleDocument();
    expect(Object.keys(doc.paths)).toStrictEqual([
      "/users/{userId}/todos",
      "/users/{userId}/todos/{itemId}",
      "/v1/decide",
      "/health",
    ]);
    expect(doc.paths["/users/{userId}/todos"]?.get?.parameters).toStrictEqual([
      {
        name: "userId",
        in: "path",
        required: true,
        description: "Owner of the list",
        schema: { type: "string", minLength: 1, description: "Owner of the list" },
      },
      {
        name: "limit",
        in: "query",
        schema: { type: "integer", exclusiveMinimum: 0, maximum: 9007199254740991 },
      },
    ]);
    // Parameters named in the path without a schema are documented as strings.
    expect(doc.paths["/users/{userId}/todos/{itemId}"]?.delete?.parameters).toStrictEqual([
      { name: "userId", in: "path", required: true, schema: { type: "string" } },
      { name: "itemId", in: "path", required: true, schema: { type: "string" } },
    ]);
    expect(toOpenApiPath("/a/:b_c/d/:e")).toBe("/a/{b_c}/d/{e}");
  });

  it("documents request bodies by their input type (defaulted fields optional) and responses by their output type", () => {
    const doc = sampleDocument();
    const post = doc.paths["/users/{userId}/todos"]?.post as Record<string, unknown>;
    expect(post.requestBody).toStrictEqual({
      required: true,
      content: {
        "application/json": {
          schema: {
            type: "object",
            properties: { title: { type: "string", minLength: 1 }, completed: { type: "boolean", default: false } },
            required: ["title"],
          },
        },
      },
    });
    expect(doc.components?.schemas?.TodoItem).toMatchObject({ required: ["id", "title", "completed"] });
    expect(post.operationId).toBe("postUsersUserIdTodos");
  });

  it("moves named and recursive schemas to components, JsonValue once, no #/$defs or root refs left", () => {
    const doc = sampleDocument();
    expect(Object.keys(doc.components?.schemas ?? {}).sort()).toStrictEqual(["ErrorBody", "JsonValue", "TodoItem"]);
    const decide = doc.paths["/v1/decide"]?.post as Record<string, Record<string, unknown>>;
    expect(JSON.stringify(decide.requestBody)).toContain('"state":{"$ref":"#/components/schemas/JsonValue"}');
    expect(JSON.stringify(decide.responses)).toContain('"echo":{"$ref":"#/components/schemas/JsonValue"}');
    expect(JSON.stringify(doc.components?.schemas?.JsonValue)).toContain('"$ref":"#/components/schemas/JsonValue"');
    const text = JSON.stringify(doc);
    expect(text).not.toContain("#/$defs");
    expect(text).not.toContain('"$ref":"#"');
    expect(text).not.toContain("$schema");
    expect(decide.security).toStrictEqual([{ bearerAuth: [] }]);
  });

  it("names a recursive top-level schema in components instead of referring to the document root", () => {
    interface Node {
      name: string;
      children: Node[];
    }
    const Tree: z.ZodType<Node> = z.object({ name: z.string(), children: z.array(z.lazy(() => Tree)) });
    const doc = buildOpenApiDocument({
      info: { title: "t", version: "1" },
      routes: {
        tree: {
          method: "get",
          path: "/tree",
          summary: "Tree",
          auth: "none",
          responses: { 200: { description: "ok", schema: Tree } },
        },
      },
    });
    const responses = doc.paths["/tree"]?.get?.responses as Record<string, { content: Record<string, JsonObject> }>;
    const ref = responses["200"]?.content["application/json"]?.schema as { $ref: string };
    expect(ref.$ref).toMatch(/^#\/components\/schemas\/\w+$/);
    const name = ref.$ref.split("/").pop() as string;
    expect(JSON.stringify(doc.components?.schemas?.[name])).toContain(ref.$ref);
    expect(JSON.stringify(doc)).not.toContain('"$ref":"#"');
  });

  it("declares the bearer scheme, its security and its responses on auth: bearer routes only", () => {
    const doc = sampleDocument();
    const decide = doc.paths["/v1/decide"]?.post as JsonObject;
    expect(decide.security).toStrictEqual([{ bearerAuth: [] }]);
    expect(Object.keys(decide.responses as JsonObject)).toStrictEqual(["200", "401", "503"]);
    const list = doc.paths["/users/{userId}/todos"]?.get as JsonObject;
    expect(list.security).toBeUndefined();
    expect(Object.keys(list.responses as JsonObject)).toStrictEqual(["200", "500"]);
    expect(doc.components?.securitySchemes).toStrictEqual({ bearerAuth: { type: "http", scheme: "bearer" } });
    const open = buildOpenApiDocument({ info: { title: "t", version: "1" }, routes });
    expect(JSON.stringify(open)).not.toContain("bearerAuth");
  });
});

describe("openApiResponseValidator", () => {
  const check = openApiResponseValidator(sampleDocument());
  const item = { id: "3f0e8a52-0b1c-4d8e-9a7b-2c4d6e8f0a1b", title: "Milk", completed: false };

  it("accepts a body that matches the documented schema, shared components included", () => {
    expect(
      check({ method: "GET", path: "/users/:userId/todos", status: 200, body: { todoItems: [item] } }),
    ).toStrictEqual([]);
    expect(
      check({ method: "post", path: "/v1/decide", status: 200, body: { model: "m", echo: { a: [1, null] } } }),
    ).toStrictEqual([]);
  });

  it("names each problem of a body that does not match", () => {
    const body = { todoItems: [{ id: "not-a-uuid", title: "", completed: "no" }] };
    expect(check({ method: "get", path: "/users/{userId}/todos", status: 200, body })).toStrictEqual([
      '/todoItems/0/id must match pattern "^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$"',
      '/todoItems/0/id must match format "uuid"',
      "/todoItems/0/title must NOT have fewer than 1 characters",
      "/todoItems/0/completed must be boolean",
    ]);
  });

  it("reports an undocumented status or route", () => {
    expect(check({ method: "get", path: "/users/:userId/todos", status: 418, body: {} })).toStrictEqual([
      "GET /users/{userId}/todos documents no 418 response",
    ]);
    expect(check({ method: "get", path: "/nope", status: 200, body: {} })).toStrictEqual([
      "the document has no operation GET /nope",
    ]);
  });

  it("throws through expectResponseMatchesOpenApi with the problems listed", () => {
    expect(() =>
      expectResponseMatchesOpenApi(sampleDocument(), { method: "get", path: "/health", status: 204, body: "" }),
    ).not.toThrow();
    expect(() =>
      expectResponseMatchesOpenApi(sampleDocument(), {
        method: "delete",
        path: "/users/:userId/todos/:itemId",
        status: 200,
        body: { message: 5 },
      }),
    ).toThrow("/message must be string");
  });
});

describe("docsRouter", () => {
  function app(prefix?: string) {
    const a = express();
    const router = docsRouter(sampleDocument());
    if (prefix) a.use(prefix, router);
    else a.use(router);
    return a;
  }

  it("GET /openapi.json answers the document", async () => {
    const res = await request(app()).get("/openapi.json");
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(res.body).toStrictEqual(sampleDocument());
  });

  it("GET /docs answers a page whose scripts and styles all come from this server", async () => {
    const res = await request(app()).get("/docs");
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(res.headers["content-security-policy"]).toContain("script-src 'self'");
    expect(res.text).toContain("<title>Sample &#60;API&#62;</title>");
    const urls = [...res.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    // Relative to the page, so that they work under any prefix (see below).
    expect(urls).toStrictEqual([
      "docs/assets/favicon-32x32.png",
      "docs/assets/swagger-ui.css",
      "docs/assets/swagger-ui-bundle.js",
      "docs/init.js",
    ]);
    for (const url of urls) {
      const resolved = new URL(url as string, "http://service.test/docs").pathname;
      const asset = await request(app()).get(resolved);
      expect({ url, status: asset.status }).toStrictEqual({ url, status: 200 });
    }
  });

  it("works behind a proxy that strips a path prefix: every URL, the document's included, resolves under it", async () => {
    // The browser is at https://host/todos/docs; the proxy hands the service /docs and strips /todos from
    // what the page then asks for. The service never sees the prefix.
    const a = app();
    const page = await request(a).get("/docs");
    const init = await request(a).get("/docs/init.js");
    expect(init.text).toContain('url: "openapi.json"');
    expect(init.text).toContain("validatorUrl: null");
    const browserAt = "https://host.test/todos/docs";
    const asked = [
      ...[...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] as string),
      /url: "([^"]+)"/.exec(init.text)?.[1] as string,
    ].map((url) => new URL(url, browserAt).pathname);
    expect(asked).toStrictEqual([
      "/todos/docs/assets/favicon-32x32.png",
      "/todos/docs/assets/swagger-ui.css",
      "/todos/docs/assets/swagger-ui-bundle.js",
      "/todos/docs/init.js",
      "/todos/openapi.json",
    ]);
    for (const path of asked) {
      const stripped = path.replace(/^\/todos/, "");
      expect({ path, status: (await request(a).get(stripped)).status }).toStrictEqual({ path, status: 200 });
    }
  });

  it("mounted under a path, serves the same page there; /docs/ is sent to ../docs so relative URLs hold", async () => {
    const page = await request(app("/api")).get("/api/docs");
    expect(page.status).toBe(200);
    expect(page.text).toContain('src="docs/assets/swagger-ui-bundle.js"');
    expect((await request(app("/api")).get("/api/openapi.json")).status).toBe(200);
    const slash = await request(app("/api")).get("/api/docs/");
    expect([slash.status, slash.headers.location]).toStrictEqual([301, "../docs"]);
    expect(new URL("../docs", "https://host.test/api/docs/").pathname).toBe("/api/docs");
  });

  it("serves only Swagger UI's own assets, not the rest of its package folder", async () => {
    const a = app();
    expect((await request(a).get("/docs/assets/package.json")).status).toBe(404);
    expect((await request(a).get("/docs/assets/index.html")).status).toBe(404);
    expect((await request(a).get("/docs/assets/..%2Fpackage.json")).status).toBe(404);
  });
});
