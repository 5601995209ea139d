import winston from "winston";
import { currentRequestId } from "./request-context";

export type Logger = winston.Logger;

export const LOG_LEVELS = ["error", "warn", "info", "http", "verbose", "debug", "silly", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const withRequestId = winston.format((info) => {
  if (info.requestId === undefined) {
    const id = currentRequestId();
    if (id !== undefined) info.requestId = id;
  }
  return info;
});

/** One JSON object a line on stdout, each carrying the request id of the request it belongs to. */
export function createLogger(options: { service: string; level: LogLevel }): Logger {
  const silent = options.level === "silent";
  return winston.createLogger({
    level: silent ? "error" : options.level,
    defaultMeta: { service: options.service },
    format: winston.format.combine(
      withRequestId(),
      winston.format.timestamp(),
      winston.format.errors({ stack: true }),
      winston.format.json(),
    ),
    transports: [new winston.transports.Console({ silent })],
  });
}
