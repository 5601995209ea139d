/** The limiter's ports: what the decider asks of it, and what it asks of limits shared across replicas. */

export interface LimiterCounts {
  /** Upstream calls admitted but not yet running (their request waits for a slot, or has not reached them). */
  queued: number;
  /** Upstream calls running now. */
  running: number;
}

/**
 * One of a model server's MAX_INFLIGHT slots, held by one request for as long as it runs there. `slot` is
 * the slot's number (0 .. MAX_INFLIGHT-1), unique on that server across replicas while held: llama-server
 * keeps a prompt cache per slot, so every call of a request names the same slot (`id_slot`) and the
 * server reads the request's prompt once; the embedded engine lends the sequence of that number.
 */
export interface SlotLease {
  readonly server: string;
  /** The slot's number; -1 when the shared limits found no number free (the server then chooses a slot). */
  readonly slot: number;
  /**
   * Runs one upstream call of the request inside the lease, answering `parts` of the reserved calls (1 unless
   * the upstream answers several parts in one call): counted as running (and no longer queued) while it runs.
   * Parts beyond the reservation's count (a retry) are counted as running only.
   */
  call<T>(fn: () => Promise<T>, parts?: number): Promise<T>;
}

export class AbortedError extends Error {
  constructor() {
    super("The request was cancelled");
    this.name = "AbortedError";
  }
}

/**
 * Why the shared limits do not answer: `message` names no address (for anyone), `detail` names the store's
 * address and what failed (for the log and for callers holding the API key).
 */
export interface Unavailable {
  message: string;
  detail: string;
}

/**
 * The shared limits (Redis) could not be asked: nothing more is admitted until they answer again. Its message
 * is a client's: it names no address (the log has it).
 */
export class LimiterUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "LimiterUnavailableError";
  }
}

/**
 * Limits shared with other replicas (redis-limits.ts, when LOCALDECIDER_REDIS_URL is set). The in-process
 * limiter keeps its own queue and lone calls, and asks these, atomically, for what spans replicas: calls
 * queued (MAX_QUEUE) and slots held on each model server (MAX_INFLIGHT), with each slot's number. Each
 * method that takes throws LimiterUnavailableError when the store cannot be asked; none ever admits on a
 * failure.
 */
export interface SharedLimits {
  /**
   * Reserves `calls` queued calls across replicas and, when `start` is given, one slot of that server at
   * once if one is free across replicas (`slot`: its number; the request then needs no acquire); otherwise
   * says how many calls are queued or running now.
   */
  reserve(
    calls: number,
    start?: { server: string },
  ): Promise<{ ok: true; slot: number | undefined } | { ok: false; ahead: number }>;
  /**
   * Waits for a slot of `server` across replicas and returns its number. `alone` waits for every slot of the
   * server (a lone call) and holds off every other replica's requests to it while it waits.
   */
  acquire(options: { server: string; alone: boolean; signal: AbortSignal }): Promise<number>;
  /**
   * Frees the slot numbered `slot` of `server` (or, for a lone hold, every slot) and, in the same step,
   * returns `unreserve` queued calls.
   */
  release(server: string, slot: number | "alone", unreserve: number): void;
  /** Returns queued calls that will not run. */
  unreserve(calls: number): void;
  /** Undefined when the shared limits answer; otherwise why not (for /ready). */
  unavailable(): Promise<Unavailable | undefined>;
  close(): Promise<void>;
}
