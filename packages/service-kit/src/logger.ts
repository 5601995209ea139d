import winston from "winston";
import { z } from "zod";
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

export const LOG_FORMATS = ["json", "pretty"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** LOG_FORMAT in a service's config schema: `json` (the default, for log collectors) or `pretty`. */
export function logFormatSchema() {
  return z.enum(LOG_FORMATS, { error: 'must be "json" or "pretty"' }).default("json");
}

const COLOURS: Record<string, string> = { error: "31", warn: "33", info: "32", http: "36", verbose: "35", debug: "34" };

/**
 * One line a record for a person at a terminal: time, level, message, then the other fields as key=value
 * (strings bare when they hold no space, else JSON), the request id last; a stack on the lines below.
 * Coloured levels only when `colour` (stdout is a terminal and NO_COLOR is unset).
 */
export function prettyLine(info: Record<string, unknown>, colour: boolean): string {
  const { level, message, timestamp, service: _service, requestId, stack, ...rest } = info;
  const time = typeof timestamp === "string" ? timestamp.slice(11, 23) : "";
  const name = String(level).padEnd(5);
  const shown = colour && COLOURS[String(level)] !== undefined ? `\x1b[${COLOURS[String(level)]}m${name}\x1b[0m` : name;
  const fields = Object.entries(rest)
    .filter(([key, value]) => value !== undefined && typeof key === "string")
    .map(([key, value]) => {
      const text = typeof value === "string" && /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
      return `${key}=${text}`;
    });
  if (requestId !== undefined) fields.push(`requestId=${String(requestId)}`);
  const line = [time, shown, String(message), ...fields].filter((part) => part !== "").join(" ");
  return typeof stack === "string" ? `${line}\n${stack}` : line;
}

/**
 * One JSON object a line on stdout (`format: "json"`, the default), each carrying the request id of the
 * request it belongs to; or, for development, one readable line each (`"pretty"`, prettyLine), same fields.
 */
export function createLogger(options: { service: string; level: LogLevel; format?: LogFormat }): Logger {
  const silent = options.level === "silent";
  const colour = process.stdout.isTTY === true && process.env.NO_COLOR === undefined;
  return winston.createLogger({
    level: silent ? "error" : options.level,
    defaultMeta: { service: options.service },
    format: winston.format.combine(
      withRequestId(),
      winston.format.timestamp(),
      winston.format.errors({ stack: true }),
      clipLongText(),
      options.format === "pretty"
        ? winston.format.printf((info) => prettyLine(info as Record<string, unknown>, colour))
        : winston.format.json(),
    ),
    transports: [new winston.transports.Console({ silent })],
  });
}
