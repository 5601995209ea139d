import type { ValidationIssue } from "@localdecider/contracts";
import type { OpenAIErrorBody } from "@localdecider/contracts/decider";
import type { AppError } from "@localdecider/service-kit";
import type { Request } from "express";

/** The paths that speak OpenAI's dialect, and so answer their errors in its envelope. */
export const OPENAI_PATHS = ["/v1/decisions"] as const;

/**
 * An error as OpenAI's envelope `{"error": {message, type, param, code}}`, on OpenAI's paths only (the
 * errorHandler's `present`; every other route keeps the decider's own body). The status is one the `openai`
 * SDK maps to its error classes: validation (the decider's 422) is a 400 with `param` naming the first field
 * at fault (`questions[0].choices`); an unknown model a 404 on `model`, as OpenAI answers it. `code` is the
 * decider's own code; headers (Retry-After, WWW-Authenticate) are kept.
 */
export function presentOpenAIError(
  error: AppError,
  req: Request,
): { status: number; body: OpenAIErrorBody } | undefined {
  if (!OPENAI_PATHS.some((path) => req.path === path || req.path.startsWith(`${path}/`))) return undefined;
  const detail = error.details?.[0] as { path?: unknown; message?: unknown } | undefined;
  const path = typeof detail?.path === "string" && detail.path !== "body" ? paramOf(detail.path) : null;
  const status = error.code === "unknown_model" ? 404 : error.status === 422 ? 400 : error.status;
  const param = error.code === "unknown_model" ? "model" : path;
  const message =
    detail !== undefined && typeof detail.message === "string" && error.message === "Invalid request body"
      ? `Invalid request body: ${path ?? "body"}: ${detail.message}`
      : error.message;
  return {
    status,
    body: {
      error: {
        message,
        type: errorType(status),
        param,
        code: error.code === "unknown_model" ? "model_not_found" : (error.code ?? null),
      },
    },
  };
}

/** A dotted path (`questions.0.choices`) as OpenAI writes a param (`questions[0].choices`). */
export function paramOf(path: string): string {
  return path.replace(/\.(\d+)(?=\.|\[|$)/g, "[$1]");
}

/** OpenAI's error types by status. */
function errorType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 404) return "not_found_error";
  if (status === 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

/** The zod issue fields read here (zod's own types differ between its issue codes). */
interface Issue {
  code: string;
  path: PropertyKey[];
  message: string;
  errors?: Issue[][];
}

/**
 * A body's validation issues for OpenAI's `param`: where zod says only that no branch of a union matched
 * (`input` is text or a list; an item is a message or a tool item), the issues of the branch that got
 * furthest into the value (its deepest path) are named instead, so that `param` is the field at fault
 * (`input[0].role`), not the union around it. At most `limit` issues.
 */
export function openAIIssues(issues: readonly Issue[], limit = 20): ValidationIssue[] {
  const out: ValidationIssue[] = [];
  const walk = (list: readonly Issue[], prefix: PropertyKey[]): void => {
    for (const issue of list) {
      if (out.length >= limit) return;
      const path = [...prefix, ...issue.path];
      if (issue.code === "invalid_union" && issue.errors !== undefined && issue.errors.length > 0) {
        const depth = (branch: Issue[]) => Math.max(0, ...branch.map((i) => i.path.length));
        const best = issue.errors.reduce((a, b) => (depth(b) > depth(a) ? b : a));
        if (depth(best) > 0) {
          walk(best, path);
          continue;
        }
      }
      out.push({ path: path.length === 0 ? "body" : path.map(String).join("."), message: issue.message });
    }
  };
  walk(issues, []);
  return out;
}
