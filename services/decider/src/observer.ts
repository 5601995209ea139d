/** How one upstream call ended. */
export type UpstreamOutcome = "ok" | "malformed" | "error" | "timeout" | "aborted";

/**
 * The decider's hooks: the app's Prometheus series implement them (metrics.ts), and tests record with their
 * own. Every method is called synchronously on the request path, so implementations must be cheap and must
 * not throw.
 */
export interface DeciderObserver {
  /** One call to `server` (its address without credentials, or `embedded`) ended as `outcome`. */
  upstreamCall(durationMs: number, outcome: UpstreamOutcome, server: string): void;
  tokens(input: number, output: number): void;
  malformedRetry(): void;
  queueRejected(): void;
  /** Outcomes of one answer that no reported alternative could begin (estimated from the bound). */
  absentOutcomes(count: number): void;
}
