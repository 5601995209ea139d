/**
 * A model server's `Retry-After`, read once and bounded (review four, items 3 and 4). A server's header is
 * data from outside: `0`, a date in the past, `1000000000`, `Fri, 31 Dec 9999 …` or 4,000 characters of junk
 * all reached the decider, and made one request send 11,832 calls in 20 s, or reached the client as they were.
 */
export const RETRY_AFTER_LIMITS = {
  /** The least a busy server is given before it is asked again, whatever it said. */
  minWaitMs: 1000,
  /** The most the decider waits on one 429 (a longer ask is answered 503 to the client at once). */
  maxWaitMs: 60_000,
  /** The most seconds the client is told to wait (the server may ask for more: it is not told beyond this). */
  maxToClientSeconds: 300,
  /** Waits on 429s one request may make, over all its calls; past it the 429 stands (503 upstream_busy). */
  maxWaitsPerRequest: 5,
  /** A header longer than this is not read (an HTTP date is 29 characters). */
  maxLength: 64,
};

/**
 * Seconds a Retry-After asks for: delay-seconds or an HTTP date (RFC 9110, 10.2.3), from `now`; undefined when
 * absent, unreadable or too long to be either. A date in the past asks for 0.
 */
export function retryAfterSeconds(value: string | undefined, now = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (text === "" || text.length > RETRY_AFTER_LIMITS.maxLength) return undefined;
  if (/^\d+$/.test(text)) return Number(text);
  // Date.parse reads many shapes; only one that names a weekday or month and a time is taken as a date.
  if (!/[a-z]{3}/i.test(text) || !/\d{1,2}:\d{2}/.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - now) / 1000);
}

/**
 * How long to wait before the `attempt`-th retry (0-based) of a call the server answered 429: what it asked,
 * but never under an exponential floor (1 s, 2 s, 4 s, …) with up to 25 % jitter (so callers refused together
 * do not return together), and never over maxWaitMs.
 */
export function backoffMs(retryAfter: string | undefined, attempt: number, random: () => number = Math.random): number {
  const { minWaitMs, maxWaitMs } = RETRY_AFTER_LIMITS;
  const floor = minWaitMs * 2 ** Math.min(attempt, 16);
  const asked = (retryAfterSeconds(retryAfter) ?? 0) * 1000;
  const jittered = Math.max(floor, asked) * (1 + 0.25 * random());
  return Math.min(maxWaitMs, Math.round(jittered));
}

/** The Retry-After the client is told for a server's 429 or 503: whole seconds, 1 to maxToClientSeconds. */
export function clientRetryAfter(retryAfter: string | undefined): string {
  const seconds = retryAfterSeconds(retryAfter) ?? 1;
  return String(Math.min(RETRY_AFTER_LIMITS.maxToClientSeconds, Math.max(1, Math.ceil(seconds))));
}
