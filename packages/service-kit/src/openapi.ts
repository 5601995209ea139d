import { dirname } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { Router } from "express";
import { z } from "zod";

/** JSON Schema / OpenAPI objects are plain JSON; this names that without pretending to model all of it. */
export type JsonObject = { [key: string]: unknown };

export type HttpMethod = "get" | "post" | "put" | "patch" | "delete";

export interface ResponseDoc {
  description: string;
  /** JSON body; omit for an empty body. */
  schema?: z.ZodType;
  headers?: Record<string, { description: string; schema?: z.ZodType }>;
}

/** One operation of the service, as the service registers it: the same zod schemas it validates with. */
export interface RouteDoc {
  method: HttpMethod;
  /** Express-style path: `/users/:userId/todos` (documented as `/users/{userId}/todos`). */
  path: string;
  summary: string;
  description?: string;
  operationId?: string;
  tags?: string[];
  /** Path parameters as an object schema; parameters named in the path but absent here are plain strings. */
  params?: z.ZodObject;
  query?: z.ZodObject;
  /** JSON request body, documented with the schema's input type (defaults make fields optional). */
  body?: z.ZodType;
  /** Overrides the document-level security for this route (`[]` = no auth). */
  security?: Record<string, string[]>[];
  /** Keyed by status code; response bodies are documented with the schema's output type. */
  responses: Record<number | string, ResponseDoc>;
}

export interface OpenApiOptions {
  info: { title: string; version: string; description?: string };
  servers?: { url: string; description?: string }[];
  routes: RouteDoc[];
  securitySchemes?: Record<string, JsonObject>;
  /** Document-level security requirement, e.g. `[{ bearerAuth: [] }]`. */
  security?: Record<string, string[]>[];
  tags?: { name: string; description?: string }[];
}

export interface OpenApiDocument extends JsonObject {
  openapi: "3.1.0";
  info: OpenApiOptions["info"];
  paths: Record<string, Record<string, JsonObject>>;
  components: { schemas: Record<string, JsonObject>; securitySchemes?: Record<string, JsonObject> };
}

const COMPONENT_REF = "#/components/schemas/";

/** `/users/:userId/todos` -> `/users/{userId}/todos`. */
export function toOpenApiPath(expressPath: string): string {
  return expressPath.replace(/:([A-Za-z0-9_]+)/g, "{$1}");
}

function pathParamNames(expressPath: string): string[] {
  return [...expressPath.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1] as string);
}

/** A readable identifier from method and path, e.g. `getUsersUserIdTodos`, used when none is given. */
function defaultOperationId(method: HttpMethod, path: string): string {
  const words = path
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]?.toUpperCase() + w.slice(1));
  return method + words.join("");
}

/**
 * Converts zod schemas to JSON Schema 2020-12 (the dialect of OpenAPI 3.1) and gathers the shared ones under
 * components/schemas. zod puts named (`.meta({ id })`) and recursive parts in `$defs` with `#/$defs/...` refs;
 * in an OpenAPI document a `#` ref resolves against the document root, so every def is moved to components
 * and its refs rewritten.
 */
class SchemaCollector {
  readonly components: Record<string, JsonObject> = {};
  /** Unnamed recursive parts already collected, by their self-referencing shape (see selfShape). */
  private readonly unnamedByShape = new Map<string, string>();

  convert(schema: z.ZodType, io: "input" | "output", hint: string): JsonObject {
    const json = z.toJSONSchema(schema, { target: "draft-2020-12", io, unrepresentable: "any" }) as JsonObject;
    delete json.$schema;
    const defs = (json.$defs ?? {}) as Record<string, JsonObject>;
    delete json.$defs;

    // The root is recursive (`$ref: "#"`): it has to live in components to be referable.
    const rootIsReferenced = containsRef(json, "#") || Object.values(defs).some((d) => containsRef(d, "#"));
    const names = new Map<string, string>(Object.keys(defs).map((key) => [key, key]));
    const rootName = rootIsReferenced ? this.freeName(hint, json) : undefined;
    // zod names unnamed recursive parts `__schema0`, `__schema1`, ... afresh for every conversion, so the
    // same part (z.json() is the usual one) comes back under a new key each time. Such a part is matched by
    // content against those already collected and reuses its component; a new one gets a readable name.
    let autoIndex = 0;
    for (const [key, def] of Object.entries(defs)) {
      if (!key.startsWith("__schema")) continue;
      const shape = selfShape(def, key, names, rootName);
      const known = this.unnamedByShape.get(shape);
      if (known !== undefined) {
        names.set(key, known);
        continue;
      }
      const name = shape === jsonValueShape() ? this.freeName("JsonValue", undefined) : `${hint}Def${autoIndex++}`;
      names.set(key, name);
      this.unnamedByShape.set(shape, name);
    }

    // A def named like an existing but different component (the same id seen as input and as output, say)
    // gets a new name; a def identical to the existing component reuses it.
    for (let pass = 0; pass < 3; pass++) {
      let renamed = false;
      for (const [key, def] of Object.entries(defs)) {
        const name = names.get(key) as string;
        const existing = this.components[name];
        if (existing !== undefined && !isDeepStrictEqual(existing, rewrite(def, names, rootName))) {
          names.set(key, this.freeName(io === "input" ? `${name}Input` : name, undefined));
          renamed = true;
        }
      }
      if (!renamed) break;
    }
    for (const [key, def] of Object.entries(defs)) {
      this.components[names.get(key) as string] = rewrite(def, names, rootName);
    }
    const root = rewrite(json, names, rootName);
    if (rootName === undefined) return root;
    this.components[rootName] = root;
    return { $ref: COMPONENT_REF + rootName };
  }

  private freeName(base: string, content: JsonObject | undefined): string {
    let name = base;
    for (let i = 2; this.components[name] !== undefined; i++) {
      if (content !== undefined && isDeepStrictEqual(this.components[name], content)) return name;
      name = `${base}${i}`;
    }
    return name;
  }
}

const SELF = "\u0000self";

/** A def's content with its references to itself written as one placeholder: equal shapes, equal schemas. */
function selfShape(def: JsonObject, key: string, names: Map<string, string>, rootName: string | undefined): string {
  return JSON.stringify(rewrite(def, new Map([...names, [key, SELF]]), rootName));
}

let jsonValue: string | undefined;
/** The shape of z.json() (any JSON value), named `JsonValue` in components. */
function jsonValueShape(): string {
  if (jsonValue === undefined) {
    const json = z.toJSONSchema(z.object({ v: z.json() }), { target: "draft-2020-12" }) as JsonObject;
    const defs = (json.$defs ?? {}) as Record<string, JsonObject>;
    const [key, def] = Object.entries(defs)[0] ?? ["", {}];
    jsonValue = selfShape(def, key, new Map(), undefined);
  }
  return jsonValue;
}

function containsRef(node: unknown, ref: string): boolean {
  if (Array.isArray(node)) return node.some((n) => containsRef(n, ref));
  if (typeof node !== "object" || node === null) return false;
  return Object.entries(node).some(([k, v]) => (k === "$ref" && v === ref) || containsRef(v, ref));
}

function rewrite<T>(node: T, names: Map<string, string>, rootName: string | undefined): T {
  if (Array.isArray(node)) return node.map((n) => rewrite(n, names, rootName)) as T;
  if (typeof node !== "object" || node === null) return node;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === "$ref" && typeof v === "string") {
      if (v === "#" && rootName !== undefined) out[k] = COMPONENT_REF + rootName;
      else if (v.startsWith("#/$defs/")) out[k] = COMPONENT_REF + (names.get(v.slice(8)) ?? v.slice(8));
      else out[k] = v;
    } else {
      out[k] = rewrite(v, names, rootName);
    }
  }
  return out as T;
}

function upperFirst(s: string): string {
  return s.slice(0, 1).toUpperCase() + s.slice(1);
}

function parameters(
  route: RouteDoc,
  where: "path" | "query",
  collector: SchemaCollector,
  operationId: string,
): JsonObject[] {
  const objectSchema = where === "path" ? route.params : route.query;
  const converted = objectSchema
    ? collector.convert(objectSchema, "input", `${upperFirst(operationId)}${upperFirst(where)}`)
    : { properties: {}, required: [] };
  const properties = (converted.properties ?? {}) as Record<string, JsonObject>;
  const required = new Set((converted.required ?? []) as string[]);
  const names = where === "path" ? pathParamNames(route.path) : Object.keys(properties);
  return names.map((name) => {
    const schema = properties[name] ?? { type: "string" };
    const { description, ...rest } = schema;
    return {
      name,
      in: where,
      // OpenAPI requires every path parameter to be required.
      required: where === "path" || required.has(name),
      ...(typeof description === "string" ? { description } : {}),
      schema: rest,
    };
  });
}

/** Builds an OpenAPI 3.1 document from the service's route table and its zod contracts. */
export function buildOpenApiDocument(options: OpenApiOptions): OpenApiDocument {
  const collector = new SchemaCollector();
  const paths: OpenApiDocument["paths"] = {};
  for (const route of options.routes) {
    const operationId = route.operationId ?? defaultOperationId(route.method, route.path);
    const hint = upperFirst(operationId);
    const responses: Record<string, JsonObject> = {};
    for (const [status, response] of Object.entries(route.responses)) {
      const headers = Object.fromEntries(
        Object.entries(response.headers ?? {}).map(([name, header]) => [
          name,
          {
            description: header.description,
            schema: header.schema ? collector.convert(header.schema, "output", `${hint}Header`) : { type: "string" },
          },
        ]),
      );
      responses[status] = {
        description: response.description,
        ...(Object.keys(headers).length > 0 ? { headers } : {}),
        ...(response.schema
          ? {
              content: {
                "application/json": {
                  schema: collector.convert(response.schema, "output", `${hint}Response${status}`),
                },
              },
            }
          : {}),
      };
    }
    const params = [
      ...parameters(route, "path", collector, operationId),
      ...parameters(route, "query", collector, operationId),
    ];
    const operation: JsonObject = {
      operationId,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      ...(route.tags ? { tags: route.tags } : {}),
      ...(params.length > 0 ? { parameters: params } : {}),
      ...(route.body
        ? {
            requestBody: {
              required: true,
              content: { "application/json": { schema: collector.convert(route.body, "input", `${hint}Body`) } },
            },
          }
        : {}),
      responses,
      ...(route.security ? { security: route.security } : {}),
    };
    const path = toOpenApiPath(route.path);
    paths[path] ??= {};
    (paths[path] as Record<string, JsonObject>)[route.method] = operation;
  }
  return {
    openapi: "3.1.0",
    info: options.info,
    ...(options.servers ? { servers: options.servers } : {}),
    ...(options.tags ? { tags: options.tags } : {}),
    ...(options.security ? { security: options.security } : {}),
    paths,
    components: {
      schemas: collector.components,
      ...(options.securitySchemes ? { securitySchemes: options.securitySchemes } : {}),
    },
  };
}

// ---------------------------------------------------------------------------------------------------------
// GET /openapi.json and GET /docs

/** Swagger UI's own files, served from node_modules: /docs needs no CDN and works offline. */
const SWAGGER_UI_DIR = dirname(require.resolve("swagger-ui-dist/package.json"));
const SWAGGER_UI_FILES = new Set(["swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png"]);

// Everything /docs loads comes from this origin; the policy makes a stray CDN reference fail loudly.
// Swagger UI sets inline styles and renders schema images as data: URLs.
const DOCS_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; font-src 'self'";

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export interface DocsRouterOptions {
  /** Title of the /docs page; defaults to the document's info.title. */
  title?: string;
}

/**
 * `GET /openapi.json` (the document) and `GET /docs` (Swagger UI over it, assets under /docs/assets/).
 * Mount it at the app root, or under a prefix (`app.use("/api", docsRouter(doc))`): URLs in the page follow
 * the mount path.
 */
export function docsRouter(document: OpenApiDocument, options: DocsRouterOptions = {}): Router {
  const router = Router();
  const title = escapeHtml(options.title ?? document.info.title);
  router.get("/openapi.json", (_req, res) => {
    res.json(document);
  });
  router.get("/docs", (req, res) => {
    const base = req.baseUrl;
    res.setHeader("Content-Security-Policy", DOCS_CSP);
    res.type("html").send(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<link rel="icon" type="image/png" href="${base}/docs/assets/favicon-32x32.png">
<link rel="stylesheet" href="${base}/docs/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${base}/docs/assets/swagger-ui-bundle.js"></script>
<script src="${base}/docs/init.js"></script>
</body>
</html>
`);
  });
  router.get("/docs/init.js", (req, res) => {
    res.setHeader("Content-Security-Policy", DOCS_CSP);
    // validatorUrl null: Swagger UI would otherwise send the document to an online validator.
    res.type("js").send(`window.ui = SwaggerUIBundle({
  url: ${JSON.stringify(`${req.baseUrl}/openapi.json`)},
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
`);
  });
  router.get("/docs/assets/:file", (req, res, next) => {
    const file = req.params.file;
    if (!SWAGGER_UI_FILES.has(file)) {
      next();
      return;
    }
    res.sendFile(file, { root: SWAGGER_UI_DIR, maxAge: "1d" });
  });
  return router;
}
