import Bottleneck from "bottleneck";

export interface LimiterCounts {
  /** Upstream calls admitted but not yet running (queued in Bottleneck or still to be scheduled). */
  queued: number;
  /** Upstream calls running now. */
  running: number;
}

/** The upstream calls one admitted request may make; release() returns what it did not use. */
export interface Reservation {
  run<T>(fn: () => Promise<T>, signal: AbortSignal): Promise<T>;
  /**
   * Runs one extra call with no other upstream call running beside it (it waits for every slot, ahead of
   * the queue): a server whose slots share one context may fail calls that only fit alone.
   */
  runAlone<T>(fn: () => Promise<T>, signal: AbortSignal): Promise<T>;
  release(): void;
}

export class AbortedError extends Error {
  constructor() {
    super("The request was cancelled");
    this.name = "AbortedError";
  }
}

/** The shared limits (Redis) could not be asked: nothing more is admitted until they answer again. */
export class LimiterUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "LimiterUnavailableError";
  }
}

/**
 * Limits shared with other replicas (redis-limits.ts, when LOCALDECIDER_REDIS_URL is set). The in-process
 * limiter keeps its own queue, fairness and lone calls, and asks these, atomically, for the counts that
 * span replicas: calls queued (MAX_QUEUE) and calls running on the model server (MAX_INFLIGHT). Each
 * method throws LimiterUnavailableError when the store cannot be asked; none ever admits on a failure.
 */
export interface SharedLimits {
  /** Reserves `calls` queued calls across replicas; otherwise the calls queued or running there now. */
  reserve(calls: number): Promise<{ ok: true } | { ok: false; ahead: number }>;
  /**
   * Waits for `weight` running slots across replicas, turning one of this request's queued calls into a
   * running one when `fromQueue`. `alone` (a lone call) holds off every other replica's calls while it waits.
   */
  acquire(weight: number, options: { fromQueue: boolean; alone: boolean; signal: AbortSignal }): Promise<void>;
  /** Frees `weight` running slots. */
  release(weight: number): void;
  /** Returns queued calls that will not run. */
  unreserve(calls: number): void;
  /** Undefined when the shared limits answer; otherwise why not (for /ready). */
  unavailable(): Promise<string | undefined>;
  close(): Promise<void>;
}

/**
 * Bottleneck 2.19.5's in-process datastore yields to the event loop with `setTimeout(0)` around each of
 * its operations, and Node gives a 0 ms timer a 1 ms floor: about 5 ms per scheduled call (measured with
 * 300 sequential no-op jobs). Yielding with setImmediate keeps the same "let other work run first"
 * semantics without the floor: 1.4 ms per call. `yieldLoop` is an internal of a pinned release that has not
 * changed since 2019; if it is ever missing, Bottleneck simply keeps its own. The limiter tests check that
 * concurrency and queueing still hold.
 */
interface BottleneckJob {
  doRun(): void;
  doExecute(limiter: unknown, clearGlobalState: unknown, run: unknown, free: unknown): void;
  options: { expiration?: number | null };
}

type Internal = (...args: unknown[]) => unknown;

interface BottleneckInternals {
  _run?: (index: string, job: BottleneckJob, wait: number) => void;
  _clearGlobalState: Internal;
  _free: Internal;
  _scheduled: Record<string, { timeout: unknown; expiration: unknown; job: BottleneckJob }>;
  _limiter: unknown;
}

/**
 * The same timer floor once more where Bottleneck starts a job it has admitted: `_run` waits
 * `setTimeout(wait)` even when `wait` is 0 (no `minTime`, no reservoir: always, here), another 1 ms per
 * upstream call. For wait 0 this starts the job on the next turn of the event loop instead; anything
 * else (a job with an expiration, a positive wait) goes through Bottleneck's own `_run`. Same pinned
 * release and fallback as above.
 */
function runWithoutTimerFloor(limiter: Bottleneck): void {
  const internals = limiter as unknown as BottleneckInternals;
  const original = internals._run;
  if (typeof original !== "function") return;
  internals._run = function (this: BottleneckInternals, index, job, wait) {
    if (wait > 0 || job.options.expiration != null) return original.call(this, index, job, wait);
    // As Bottleneck's own _run, but with setImmediate for the timer (which nothing clears while we run).
    job.doRun();
    const clearGlobalState = this._clearGlobalState.bind(this, index);
    const run = (this._run as Internal).bind(this, index, job);
    const free = this._free.bind(this, index, job);
    this._scheduled[index] = { timeout: undefined, expiration: undefined, job };
    setImmediate(() => job.doExecute(this._limiter, clearGlobalState, run, free));
  };
}

function yieldWithoutTimerFloor(limiter: Bottleneck): void {
  const store = (limiter as unknown as { _store?: { yieldLoop?: unknown } })._store;
  if (store !== undefined && typeof store.yieldLoop === "function") {
    store.yieldLoop = () => new Promise<void>((resolve) => setImmediate(resolve));
  }
}

/**
 * At most `maxInflight` upstream calls at once (Bottleneck) and at most `maxQueue` waiting. Admission is
 * by reservation: a request reserves every call it will make before any is queued, so one whose calls do
 * not all fit is refused whole. Queueing is fair between requests: each has at most `maxInflight` calls in
 * Bottleneck's FIFO at a time. Bottleneck never retries; the malformed-output retries run inside a job.
 */
export class UpstreamLimiter {
  private readonly bottleneck: Bottleneck;
  private reserved = 0;
  private running = 0;

  constructor(
    private readonly maxInflight: number,
    readonly maxQueue: number,
    /** Unset: this process's limits alone (no Redis, nothing else loaded). */
    private readonly shared?: SharedLimits,
  ) {
    this.bottleneck = new Bottleneck({ maxConcurrent: maxInflight });
    yieldWithoutTimerFloor(this.bottleneck);
    runWithoutTimerFloor(this.bottleneck);
  }

  /** Whether a request of this many calls could ever be admitted, even with an empty queue. */
  fits(calls: number): boolean {
    return calls <= this.maxQueue;
  }

  counts(): LimiterCounts {
    return { queued: this.reserved, running: this.running };
  }

  /** Undefined when this limiter can admit work; otherwise why not (the shared limits do not answer). */
  async unavailable(): Promise<string | undefined> {
    return this.shared?.unavailable();
  }

  /**
   * Reserves `calls` upstream calls, or says how many calls are queued or running ahead when they would
   * overflow the queue (here, or across replicas with shared limits). Throws LimiterUnavailableError when
   * the shared limits cannot be asked.
   */
  async tryReserve(calls: number): Promise<{ reservation: Reservation } | { ahead: number }> {
    const shared = this.shared;
    if (shared === undefined) {
      if (this.reserved + calls > this.maxQueue) return { ahead: this.reserved + this.running };
    } else {
      const answer = await shared.reserve(calls);
      if (!answer.ok) return { ahead: answer.ahead };
    }
    this.reserved += calls;
    let left = calls;
    const take = (): boolean => {
      if (left === 0) return false;
      left -= 1;
      this.reserved -= 1;
      return true;
    };
    const job =
      <T>(fn: () => Promise<T>, signal: AbortSignal, alone: boolean, onStart: () => boolean) =>
      async (): Promise<T> => {
        const fromQueue = onStart();
        const weight = alone ? this.maxInflight : 1;
        // A call whose client went away while it waited never reaches the upstream.
        if (signal.aborted) {
          if (fromQueue) shared?.unreserve(1);
          throw new AbortedError();
        }
        if (shared !== undefined) {
          // This process's slot is held meanwhile: its queue order stays Bottleneck's.
          try {
            await shared.acquire(weight, { fromQueue, alone, signal });
          } catch (err) {
            if (fromQueue) shared.unreserve(1);
            throw err;
          }
        }
        this.running += 1;
        try {
          return await fn();
        } finally {
          this.running -= 1;
          shared?.release(weight);
        }
      };
    // Fairness: at most `maxInflight` of this request's calls are in Bottleneck's FIFO at a time; the
    // rest wait here, in order. A request that arrives later so queues behind at most `maxInflight` calls
    // of each request already waiting, not behind all of a large request's calls.
    const waiting: (() => void)[] = [];
    let submitted = 0;
    const turn = (): Promise<void> => {
      if (submitted < this.maxInflight) {
        submitted += 1;
        return Promise.resolve();
      }
      return new Promise((resolve) => waiting.push(resolve));
    };
    const pass = () => {
      const next = waiting.shift();
      if (next === undefined) submitted -= 1;
      else next(); // the finished call's turn goes to the next one
    };
    const reservation: Reservation = {
      run: async <T>(fn: () => Promise<T>, signal: AbortSignal): Promise<T> => {
        if (signal.aborted) {
          if (take()) shared?.unreserve(1);
          throw new AbortedError();
        }
        await turn();
        try {
          // A call whose request ended while it waited for its turn does not queue behind other requests.
          if (signal.aborted) {
            if (take()) shared?.unreserve(1);
            throw new AbortedError();
          }
          return await this.bottleneck.schedule(job(fn, signal, false, take));
        } finally {
          pass();
        }
      },
      runAlone: <T>(fn: () => Promise<T>, signal: AbortSignal) => {
        if (signal.aborted) return Promise.reject(new AbortedError());
        // Weight = every slot, so Bottleneck starts it only when nothing else runs; priority 0 puts it
        // ahead of waiting calls (the default is 5), so it waits for the running ones only.
        return this.bottleneck.schedule(
          { weight: this.maxInflight, priority: 0 },
          job(fn, signal, true, () => false),
        );
      },
      release: () => {
        this.reserved -= left;
        if (left > 0) shared?.unreserve(left);
        left = 0;
      },
    };
    return { reservation };
  }

  /** Seconds a refused client should wait: the calls ahead drained at the observed pace, at least 1. */
  retryAfterSeconds(ahead: number, averageCallMs: number): number {
    return Math.max(1, Math.ceil((ahead * averageCallMs) / this.maxInflight / 1000));
  }

  async stop(): Promise<void> {
    await this.bottleneck.stop({ dropWaitingJobs: false });
    await this.shared?.close();
  }
}
