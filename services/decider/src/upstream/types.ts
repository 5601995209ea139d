import type { ProbeRequest } from "../decide/probe";
import type { Alternative } from "../decide/readout";

/** What one probe brought back. */
export interface ProbeResult {
  /** The alternatives reported at the probed position; null when the backend sent no logprobs. */
  alternatives: Alternative[] | null;
  /** The one token the backend emitted there (at temperature 0, its most likely), if it sent one. */
  emitted: Alternative | null;
  /** Tokens the backend evaluated (prompt tokens it did not take from its cache) and decoded. */
  usage: { input: number; output: number };
}

/** What the decider needs from a model: the next-token alternatives after a prefilled answer. */
export interface Upstream {
  probe(request: ProbeRequest, signal: AbortSignal): Promise<ProbeResult>;
}

/** How an upstream call failed, in terms the HTTP layer maps to statuses. */
export type UpstreamFailure =
  | { kind: "timeout" }
  | { kind: "aborted" }
  | { kind: "unreachable"; message: string }
  /** A 200 whose body lacks what every answer needs (no choice). */
  | { kind: "malformed"; message: string }
  | { kind: "http"; status: number; message: string; retryAfter?: string };

export class UpstreamError extends Error {
  constructor(readonly failure: UpstreamFailure) {
    super(failure.kind === "http" ? `upstream HTTP ${failure.status}: ${failure.message}` : `upstream ${failure.kind}`);
    this.name = "UpstreamError";
  }
}

/**
 * The most specific message in an error's cause chain (fetch says "fetch failed" and keeps the real reason,
 * e.g. `connect ECONNREFUSED 127.0.0.1:8081`, in `cause`). Duck-typed: errors from another realm (undici's
 * under Jest) are not `instanceof Error` here.
 */
export function rootCauseMessage(err: unknown): string {
  let current: unknown = err;
  let message = String(err);
  for (let depth = 0; depth < 5 && typeof current === "object" && current !== null; depth++) {
    const { message: m, cause } = current as { message?: unknown; cause?: unknown };
    if (typeof m === "string" && m !== "") message = m;
    current = cause;
  }
  return message;
}
