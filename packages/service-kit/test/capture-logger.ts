import { Writable } from "node:stream";
import winston from "winston";
import { createLogger } from "../src";

/** The logger as the services build it (debug level), each line it writes handed to `keep` instead of printed. */
function loggerInto(keep: (text: string) => void): winston.Logger {
  const logger = createLogger({ service: "test", level: "debug" });
  logger.clear();
  logger.add(
    new winston.transports.Stream({
      stream: new Writable({
        write(chunk, _enc, cb) {
          keep(String(chunk));
          cb();
        },
      }),
    }),
  );
  return logger;
}

/** A capturing logger whose lines are kept parsed, for asserting on fields. */
export function captureLogger(): { logger: winston.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  return { logger: loggerInto((text) => lines.push(JSON.parse(text))), lines };
}

/** A capturing logger whose lines are kept as written (text), for asserting on what reaches the log verbatim. */
export function captureLines(): { logger: winston.Logger; lines: string[] } {
  const lines: string[] = [];
  return { logger: loggerInto((text) => lines.push(text)), lines };
}
