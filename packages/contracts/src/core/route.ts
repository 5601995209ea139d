import type { z } from "zod";

/**
 * One endpoint as data: method, path, the zod schemas of its parameters, query and body, its responses per
 * status, and whether it wants the service's bearer credentials. The services register their handlers from
 * these (service-kit's registerRoutes), document them (buildOpenApiDocument) and the clients call them
 * (createClient): one list per service, nothing written twice.
 */
export type HttpMethod = "get" | "post" | "put" | "patch" | "delete";

export interface ResponseContract {
  description: string;
  /** JSON body; omit for an empty body. */
  schema?: z.ZodType;
  headers?: Record<string, { description: string }>;
}

export interface RouteContract {
  method: HttpMethod;
  /** Express-style path: `/users/:userId/todos`; every `:name` is a key of `params`. */
  path: string;
  summary: string;
  description?: string;
  tags?: string[];
  /** Path parameters, as strings in; required whenever the path names one. */
  params?: z.ZodObject;
  /** Query parameters, as strings in (an array when repeated). */
  query?: z.ZodObject;
  /** JSON request body. */
  body?: z.ZodType;
  /**
   * `bearer`: the route wants the service's credentials when the service has them configured (the
   * decider's LOCALDECIDER_API_KEY, the todos' TODOS_AUTH=jwt); `none`: always open.
   */
  auth: "bearer" | "none";
  /** Keyed by status. Sign-in failures (401/403) come from the service's auth, not from here. */
  responses: Responses;
}

/** A route's responses, keyed by status. */
export type Responses = Record<number, ResponseContract>;

/** A service's endpoints by operation name: the name is the OpenAPI operationId and the client's method. */
export type RouteContracts = Record<string, RouteContract>;

export type SuccessStatus = 200 | 201 | 202 | 203 | 204;

type Schema<C, K extends "params" | "query" | "body"> = C extends { [P in K]: infer S extends z.ZodType }
  ? S
  : undefined;

/** What a handler gets after validation (zod's output types), `undefined` for a part the route has none of. */
export type ParsedParams<C> = Schema<C, "params"> extends z.ZodType ? z.output<Schema<C, "params">> : undefined;
export type ParsedQuery<C> = Schema<C, "query"> extends z.ZodType ? z.output<Schema<C, "query">> : undefined;
export type ParsedBody<C> = Schema<C, "body"> extends z.ZodType ? z.output<Schema<C, "body">> : undefined;

type ResponsesOf<C> = C extends { responses: infer R } ? R : never;
type SuccessKeys<C> = keyof ResponsesOf<C> & SuccessStatus;
type BodyOf<R, IO extends "input" | "output"> = R extends { schema: infer S extends z.ZodType }
  ? IO extends "input"
    ? z.input<S>
    : z.output<S>
  : undefined;

/** What a handler returns: one of the route's success statuses with its body (and extra headers). */
export type Reply<C> = {
  [S in SuccessKeys<C>]: { status: S; body: BodyOf<ResponsesOf<C>[S], "input">; headers?: Record<string, string> };
}[SuccessKeys<C>];

/** What a client call resolves to: the success body, parsed by its schema. */
export type SuccessBody<C> = { [S in SuccessKeys<C>]: BodyOf<ResponsesOf<C>[S], "output"> }[SuccessKeys<C>];

/** `/users/:userId/todos` -> `/users/{userId}/todos`. */
export function toOpenApiPath(expressPath: string): string {
  return expressPath.replace(/:([A-Za-z0-9_]+)/g, "{$1}");
}

/** The `:name` parameters of an Express-style path, in order. */
export function pathParamNames(expressPath: string): string[] {
  return [...expressPath.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1] as string);
}

/**
 * The mistakes a route list can hold that the types cannot catch: two routes on one method and path, a
 * path parameter without a schema, a schema key the path does not name. Services and clients check at
 * start; an empty list means none.
 */
export function routeListProblems(routes: RouteContracts): string[] {
  const problems: string[] = [];
  const seen = new Map<string, string>();
  for (const [name, route] of Object.entries(routes)) {
    const key = `${route.method.toUpperCase()} ${route.path}`;
    const other = seen.get(key);
    if (other !== undefined) problems.push(`${name}: ${key} is already ${other}`);
    seen.set(key, name);
    const inPath = pathParamNames(route.path);
    const inSchema = Object.keys(route.params?.shape ?? {});
    for (const param of inPath) {
      if (!inSchema.includes(param)) problems.push(`${name}: path parameter :${param} has no schema in params`);
    }
    for (const param of inSchema) {
      if (!inPath.includes(param)) problems.push(`${name}: params.${param} is not in the path ${route.path}`);
    }
  }
  return problems;
}

/**
 * A router's error responses, all with its one error body: `const error = errorResponses(TodosErrorBody)`,
 * then `error("No such item")` or `error("Busy", { "Retry-After": { description: "..." } })`.
 */
export function errorResponses<S extends z.ZodType>(body: S) {
  return (description: string, headers?: ResponseContract["headers"]): ResponseContract & { schema: S } => ({
    description,
    schema: body,
    ...(headers === undefined ? {} : { headers }),
  });
}

/**
 * The responses a router's routes share, declared once and merged by defineRoutes into each route they apply
 * to (ts-rest's `commonResponses`, scoped by what gives them). A route's own response for a status wins.
 * Only the responses every such route gives unconditionally belong here: those that depend on the service's
 * configuration (its sign-in, its Host check) are added to the OpenAPI document by the service, not here.
 */
export interface CommonResponses {
  /**
   * Every route that declares a JSON body: the refusals of the body reader, which registerRoutes runs on
   * exactly those routes (too large, an unreadable encoding, not JSON), and of the body's schema.
   */
  withBody?: Responses;
}

type NoResponses = Record<never, never>;
type Merged<Own, Common> = Omit<Common, keyof Own> & Own;
type WithCommon<C, Body> = C extends { body: z.ZodType; responses: infer Own }
  ? Omit<C, "responses"> & { responses: Merged<Own, Body> }
  : C;

/** A route list with its router's common responses merged in, as defineRoutes returns it. */
export type DefinedRoutes<R extends RouteContracts, C extends CommonResponses> = {
  [K in keyof R]: WithCommon<R[K], C["withBody"] extends Responses ? C["withBody"] : NoResponses>;
};

/**
 * A service's route list, its common responses declared once: each route gets those that apply to it
 * (see CommonResponses) under its own. The list keeps its literal types, as `as const` would.
 */
export function defineRoutes<const R extends RouteContracts, const C extends CommonResponses = NoResponses>(
  routes: R,
  common?: C,
): DefinedRoutes<R, C> {
  const withBody = common?.withBody;
  return Object.fromEntries(
    Object.entries(routes).map(([name, route]) => [
      name,
      route.body === undefined || withBody === undefined
        ? route
        : { ...route, responses: { ...withBody, ...route.responses } },
    ]),
  ) as DefinedRoutes<R, C>;
}
