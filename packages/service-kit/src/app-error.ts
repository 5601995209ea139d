import { clipStrings, ECHO_LIMITS } from "./clip";

export interface AppErrorOptions {
  /** Stable machine-readable name, sent as `code` in the body when set. */
  code?: string;
  /** Per-field problems or other structured detail, sent as `details` when set. */
  details?: unknown[];
  /** Extra response headers, e.g. `Retry-After` or `WWW-Authenticate`. */
  headers?: Record<string, string>;
  /**
   * Level of the error middleware's log line. Default: `error` for 5xx, `info` otherwise. Set it where the
   * status and the fault disagree, e.g. a 500 that a contract fixes for what is really a client mistake, or
   * `debug` for an answer that is expected and polled for (a readiness probe's 503 while a model loads).
   */
  logLevel?: "error" | "warn" | "info" | "debug";
  cause?: unknown;
}

/**
 * The one error type handlers throw. Its message is written to the client as is, so it must never hold
 * secrets or internals; anything else thrown becomes a logged 500 with a generic message. Whatever it
 * repeats of a request is bounded here, for every error of both services: the message and each string in
 * `details` to ECHO_LIMITS.text characters (a message that quotes request text clips it to far less itself).
 */
export class AppError extends Error {
  readonly status: number;
  readonly code: string | undefined;
  readonly details: unknown[] | undefined;
  readonly headers: Record<string, string>;
  readonly logLevel: "error" | "warn" | "info" | "debug";

  constructor(status: number, message: string, options: AppErrorOptions = {}) {
    super(clipStrings(message, ECHO_LIMITS.text), options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "AppError";
    this.status = status;
    this.code = options.code;
    this.details = options.details === undefined ? undefined : clipStrings(options.details, ECHO_LIMITS.text);
    this.headers = options.headers ?? {};
    this.logLevel = options.logLevel ?? (status >= 500 ? "error" : "info");
  }

  toBody(): { error: string; code?: string; details?: unknown[] } {
    return {
      error: this.message,
      ...(this.code === undefined ? {} : { code: this.code }),
      ...(this.details === undefined ? {} : { details: this.details }),
    };
  }
}
