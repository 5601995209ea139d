import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import express, { type RequestHandler } from "express";

interface RequestContext {
  requestId: string;
}

const storage = new AsyncLocalStorage<RequestContext>();

/** The id of the request being handled, for log lines written far from the HTTP layer. */
export function currentRequestId(): string | undefined {
  return storage.getStore()?.requestId;
}

// A client-supplied id is echoed into headers and logs, so only plain, short tokens are trusted.
const ACCEPTABLE_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

/**
 * Accepts `x-request-id` from the client or creates one, echoes it in every response (and in any extra
 * headers named, e.g. the TypeSafe SDK's `x-typesafe-request-id`), and makes it the context of
 * everything that runs for the request.
 */
export function requestId(options: { echoHeaders?: readonly string[] } = {}): RequestHandler {
  const headers = ["x-request-id", ...(options.echoHeaders ?? [])];
  return (req, res, next) => {
    const incoming = req.get("x-request-id");
    const id = incoming !== undefined && ACCEPTABLE_ID.test(incoming) ? incoming : randomUUID();
    res.locals.requestId = id;
    for (const header of headers) res.setHeader(header, id);
    storage.run({ requestId: id }, next);
  };
}

/**
 * `express.json` that keeps the request context: body-parser finishes in a stream callback whose async
 * context is the socket's, not the request's, so without this every later log line loses its id.
 */
export function jsonBody(options: { limit: string | number }): RequestHandler {
  const parse = express.json({ limit: options.limit, strict: false });
  return (req, res, next) => {
    const context = storage.getStore();
    parse(req, res, (err?: unknown) => {
      if (context) storage.run(context, () => next(err));
      else next(err);
    });
  };
}
