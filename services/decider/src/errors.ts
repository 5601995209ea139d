import type { ValidationIssue } from "@localdecider/contracts";
import { DECIDER_ERROR_STATUS, type DeciderErrorCode } from "@localdecider/contracts/decider";
import { AppError } from "@localdecider/service-kit";

/** An AppError whose status is the one contracts assign to its code, so the two can never disagree. */
export function deciderError(
  code: DeciderErrorCode,
  message: string,
  options: {
    details?: ValidationIssue[];
    headers?: Record<string, string>;
    cause?: unknown;
    logLevel?: "error" | "warn" | "info" | "debug";
  } = {},
): AppError {
  return new AppError(DECIDER_ERROR_STATUS[code], message, { code, ...options });
}
