import { dirname } from "node:path";
import { pathParamNames, type RouteContracts, toOpenApiPath } from "@localdecider/contracts";
import { Router } from "express";
import { z } from "zod";
import { createDocument, type oas31, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject } from "zod-openapi";

/** JSON Schema / OpenAPI objects are plain JSON; this names that without pretending to model all of it. */
export type JsonObject = { [key: string]: unknown };

/** How a service's bearer credentials are documented on its `auth: "bearer"` routes. */
export interface OpenApiAuth {
  /** The security scheme's name in components, e.g. `bearerAuth`. */
  scheme: string;
  /** Its Security Scheme Object, e.g. `{ type: "http", scheme: "bearer" }`. */
  definition: oas31.SecuritySchemeObject;
  /** Responses the check adds to each such route (401, 403, ...), keyed by status. */
  responses: RouteContracts[string]["responses"];
}

export interface OpenApiOptions {
  info: { title: string; version: string; description?: string };
  servers?: { url: string; description?: string }[];
  tags?: { name: string; description?: string }[];
  /** The service's route contracts; each name is its operationId. */
  routes: RouteContracts;
  /**
   * The service's auth, when it has one configured: its `auth: "bearer"` routes then declare the scheme and
   * its responses. Omitted: every route is documented as open, which is then the truth.
   */
  auth?: OpenApiAuth;
  /**
   * Responses the service may give on every route besides the route's own, except on the paths listed (the
   * Host check's 421, which the probe endpoints never give). Omitted: none.
   */
  shared?: { responses: RouteContracts[string]["responses"]; exceptPaths?: readonly string[] };
}

export interface OpenApiDocument extends JsonObject {
  openapi: "3.1.0";
  info: OpenApiOptions["info"];
  paths: Record<string, Record<string, JsonObject>>;
  components?: { schemas?: Record<string, JsonObject>; securitySchemes?: Record<string, JsonObject> };
}

/**
 * An OpenAPI 3.1 document from the service's route contracts. zod-openapi converts the schemas (zod's own
 * z.toJSONSchema underneath): request parts by their input types (defaulted fields optional), responses by
 * their output types, and schemas with a `.meta({ id })` (JsonValue) once under components.
 */
export function buildOpenApiDocument(options: OpenApiOptions): OpenApiDocument {
  const { auth } = options;
  const paths: ZodOpenApiPathsObject = {};
  for (const [operationId, route] of Object.entries(options.routes)) {
    const secured = route.auth === "bearer" && auth !== undefined;
    const shared =
      options.shared === undefined || options.shared.exceptPaths?.includes(route.path) ? {} : options.shared.responses;
    // A route's own response for a status wins (the decider's /v1/decisions declares its 401 in OpenAI's envelope).
    const responses = Object.entries({ ...(secured ? auth.responses : {}), ...shared, ...route.responses }).map(
      ([status, response]) => [
        status,
        {
          description: response.description,
          ...(response.headers === undefined
            ? {}
            : {
                headers: Object.fromEntries(
                  Object.entries(response.headers).map(([name, h]) => [
                    name,
                    { description: h.description, schema: { type: "string" } },
                  ]),
                ),
              }),
          ...(response.schema === undefined ? {} : { content: { "application/json": { schema: response.schema } } }),
        },
      ],
    );
    // A path parameter without a schema is a plain string (registerRoutes refuses such a route; documents
    // of other route lists still describe it).
    const unnamed = pathParamNames(route.path).filter((name) => route.params?.shape[name] === undefined);
    const pathParams =
      unnamed.length === 0
        ? route.params
        : (route.params ?? z.object({})).extend(Object.fromEntries(unnamed.map((name) => [name, z.string()])));
    const operation: ZodOpenApiOperationObject = {
      operationId,
      summary: route.summary,
      ...(route.description === undefined ? {} : { description: route.description }),
      ...(route.tags === undefined ? {} : { tags: route.tags }),
      ...(pathParams === undefined && route.query === undefined
        ? {}
        : {
            requestParams: {
              ...(pathParams === undefined ? {} : { path: pathParams }),
              ...(route.query === undefined ? {} : { query: route.query }),
            },
          }),
      ...(route.body === undefined
        ? {}
        : { requestBody: { required: true, content: { "application/json": { schema: route.body } } } }),
      responses: Object.fromEntries(responses),
      ...(secured ? { security: [{ [auth.scheme]: [] }] } : {}),
    };
    const path = toOpenApiPath(route.path);
    paths[path] = { ...paths[path], [route.method]: operation };
  }
  return createDocument({
    openapi: "3.1.0",
    info: options.info,
    ...(options.servers === undefined ? {} : { servers: options.servers }),
    ...(options.tags === undefined ? {} : { tags: options.tags }),
    paths,
    ...(auth === undefined ? {} : { components: { securitySchemes: { [auth.scheme]: auth.definition } } }),
  }) as OpenApiDocument;
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
 * Mount it at the app root, or under a prefix (`app.use("/api", docsRouter(doc))`): every URL in the page is
 * relative to it, so it also works behind a proxy that strips a path prefix.
 */
export function docsRouter(document: OpenApiDocument, options: DocsRouterOptions = {}): Router {
  const router = Router();
  const title = escapeHtml(options.title ?? document.info.title);
  router.get("/openapi.json", (_req, res) => {
    res.json(document);
  });
  router.get("/docs", (req, res) => {
    // Every URL in the page is relative to the page (`docs/assets/...` from `.../docs`), so /docs works
    // wherever it is mounted and behind a proxy that serves the service under a path prefix it strips
    // (`https://host/todos/docs` -> `/docs`), which the service cannot see. `/docs/` would shift them one
    // level down: it is sent to `../docs`, relative too.
    if (req.path.endsWith("/")) {
      res.redirect(301, "../docs");
      return;
    }
    const base = "docs";
    res.setHeader("Content-Security-Policy", DOCS_CSP);
    res.type("html").send(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<link rel="icon" type="image/png" href="${base}/assets/favicon-32x32.png">
<link rel="stylesheet" href="${base}/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${base}/assets/swagger-ui-bundle.js"></script>
<script src="${base}/init.js"></script>
</body>
</html>
`);
  });
  router.get("/docs/init.js", (_req, res) => {
    res.setHeader("Content-Security-Policy", DOCS_CSP);
    // validatorUrl null: Swagger UI would otherwise send the document to an online validator. The document's
    // URL is relative, resolved against the page (.../docs -> .../openapi.json), as the page's own are.
    res.type("js").send(`window.ui = SwaggerUIBundle({
  url: "openapi.json",
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
