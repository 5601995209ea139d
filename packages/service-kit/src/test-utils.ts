/**
 * Test helpers for the services' API suites: import from "@localdecider/service-kit/test-utils".
 * Kept out of the main entry because ajv and the OpenAPI validator are dev dependencies of this package:
 * they are installed in the workspace but not in a deployed image.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { type HttpMethod, toOpenApiPath } from "@localdecider/contracts";
import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import type { RequestHandler } from "express";
import type { OpenApiDocument } from "./openapi";

export { seededRandom } from "./seeded-random";

const DOCUMENT_ID = "urn:localdecider:openapi";

/** JSON Pointer escaping of one path segment (`/` and `~` in OpenAPI paths). */
function pointer(segment: string): string {
  return segment.replace(/~/g, "~0").replace(/\//g, "~1");
}

export interface ResponseCheck {
  method: HttpMethod | Uppercase<HttpMethod>;
  /** Express-style (`/users/:userId/todos`) or OpenAPI-style (`/users/{userId}/todos`) route path. */
  path: string;
  status: number;
  body: unknown;
}

/**
 * Checks live responses against the document's response schemas (JSON Schema 2020-12, via ajv). Returns a
 * function giving the list of problems, empty when the body matches.
 */
export function openApiResponseValidator(document: OpenApiDocument): (check: ResponseCheck) => string[] {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  // The whole document is one schema resource, so refs to #/components/schemas/... resolve inside it.
  ajv.addSchema(document, DOCUMENT_ID);
  return (check) => {
    const method = check.method.toLowerCase();
    const path = toOpenApiPath(check.path);
    const operation = document.paths[path]?.[method];
    if (operation === undefined) return [`the document has no operation ${method.toUpperCase()} ${path}`];
    const responses = operation.responses as Record<string, { content?: Record<string, unknown> }>;
    const response = responses[String(check.status)];
    if (response === undefined) {
      return [`${method.toUpperCase()} ${path} documents no ${check.status} response`];
    }
    if (response.content?.["application/json"] === undefined) {
      return check.body === undefined || check.body === "" || isEmptyObject(check.body)
        ? []
        : [`${method.toUpperCase()} ${path} ${check.status} documents no body but one was sent`];
    }
    const ref = `${DOCUMENT_ID}#/paths/${pointer(path)}/${method}/responses/${check.status}/content/${pointer("application/json")}/schema`;
    const validate = ajv.getSchema(ref) ?? ajv.compile({ $ref: ref });
    if (validate(check.body)) return [];
    return (validate.errors ?? []).map((e) => `${e.instancePath || "(body)"} ${e.message ?? "is invalid"}`);
  };
}

function isEmptyObject(value: unknown): boolean {
  return typeof value === "object" && value !== null && Object.keys(value).length === 0;
}

/** Throws, naming every mismatch, when a live response does not match its documented schema. */
export function expectResponseMatchesOpenApi(document: OpenApiDocument, check: ResponseCheck): void {
  const problems = openApiResponseValidator(document)(check);
  if (problems.length > 0) {
    throw new Error(
      `${check.method.toUpperCase()} ${check.path} ${check.status} does not match the OpenAPI document:\n  ${problems.join("\n  ")}\nbody: ${JSON.stringify(check.body)}`,
    );
  }
}

export interface OpenApiValidation {
  valid: boolean;
  /** The validator's report (its `errors` when invalid). */
  report: unknown;
}

/**
 * Validates a document against the official OpenAPI 3.1 schema with @seriousme/openapi-schema-validator.
 * That package is ESM-only, which Jest's CommonJS runtime cannot load, so its own CLI runs in a child
 * Node process on a temporary copy of the document.
 */
export async function validateOpenApi31(document: OpenApiDocument): Promise<OpenApiValidation> {
  const dir = await mkdtemp(join(tmpdir(), "openapi-"));
  try {
    const file = join(dir, "openapi.json");
    await writeFile(file, JSON.stringify(document));
    const cli = join(
      dirname(require.resolve("@seriousme/openapi-schema-validator/package.json")),
      "bin/validate-api-cli.js",
    );
    const run = promisify(execFile);
    const outcome = await run(process.execPath, [cli, file]).then(
      (r) => r.stdout,
      (err: { stdout?: string }) => err.stdout ?? "",
    );
    const report = JSON.parse(outcome) as { valid?: boolean };
    // The validator picks the schema by the document's own `openapi` field; insist that it is 3.1.
    return { valid: report.valid === true && /^3\.1\.\d+$/.test(String(document.openapi)), report };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export interface RecordedResponse {
  method: string;
  /** The request path as sent, without the query string (`/users/u1/todos`). */
  path: string;
  status: number;
  /** The JSON body the app sent (undefined when it sent none or not JSON). */
  body: unknown;
}

/**
 * Records every JSON response an app sends, so an API suite can check all its live responses against the
 * OpenAPI document afterwards (`checkRecordedResponses`) without touching each test. Mount `middleware`
 * first (before the routes); it wraps `res.json`, through which every JSON answer of these services goes.
 */
export function responseRecorder(): { middleware: RequestHandler; responses: RecordedResponse[] } {
  const responses: RecordedResponse[] = [];
  const middleware: RequestHandler = (req, res, next) => {
    let body: unknown;
    const json = res.json.bind(res);
    res.json = (value: unknown) => {
      body = value;
      return json(value);
    };
    res.once("finish", () => {
      responses.push({ method: req.method, path: req.originalUrl.split("?")[0] ?? "", status: res.statusCode, body });
    });
    next();
  };
  return { middleware, responses };
}

/** The document's path template a concrete request path falls under (`/users/u1/todos` -> `/users/{userId}/todos`). */
export function documentPathOf(document: OpenApiDocument, method: string, path: string): string | undefined {
  return Object.keys(document.paths).find((template) => {
    if (document.paths[template]?.[method.toLowerCase()] === undefined) return false;
    const pattern = template
      .split(/\{[^}]+\}/)
      .map((part) => part.replace(/[.*+?^$()|[\]\\]/g, "\\$&"))
      .join("[^/]+");
    return new RegExp(`^${pattern}$`).test(path);
  });
}

/**
 * Checks recorded responses against the document: every response of a documented operation must have a
 * documented status and match its schema (responses to undocumented paths, such as probes of unknown URLs,
 * are left out). Throws naming every mismatch; returns the `METHOD /template status` triples it checked,
 * so a suite can assert which routes and statuses its tests covered.
 */
export function checkRecordedResponses(document: OpenApiDocument, responses: RecordedResponse[]): string[] {
  const validate = openApiResponseValidator(document);
  const covered = new Set<string>();
  const problems: string[] = [];
  for (const response of responses) {
    const template = documentPathOf(document, response.method, response.path);
    if (template === undefined) continue;
    const method = response.method.toLowerCase() as HttpMethod;
    const found = validate({ method, path: template, status: response.status, body: response.body });
    if (found.length > 0) {
      problems.push(`${response.method} ${response.path} ${response.status}: ${found.join("; ")}`);
    }
    covered.add(`${response.method} ${template} ${response.status}`);
  }
  if (problems.length > 0) {
    throw new Error(`live responses that do not match the OpenAPI document:\n  ${problems.join("\n  ")}`);
  }
  return [...covered].sort();
}

/**
 * The value of one sample in a Prometheus text exposition, found by name and by the labels given (others,
 * such as `service`, may be present); undefined when no sample matches. The API suites read /metrics with it.
 */
export function metricSample(
  exposition: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  for (const line of exposition.split("\n")) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (match === null || match[1] !== name) continue;
    const found = Object.fromEntries(
      [...(match[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([key, value]) => found[key] === value)) return Number(match[3]);
  }
  return undefined;
}
