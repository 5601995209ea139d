import { Counter, createMetrics, Gauge, Histogram, type Metrics } from "@localdecider/service-kit";
import type { UpstreamLimiter } from "./limits/limiter";
import type { DeciderObserver, UpstreamOutcome } from "./observer";
import type { ServerPool } from "./upstream/pool";

/**
 * Upstream call latency buckets in seconds: a small CPU model answers in tenths of a second to tens of
 * seconds; the top bucket is past the default LOCALDECIDER_TIMEOUT.
 */
const UPSTREAM_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120];

export interface DeciderMetrics {
  /** The kit's registry, HTTP middleware and /metrics handler. */
  metrics: Metrics;
  /** Feeds the decider's hooks into the series below. */
  observer: DeciderObserver;
}

/**
 * The decider's Prometheus series on a registry of its own (one per app, so test apps never share one).
 * The queue gauges are read from the limiter when scraped rather than kept in step with it.
 */
export function createDeciderMetrics(
  limiter: Pick<UpstreamLimiter, "counts" | "serverCounts">,
  pool: Pick<ServerPool, "states" | "labelOf">,
): DeciderMetrics {
  const metrics = createMetrics({ service: "decider" });
  const registers = [metrics.registry];
  new Gauge({
    name: "decider_queue_length",
    help: "Upstream calls admitted and waiting for a free slot (counts toward LOCALDECIDER_MAX_QUEUE).",
    registers,
    collect() {
      this.set(limiter.counts().queued);
    },
  });
  new Gauge({
    name: "decider_upstream_inflight",
    help: "Upstream calls running now on each model server (at most LOCALDECIDER_MAX_INFLIGHT per server).",
    labelNames: ["server"] as const,
    registers,
    collect() {
      const counts = limiter.serverCounts();
      for (const { id, label } of pool.states()) this.set({ server: label }, counts.get(id)?.running ?? 0);
    },
  });
  new Gauge({
    name: "decider_upstream_in_rotation",
    help: "1 while a model server takes new requests, 0 while it is out of rotation (failed; probed to rejoin).",
    labelNames: ["server"] as const,
    registers,
    collect() {
      for (const { label, inRotation } of pool.states()) this.set({ server: label }, inRotation ? 1 : 0);
    },
  });
  const upstreamDuration = new Histogram({
    name: "decider_upstream_call_duration_seconds",
    help: "Duration of each call to a model server, by server and outcome (ok, malformed, error, timeout, aborted).",
    labelNames: ["server", "outcome"] as const,
    buckets: UPSTREAM_BUCKETS,
    registers,
  });
  const tokens = new Counter({
    name: "decider_tokens_total",
    help: "Tokens the model server reported, by direction (input = prompt, output = completion).",
    labelNames: ["direction"] as const,
    registers,
  });
  const malformedRetries = new Counter({
    name: "decider_malformed_retries_total",
    help: "Upstream calls repeated because the model's output did not parse.",
    registers,
  });
  const absentOutcomes = new Counter({
    name: "decider_absent_outcomes_total",
    help: "Outcomes that none of the backend's reported alternatives could begin, estimated as half of the smallest reported probability.",
    registers,
  });
  const queueRejected = new Counter({
    name: "decider_queue_rejected_total",
    help: "Requests refused with 429 because their upstream calls would overflow the queue.",
    registers,
  });
  // Every outcome shows from the first scrape, at 0, so rate() and alerts work before the first failure.
  for (const { label: server } of pool.states()) {
    for (const outcome of ["ok", "malformed", "error", "timeout", "aborted"] satisfies UpstreamOutcome[]) {
      upstreamDuration.zero({ server, outcome });
    }
  }
  tokens.inc({ direction: "input" }, 0);
  tokens.inc({ direction: "output" }, 0);

  const observer: DeciderObserver = {
    upstreamCall: (durationMs, outcome, server) =>
      upstreamDuration.observe({ server: pool.labelOf(server), outcome }, durationMs / 1000),
    tokens: (input, output) => {
      tokens.inc({ direction: "input" }, input);
      tokens.inc({ direction: "output" }, output);
    },
    malformedRetry: () => malformedRetries.inc(),
    queueRejected: () => queueRejected.inc(),
    absentOutcomes: (count) => absentOutcomes.inc(count),
  };
  return { metrics, observer };
}

/**
 * Calls every observer in turn: the metrics one (`first`, an object holding every hook), plus any the caller
 * passed (tests record with one). The hooks are `first`'s own, so a new hook needs no change here.
 */
export function fanOut(first: DeciderObserver, ...rest: DeciderObserver[]): DeciderObserver {
  const all = [first, ...rest];
  const call =
    (hook: string) =>
    (...args: unknown[]) => {
      for (const o of all) (o[hook as keyof DeciderObserver] as (...a: unknown[]) => void).apply(o, args);
    };
  return Object.fromEntries(Object.keys(first).map((hook) => [hook, call(hook)])) as unknown as DeciderObserver;
}
