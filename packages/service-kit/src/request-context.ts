import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import express, { type RequestHandler } from "express";

interface RequestContext {
  requestId: string;
}

const storage = new AsyncLocalStorage<RequestContext>();

/**
 * The id of the request being handled, for log lines written far from the HTTP layer. Undefined outside a
 * request, and always when the service's requestId middleware runs without `asyncContext`.
 */
export function currentRequestId(): string | undefined {
  return storage.getStore()?.requestId;
}

// A client-supplied id is echoed into headers and logs, so only plain, short tokens are trusted.
const ACCEPTABLE_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

export interface RequestIdOptions {
  /** Extra response headers that echo the id too, e.g. the TypeSafe SDK's `x-typesafe-request-id`. */
  echoHeaders?: readonly string[];
  /**
   * Make the id the async context of everything that runs for the request, so log lines written away from
   * the HTTP layer (a retry deep in a use case) carry it without being handed it. Default false: the id is
   * on `res.locals.requestId`, which the access log and the error middleware read.
   *
   * Off by default because of its price on Node 20: the first `AsyncLocalStorage.run` installs promise hooks
   * for the whole process, from then on every promise (a Prisma query makes dozens) runs them. Measured on
   * the todos list route: ~10-12% of the server's CPU per request (services/todos/README.md, "Performance").
   * A service turns it on only when it logs per request below its handlers, as the decider does.
   */
  asyncContext?: boolean;
}

/**
 * Accepts `x-request-id` from the client or creates one, echoes it in every response (and in any extra
 * headers named) and keeps it on `res.locals.requestId`; with `asyncContext`, also makes it the context of
 * everything that runs for the request (`currentRequestId`, and so every log line).
 */
export function requestId(options: RequestIdOptions = {}): RequestHandler {
  const headers = ["x-request-id", ...(options.echoHeaders ?? [])];
  const asyncContext = options.asyncContext ?? false;
  return (req, res, next) => {
    const incoming = req.get("x-request-id");
    const id = incoming !== undefined && ACCEPTABLE_ID.test(incoming) ? incoming : randomUUID();
    res.locals.requestId = id;
    for (const header of headers) res.setHeader(header, id);
    if (asyncContext) storage.run({ requestId: id }, next);
    else next();
  };
}

/**
 * `express.json` that keeps the request context: body-parser finishes in a stream callback whose async
 * context is the socket's, not the request's, so without this every later log line loses its id. Without
 * a context (requestId without `asyncContext`) it is express.json as it is.
 */
export function jsonBody(options: { limit: string | number }): RequestHandler {
  const parse = express.json({ limit: options.limit, strict: false });
  return (req, res, next) => {
    const context = storage.getStore();
    if (context === undefined) {
      parse(req, res, next);
      return;
    }
    parse(req, res, (err?: unknown) => storage.run(context, () => next(err)));
  };
}
