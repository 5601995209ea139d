import winston from "winston";
import { clipStrings } from "./clip";
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

/**
 * Every string of a line clipped to ECHO_LIMITS.text characters, however deep in its fields (a question's
 * name, a model server's error text, a stack): what a request holds cannot make a log line long.
 * The fields' own objects are never changed (clipStrings copies what it clips).
 */
const clipLongText = winston.format((info) => {
  const fields = info as unknown as Record<string, unknown>;
  for (const key of Object.keys(fields)) {
    const value = fields[key];
    const clipped = clipStrings(value);
    if (clipped !== value) fields[key] = clipped;
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
      clipLongText(),
      winston.format.json(),
    ),
    transports: [new winston.transports.Console({ silent })],
  });
}
