import type { ProbeRequest } from "../decide/probe";
import type { Alternative } from "../decide/readout";

/** Tokens the backend evaluated (prompt tokens it did not take from its cache) and decoded. */
export interface ProbeUsage {
  input: number;
  output: number;
}

/** What a model server brought back for one probe: the top alternatives at the probed position. */
export interface AlternativesResult {
  /** The alternatives reported at the probed position; null when the backend sent no logprobs. */
  alternatives: Alternative[] | null;
  /** The one token the backend emitted there (at temperature 0, its most likely), if it sent one. */
  emitted: Alternative | null;
  usage: ProbeUsage;
  scores?: undefined;
}

/** What an engine that sees the whole distribution brought back: every outcome scored exactly. */
export interface ScoredResult {
  /**
   * Natural-log probability of each of the probe's `continuations`, in order (a sum over its tokens), up to
   * one constant common to all of them (renormalising over the outcomes cancels it).
   */
  scores: number[];
  usage: ProbeUsage;
}

export type ProbeResult = AlternativesResult | ScoredResult;

/** What the decider needs from a model: what follows a prefilled answer. */
export interface Upstream {
  /**
   * Most outcomes one probe can tell apart (Limits.outcomesPerPart): a server's top-20 alternatives allow
   * 20; an engine that scores each outcome has no limit. Unset means 20.
   */
  readonly outcomesPerPart?: number;
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
