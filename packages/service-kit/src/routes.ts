import {
  type ParsedBody,
  type ParsedParams,
  type ParsedQuery,
  type Reply,
  type RouteContract,
  type RouteContracts,
  routeListProblems,
} from "@localdecider/contracts";
import type { Request, RequestHandler, Response, Router } from "express";
import type { z } from "zod";
import type { AppError } from "./app-error";

/** What a handler gets: the request's parts parsed by the route's schemas, and Express's req/res. */
export interface HandlerContext<C extends RouteContract> {
  params: ParsedParams<C>;
  query: ParsedQuery<C>;
  body: ParsedBody<C>;
  req: Request;
  res: Response;
}

/**
 * Answers with one of the route's success statuses and its body (typed from the contract); failures are
 * thrown as AppError, as everywhere else.
 */
export type RouteHandler<C extends RouteContract> = (ctx: HandlerContext<C>) => Promise<Reply<C>> | Reply<C>;

/** One handler per route, by the route's name: a missing or extra one fails typecheck. */
export type RouteHandlers<R extends RouteContracts> = { [K in keyof R]: RouteHandler<R[K]> };

export type RequestPart = "params" | "query" | "body";

export interface RegisterRoutesOptions {
  /**
   * Runs first on every `auth: "bearer"` route (before the body is read, so an unauthenticated client
   * cannot make the service read one). Omitted: those routes are open, as the document then says.
   */
  authenticate?: RequestHandler | undefined;
  /** Reads the JSON body of routes that declare one; other routes never read a body. */
  jsonBody: RequestHandler;
  /** The service's error for a part that fails its schema (`value` is what arrived; `route` the route's contract). */
  invalid: (part: RequestPart, error: z.ZodError, value: unknown, route: RouteContract) => AppError;
  /**
   * Checks a body before its schema sees it, throwing an AppError (the decider refuses bodies nested too
   * deep for zod's recursion here).
   */
  checkBody?: (body: unknown) => void;
  /**
   * The service's error for a method that no contract declares on a path that exists (`GET /v1/systemone`):
   * answered with it and an `Allow` header listing the path's methods, instead of the 404 an unknown path
   * gets. `allowed` is that list (`GET, HEAD, OPTIONS`). OPTIONS on such a path answers 204 with `Allow`.
   * Omitted: such requests fall through to the service's 404.
   */
  methodNotAllowed?: (method: string, allowed: string[]) => AppError;
}

/**
 * The `Allow` list of a path from the methods its contracts declare: HEAD beside GET (Express answers HEAD
 * from a GET route), and OPTIONS (answered by methodNotAllowedHandler or the CORS middleware).
 */
export function allowedMethods(methods: readonly string[]): string[] {
  const upper = methods.map((m) => m.toUpperCase());
  const all = new Set([...upper, ...(upper.includes("GET") ? ["HEAD"] : []), "OPTIONS"]);
  const order = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
  return [...all].sort((a, b) => order.indexOf(a) - order.indexOf(b));
}

/**
 * Registers one Express route per contract, in the list's order: [authenticate] -> [jsonBody] -> validate
 * params, query, body (in that order) -> handler -> `res.status(status).json(body)`. The route's path is
 * the contract's, so the metrics' route label is too. Throws at boot when the handlers do not match the
 * routes one to one or the route list is inconsistent (see routeListProblems).
 */
export function registerRoutes<R extends RouteContracts>(
  app: Router,
  routes: R,
  handlers: RouteHandlers<R>,
  options: RegisterRoutesOptions,
): void {
  const problems = routeListProblems(routes);
  const names = Object.keys(routes);
  for (const name of names) {
    if (typeof (handlers as Record<string, unknown>)[name] !== "function") problems.push(`${name}: no handler`);
  }
  for (const name of Object.keys(handlers)) {
    if (!names.includes(name)) problems.push(`${name}: a handler for a route that has no contract`);
  }
  if (problems.length > 0) throw new Error(`routes do not match their contracts: ${problems.join("; ")}`);

  for (const name of names) {
    const route = routes[name] as RouteContract;
    const handler = handlers[name] as unknown as RouteHandler<RouteContract>;
    const parse = (part: RequestPart, schema: z.ZodType | undefined, value: unknown): unknown => {
      if (schema === undefined) return undefined;
      const result = schema.safeParse(value);
      if (!result.success) throw options.invalid(part, result.error, value, route);
      return result.data;
    };
    const chain: RequestHandler[] = [];
    if (route.auth === "bearer" && options.authenticate !== undefined) chain.push(options.authenticate);
    if (route.body !== undefined) chain.push(options.jsonBody);
    chain.push(async (req, res) => {
      const params = parse("params", route.params, req.params);
      const query = parse("query", route.query, req.query);
      if (route.body !== undefined) options.checkBody?.(req.body);
      const body = parse("body", route.body, req.body);
      const reply = await handler({ params, query, body, req, res } as HandlerContext<RouteContract>);
      res.status(reply.status);
      if (reply.headers !== undefined) res.set(reply.headers);
      if (reply.body === undefined) res.end();
      else res.json(reply.body);
    });
    app[route.method](route.path, ...chain);
  }

  // After every route: a request that reached here matched a contract's path but none of its methods.
  const { methodNotAllowed } = options;
  if (methodNotAllowed === undefined) return;
  const methodsByPath = new Map<string, string[]>();
  for (const name of names) {
    const route = routes[name] as RouteContract;
    methodsByPath.set(route.path, [...(methodsByPath.get(route.path) ?? []), route.method]);
  }
  for (const [path, methods] of methodsByPath) {
    const allowed = allowedMethods(methods);
    // Named, so that a look at the app's routes can tell these catch-alls from the contracts' routes.
    const refuseMethod: RequestHandler = function methodNotAllowedHandler(req, res, next) {
      res.set("Allow", allowed.join(", "));
      if (req.method === "OPTIONS") {
        res.status(204).end();
        return;
      }
      next(methodNotAllowed(req.method, allowed));
    };
    app.all(path, refuseMethod);
  }
}
