/**
 * Test helpers for the services' API suites: import from "@localdecider/service-kit/dist/test-utils".
 * Kept out of the main entry because ajv and the OpenAPI validator are dev dependencies of this package:
 * they are installed in the workspace but not in a deployed image.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import type { HttpMethod, OpenApiDocument } from "./openapi";
import { toOpenApiPath } from "./openapi";

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
