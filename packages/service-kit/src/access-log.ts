import type { RequestHandler } from "express";
import type { Logger } from "./logger";

/** One `http`-level line per finished request: method, route, status and duration (never the body). */
export function accessLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.on("finish", () => {
      // winston runs its whole format chain (request id, timestamp, JSON stringify) before its transports
      // drop a line below their level: ~3.5 µs and a few objects per request measured, for nothing when the
      // level is info (the default) or silent. Asked at finish time, so a level changed at run time applies.
      if (!logger.isLevelEnabled("http")) return;
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
