export interface AppErrorOptions {
  /** Stable machine-readable name, sent as `code` in the body when set. */
  code?: string;
  /** Per-field problems or other structured detail, sent as `details` when set. */
  details?: unknown[];
  /** Extra response headers, e.g. `Retry-After` or `WWW-Authenticate`. */
  headers?: Record<string, string>;
  cause?: unknown;
}

/**
 * The one error type handlers throw. Its message is written to the client as is, so it must never hold
 * secrets or internals; anything else thrown becomes a logged 500 with a generic message.
 */
export class AppError extends Error {
  readonly status: number;
  readonly code: string | undefined;
  readonly details: unknown[] | undefined;
  readonly headers: Record<string, string>;

  constructor(status: number, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "AppError";
    this.status = status;
    this.code = options.code;
    this.details = options.details;
    this.headers = options.headers ?? {};
  }

  toBody(): { error: string; code?: string; details?: unknown[] } {
    return {
      error: this.message,
      ...(this.code === undefined ? {} : { code: this.code }),
      ...(this.details === undefined ? {} : { details: this.details }),
    };
  }
}
