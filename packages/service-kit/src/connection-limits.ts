import { z } from "zod";

/**
 * How long a client may take to send a request, how long an idle kept-alive connection stays open, and how
 * many connections a service holds at once. Node's own defaults let a client trickle a body for 300 s
 * (requestTimeout) and its headers for 60 s, checked only every 30 s, and accept any number of connections:
 * enough for a handful of slow clients to hold a service's sockets and memory.
 *
 * With these defaults a client trickling its headers is answered 408 and closed within
 * headersTimeout + connectionsCheckingInterval = 25 s, and one trickling its body within
 * requestTimeout + connectionsCheckingInterval = 35 s. The timeouts cover receiving the request only: a
 * decision that takes minutes to answer is not cut by them.
 */
export interface ConnectionLimits {
  /** Milliseconds from a connection's first byte (or from its opening) until its request headers are in. */
  headersTimeoutMs: number;
  /** Milliseconds until the whole request (headers and body) is in; at least headersTimeoutMs. */
  requestTimeoutMs: number;
  /** Milliseconds an idle kept-alive connection waits for its next request before it is closed. */
  keepAliveTimeoutMs: number;
  /** Connections held at once; one past it is closed as it opens, before a byte is read. */
  maxConnections: number;
  /** How often (milliseconds) the two request timeouts are checked: the slack on each. */
  connectionsCheckingIntervalMs: number;
}

/** The documented defaults (READMEs, .env.example), and the bounds a configured value must keep. */
export const CONNECTION_LIMITS: Record<keyof ConnectionLimits, { default: number; min: number; max: number }> = {
  headersTimeoutMs: { default: 20_000, min: 1_000, max: 3_600_000 },
  requestTimeoutMs: { default: 30_000, min: 1_000, max: 3_600_000 },
  keepAliveTimeoutMs: { default: 5_000, min: 1_000, max: 600_000 },
  maxConnections: { default: 1_024, min: 1, max: 1_000_000 },
  connectionsCheckingIntervalMs: { default: 5_000, min: 100, max: 60_000 },
};

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  headersTimeoutMs: CONNECTION_LIMITS.headersTimeoutMs.default,
  requestTimeoutMs: CONNECTION_LIMITS.requestTimeoutMs.default,
  keepAliveTimeoutMs: CONNECTION_LIMITS.keepAliveTimeoutMs.default,
  maxConnections: CONNECTION_LIMITS.maxConnections.default,
  connectionsCheckingIntervalMs: CONNECTION_LIMITS.connectionsCheckingIntervalMs.default,
};

/** One connection limit as a service's config variable: a whole number within its bounds, its default if unset. */
export function connectionLimit(name: keyof ConnectionLimits) {
  const { default: fallback, min, max } = CONNECTION_LIMITS[name];
  return z.coerce.number().int().min(min).max(max).default(fallback);
}

/** Why these limits cannot be used together (Node refuses headers that may take longer than the request). */
export function connectionLimitsProblem(limits: Pick<ConnectionLimits, "headersTimeoutMs" | "requestTimeoutMs">) {
  return limits.headersTimeoutMs > limits.requestTimeoutMs
    ? `must not exceed the request timeout (${limits.requestTimeoutMs} ms): the headers are part of the request`
    : undefined;
}
