import type { z } from "zod";
import type { ValidationIssue } from "./errors";
import { pathParamNames, type RouteContract, type RouteContracts, routeListProblems, type SuccessBody } from "./route";

/**
 * Typed clients over Node's global fetch, built from the route contracts at run time (no generated code):
 * one method per route, named as the route, taking its params/query/body and resolving to its success
 * body parsed by the contract's schema. Failures are exceptions: ApiError when the service answered with
 * an error status, ApiRequestError when there is no usable answer. Each service's own client
 * (`createDeciderClient`, `createTodosClient`) lives beside its routes, in its subpath.
 */

export interface ClientOptions {
  /** The service's address, e.g. `http://127.0.0.1:3000` (a path prefix is kept). */
  baseUrl: string | URL;
  /** Sent as `Authorization: Bearer <token>` (the decider's API key, a todos sign-in JWT). Default none. */
  token?: string;
  /** Sent with every request. */
  headers?: Record<string, string>;
  /**
   * Abort a call that has not answered after this many milliseconds (an ApiRequestError, reason "timeout").
   * Default 200,000: above the decider's default LOCALDECIDER_TIMEOUT (180 s), so its own 504 comes first.
   */
  timeoutMs?: number;
  /** Default: the global fetch. */
  fetch?: typeof fetch;
}

export const DEFAULT_CLIENT_TIMEOUT_MS = 200_000;

/** Per call: the caller's cancellation and extra headers (an `x-request-id` of its own, say). */
export interface CallOptions {
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

type Part<C, K extends "params" | "query" | "body", IO extends "input" | "output"> = C extends {
  [P in K]: infer S extends z.ZodType;
}
  ? { [P in K]: IO extends "input" ? z.input<S> : Partial<z.output<S>> }
  : { [P in K]?: never };

/**
 * A call's input: `params` and `body` as the contract's input types; `query` as the values the server ends
 * up with (numbers for the todos' limit/page), sent as strings and optional.
 */
export type CallInput<C> = Part<C, "params", "input"> &
  (C extends { query: z.ZodType } ? { query?: Part<C, "query", "output">["query"] } : { query?: never }) &
  Part<C, "body", "input"> &
  CallOptions;

/** Whether T has a required key (then the call's input cannot be left out). */
type HasRequired<T> = Partial<T> extends T ? false : true;

export type ClientMethod<C> =
  HasRequired<CallInput<C>> extends true
    ? (input: CallInput<C>) => Promise<SuccessBody<C>>
    : (input?: CallInput<C>) => Promise<SuccessBody<C>>;

export type Client<R extends RouteContracts> = { [K in keyof R]: ClientMethod<R[K]> };

/** The service answered with an error status: its error body, as fields. */
export class ApiError<Code extends string = string> extends Error {
  readonly status: number;
  /** The body's `code` (the decider always sends one; the todos' bodies have none). */
  readonly code: Code | undefined;
  /** The body's per-field problems, when it lists them. */
  readonly details: ValidationIssue[] | undefined;
  /** The response's `x-request-id`: quote it when asking what happened. */
  readonly requestId: string | undefined;
  /** `GET /users/:userId/todos`: which operation failed. */
  readonly operation: string;
  /** Response headers, e.g. `retry-after` of a 429/503. */
  readonly headers: Headers;
  /** The parsed JSON body, or the text when it was not JSON. */
  readonly body: unknown;

  constructor(fields: {
    status: number;
    message: string;
    code: Code | undefined;
    details: ValidationIssue[] | undefined;
    requestId: string | undefined;
    operation: string;
    headers: Headers;
    body: unknown;
  }) {
    super(fields.message);
    this.name = "ApiError";
    this.status = fields.status;
    this.code = fields.code;
    this.details = fields.details;
    this.requestId = fields.requestId;
    this.operation = fields.operation;
    this.headers = fields.headers;
    this.body = fields.body;
  }
}

/**
 * No usable answer: the connection failed (`network`), the client's timeout passed (`timeout`), the
 * caller's signal aborted (`aborted`), or a success body did not match the contract (`invalid_response`).
 */
export class ApiRequestError extends Error {
  readonly reason: "network" | "timeout" | "aborted" | "invalid_response";
  readonly operation: string;
  readonly requestId: string | undefined;

  constructor(
    reason: ApiRequestError["reason"],
    operation: string,
    message: string,
    options: { cause?: unknown; requestId?: string | undefined } = {},
  ) {
    super(`${operation}: ${message}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ApiRequestError";
    this.reason = reason;
    this.operation = operation;
    this.requestId = options.requestId;
  }
}

function isIssueList(value: unknown): value is ValidationIssue[] {
  return (
    Array.isArray(value) &&
    value.every(
      (v) => typeof v === "object" && v !== null && typeof v.path === "string" && typeof v.message === "string",
    )
  );
}

function errorFrom<Code extends string>(response: Response, text: string, operation: string): ApiError<Code> {
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON (a proxy's HTML page, say): kept as text
  }
  const outer = typeof body === "object" && body !== null ? (body as Record<string, unknown>) : {};
  // OpenAI's envelope (the decider's /v1/decisions): `{error: {message, type, param, code}}`, read as ours.
  const openAI =
    typeof outer.error === "object" && outer.error !== null ? (outer.error as Record<string, unknown>) : undefined;
  const fields = openAI === undefined ? outer : { error: openAI.message, code: openAI.code };
  const param = openAI !== undefined && typeof openAI.param === "string" ? openAI.param : undefined;
  const details = isIssueList(outer.details)
    ? outer.details
    : param !== undefined && typeof openAI?.message === "string"
      ? [{ path: param, message: openAI.message }]
      : undefined;
  return new ApiError<Code>({
    status: response.status,
    message: typeof fields.error === "string" ? fields.error : `HTTP ${response.status} ${response.statusText}`.trim(),
    code: typeof fields.code === "string" ? (fields.code as Code) : undefined,
    details,
    requestId: response.headers.get("x-request-id") ?? undefined,
    operation,
    headers: response.headers,
    body,
  });
}

function buildUrl(base: URL, route: RouteContract, input: Record<string, unknown>): URL {
  const params = (input.params ?? {}) as Record<string, unknown>;
  let path = route.path;
  for (const name of pathParamNames(route.path)) {
    path = path.replace(`:${name}`, encodeURIComponent(String(params[name])));
  }
  const url = new URL(base.pathname.replace(/\/$/, "") + path, base);
  for (const [key, value] of Object.entries((input.query ?? {}) as Record<string, unknown>)) {
    if (value !== undefined) url.searchParams.set(key, String(value));
  }
  return url;
}

async function call(
  route: RouteContract,
  options: ClientOptions,
  input: Record<string, unknown> & CallOptions,
): Promise<unknown> {
  const operation = `${route.method.toUpperCase()} ${route.path}`;
  const base = new URL(options.baseUrl);
  const headers: Record<string, string> = { accept: "application/json", ...options.headers, ...input.headers };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  if (route.body !== undefined) headers["content-type"] = "application/json";
  const timeoutMs = options.timeoutMs ?? DEFAULT_CLIENT_TIMEOUT_MS;
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = input.signal === undefined ? timeout : AbortSignal.any([input.signal, timeout]);

  let response: Response;
  let text: string;
  try {
    response = await (options.fetch ?? fetch)(buildUrl(base, route, input), {
      method: route.method.toUpperCase(),
      headers,
      ...(route.body !== undefined ? { body: JSON.stringify(input.body) } : {}),
      signal,
    });
    text = await response.text();
  } catch (err) {
    if (input.signal?.aborted) throw new ApiRequestError("aborted", operation, "aborted by the caller", { cause: err });
    if (timeout.aborted) {
      throw new ApiRequestError("timeout", operation, `no answer within ${timeoutMs} ms`, { cause: err });
    }
    const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message : String(err);
    throw new ApiRequestError("network", operation, `request failed: ${cause}`, { cause: err });
  }

  if (!response.ok) throw errorFrom(response, text, operation);
  const requestId = response.headers.get("x-request-id") ?? undefined;
  const schema = route.responses[response.status]?.schema;
  if (schema === undefined) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ApiRequestError("invalid_response", operation, `HTTP ${response.status} body is not JSON`, {
      cause: err,
      requestId,
    });
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    throw new ApiRequestError("invalid_response", operation, `HTTP ${response.status} body breaks the contract`, {
      cause: parsed.error,
      requestId,
    });
  }
  return parsed.data;
}

/** A client for any route list: one method per route. */
export function createClient<R extends RouteContracts>(routes: R, options: ClientOptions): Client<R> {
  const problems = routeListProblems(routes);
  if (problems.length > 0) throw new Error(`invalid route list: ${problems.join("; ")}`);
  new URL(options.baseUrl); // a bad address fails here, not at the first call
  return Object.fromEntries(
    Object.entries(routes).map(([name, route]) => [
      name,
      (input: Record<string, unknown> & CallOptions = {}) => call(route, options, input),
    ]),
  ) as Client<R>;
}
