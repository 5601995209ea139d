import type { RequestHandler } from "express";
import type { Logger } from "./logger";

/** One `http`-level line per finished request: method, route, status and duration (never the body). */
export function accessLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.on("finish", () => {
      logger.http("request", {
        requestId: res.locals.requestId,
        method: req.method,
        path: req.originalUrl.split("?")[0],
        status: res.statusCode,
        durationMs: Number(process.hrtime.bigint() - started) / 1e6,
      });
    });
    next();
  };
}
