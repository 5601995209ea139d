import type { ErrorRequestHandler, Request, RequestHandler } from "express";
import { AppError } from "./app-error";
import type { Logger } from "./logger";

/** An error as loggable fields: winston's own `errors` format only unpacks an Error passed as the message. */
export function describeError(err: unknown): { error: string; stack?: string } {
  if (err instanceof Error) return { error: err.message, ...(err.stack === undefined ? {} : { stack: err.stack }) };
  return { error: String(err) };
}

/** The errors body-parser raises, by their `type`. */
export function bodyParserErrorType(err: unknown): string | undefined {
  if (typeof err === "object" && err !== null && "type" in err && typeof err.type === "string") {
    return err.type;
  }
  return undefined;
}

export interface ErrorHandlerOptions {
  logger: Logger;
  /**
   * Turns errors the service knows (body-parser's, its storage's, its upstream's) into an AppError.
   * Return undefined to fall through to the default mapping.
   */
  map?: (err: unknown) => AppError | undefined;
  /** The body of the generic 500; the todos seed fixes it to "Internal server error". */
  internalMessage?: string;
  internalCode?: string;
  /**
   * How an error is answered on a route that speaks another API's error dialect (the decider's `/v1/decisions`
   * answers in OpenAI's envelope): its status, body and extra headers, or undefined for the service's own
   * (`AppError.toBody()`). The one place a route's error shape is chosen; it sees every error answered,
   * the generic 500 included, after it was logged as usual.
   */
  present?: (
    error: AppError,
    req: Request,
  ) => { status: number; body: unknown; headers?: Record<string, string> } | undefined;
}

/** Default mapping of body-parser's own failures, before the service's `map` has its say. */
function mapBodyParserError(err: unknown): AppError | undefined {
  switch (bodyParserErrorType(err)) {
    case "entity.too.large":
      return new AppError(413, "Request body too large", { code: "payload_too_large" });
    case "entity.parse.failed":
      return new AppError(400, "Request body is not valid JSON", { code: "invalid_json" });
    case "encoding.unsupported":
    case "charset.unsupported":
      return new AppError(415, "Unsupported request body encoding", { code: "unsupported_media_type" });
    case "request.aborted":
      return new AppError(400, "Request body was not fully received", { code: "request_aborted" });
    default:
      return undefined;
  }
}

/**
 * The one error middleware: an AppError is answered as it says; anything else is logged with its stack
 * and answered with a generic 500, never with the stack or message.
 */
export function errorHandler(options: ErrorHandlerOptions): ErrorRequestHandler {
  const { logger } = options;
  const send = (res: Parameters<ErrorRequestHandler>[2], req: Request, error: AppError): void => {
    const shaped = options.present?.(error, req);
    if (shaped === undefined) {
      res.status(error.status).set(error.headers).json(error.toBody());
      return;
    }
    res
      .status(shaped.status)
      .set({ ...error.headers, ...shaped.headers })
      .json(shaped.body);
  };
  return (err, req, res, next) => {
    if (res.headersSent) {
      next(err);
      return;
    }
    const known = err instanceof AppError ? err : (options.map?.(err) ?? mapBodyParserError(err));
    if (known) {
      logger.log(known.logLevel, "request failed", {
        requestId: res.locals.requestId,
        status: known.status,
        code: known.code,
        error: known.message,
        cause: known.cause instanceof Error ? known.cause.message : undefined,
      });
      send(res, req, known);
      return;
    }
    logger.error("unhandled error", { requestId: res.locals.requestId, ...describeError(err) });
    const internal = new AppError(500, options.internalMessage ?? "Internal server error", {
      ...(options.internalCode === undefined ? {} : { code: options.internalCode }),
    });
    send(res, req, internal);
  };
}

/** A JSON 404 for routes nobody serves, in the service's error shape. */
export function notFoundHandler(body: () => AppError): RequestHandler {
  return (_req, _res, next) => next(body());
}
