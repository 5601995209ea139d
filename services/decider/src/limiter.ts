import Bottleneck from "bottleneck";

export interface LimiterCounts {
  /** Upstream calls admitted but not yet running (queued in Bottleneck or still to be scheduled). */
  queued: number;
  /** Upstream calls running now. */
  running: number;
}

/** The server a process with one model server (or the embedded engine) runs every call on. */
export const ONLY_SERVER = "default";

/**
 * The upstream calls one admitted request may make, all on one model server (its prompt-prefix cache is
 * reused) until moveTo() sends the rest elsewhere; release() returns what it did not use.
 */
export interface Reservation {
  /** The server its next calls go to. */
  readonly server: string;
  /** Runs one call on the reservation's server, in that server's slots; `fn` is told which server. */
  run<T>(fn: (server: string) => Promise<T>, signal: AbortSignal): Promise<T>;
  /**
   * Runs one extra call with no other upstream call running beside it on that server (it waits for every
   * slot, ahead of the queue): a server whose slots share one context may fail calls that only fit alone.
   */
  runAlone<T>(fn: (server: string) => Promise<T>, signal: AbortSignal): Promise<T>;
  /** Sends the calls not yet started to `server` (failover); those waiting in the old server's queue follow. */
  moveTo(server: string): void;
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
  /**
   * Reserves `calls` queued calls across replicas, and when `start` is given turns up to `start.slots` of
   * them into running slots of that server at once if free (`started`: a request's first calls then need no
   * acquire); otherwise says how many calls are queued or running there now.
   */
  reserve(
    calls: number,
    start?: { server: string; slots: number },
  ): Promise<{ ok: true; started: number } | { ok: false; ahead: number }>;
  /**
   * Waits for `weight` running slots of `server` across replicas, turning one of this request's queued calls
   * into a running one when `fromQueue`. `alone` (a lone call) holds off every other replica's calls to that
   * server while it waits.
   */
  acquire(
    weight: number,
    options: { server: string; fromQueue: boolean; alone: boolean; signal: AbortSignal },
  ): Promise<void>;
  /** Frees `weight` running slots of `server`. */
  release(server: string, weight: number): void;
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

/** One model server's slots in this process. */
interface ServerSlots {
  bottleneck: Bottleneck;
  /** Calls reserved for this server and not yet started. */
  reserved: number;
  running: number;
}

/** A job that found its reservation moved to another server before it started: it is scheduled there. */
const MOVED: unique symbol = Symbol("moved");

/**
 * At most `maxInflight` upstream calls at once per model server (a Bottleneck each) and at most `maxQueue`
 * waiting in all. Admission is by reservation: a request reserves every call it will make before any is
 * queued, so one whose calls do not all fit is refused whole. Queueing is fair between requests: each has at
 * most `maxInflight` calls in a server's FIFO at a time. Bottleneck never retries; the malformed-output
 * retries run inside a job.
 */
export class UpstreamLimiter {
  private readonly servers = new Map<string, ServerSlots>();
  private reserved = 0;
  private running = 0;

  constructor(
    private readonly maxInflight: number,
    readonly maxQueue: number,
    /** Unset: this process's limits alone (no Redis, nothing else loaded). */
    private readonly shared?: SharedLimits,
  ) {}

  /** Whether a request of this many calls could ever be admitted, even with an empty queue. */
  fits(calls: number): boolean {
    return calls <= this.maxQueue;
  }

  counts(): LimiterCounts {
    return { queued: this.reserved, running: this.running };
  }

  /** The same counts for each server this process has sent calls to. */
  serverCounts(): Map<string, LimiterCounts> {
    return new Map([...this.servers].map(([server, s]) => [server, { queued: s.reserved, running: s.running }]));
  }

  /** This process's calls reserved for or running on `server`: what "least load" compares. */
  load(server: string): number {
    const slots = this.servers.get(server);
    return slots === undefined ? 0 : slots.reserved + slots.running;
  }

  /** Undefined when this limiter can admit work; otherwise why not (the shared limits do not answer). */
  async unavailable(): Promise<string | undefined> {
    return this.shared?.unavailable();
  }

  private slots(server: string): ServerSlots {
    let slots = this.servers.get(server);
    if (slots === undefined) {
      const bottleneck = new Bottleneck({ maxConcurrent: this.maxInflight });
      yieldWithoutTimerFloor(bottleneck);
      runWithoutTimerFloor(bottleneck);
      slots = { bottleneck, reserved: 0, running: 0 };
      this.servers.set(server, slots);
    }
    return slots;
  }

  /**
   * Reserves `calls` upstream calls on `server`, or says how many calls are queued or running ahead when they
   * would overflow the queue (here, or across replicas with shared limits). Throws LimiterUnavailableError
   * when the shared limits cannot be asked.
   */
  async tryReserve(calls: number, server = ONLY_SERVER): Promise<{ reservation: Reservation } | { ahead: number }> {
    const shared = this.shared;
    /** Of the calls not yet started, those granted a running slot at admission (on `server`). */
    let granted = 0;
    if (shared === undefined) {
      if (this.reserved + calls > this.maxQueue) return { ahead: this.reserved + this.running };
      this.slots(server).reserved += calls;
    } else {
      // The first calls take their slots in the same round trip when this process has them free here.
      const free = Math.min(calls, this.maxInflight - this.load(server));
      // Counted on the server at once, so that requests choosing a server meanwhile see this one's load.
      this.slots(server).reserved += calls;
      let answer: Awaited<ReturnType<SharedLimits["reserve"]>> | undefined;
      try {
        answer = await shared.reserve(calls, { server, slots: free });
      } finally {
        if (answer?.ok !== true) this.slots(server).reserved -= calls;
      }
      if (!answer.ok) return { ahead: answer.ahead };
      granted = answer.started;
    }
    let current = server;
    const grantedOn = server;
    this.reserved += calls;
    let left = calls;
    /**
     * With shared limits each call not yet started is counted in Redis as one of: granted (a running slot
     * on `grantedOn`), queued, or neither (`unqueued`: its grant was handed back when the request moved).
     */
    let unqueued = 0;
    /** Of the calls not yet started, those counted as queued in the shared limits. */
    const sharedQueued = () => left - granted - unqueued;
    const take = (): boolean => {
      if (left === 0) return false;
      left -= 1;
      this.reserved -= 1;
      this.slots(current).reserved -= 1;
      return true;
    };
    /** A call taken (take()) that will not run: hands its part back to the shared limits. */
    const drop = () => {
      if (shared === undefined) return;
      // take() has counted it off `left` already: it was one of the queued ones if any was left before.
      if (sharedQueued() + 1 > 0) shared.unreserve(1);
      else if (unqueued > 0) unqueued -= 1;
      else {
        granted -= 1;
        shared.release(grantedOn, 1);
      }
    };
    /** A call taken (take()) that starts on `on`: whether it holds its slot already, or how to ask for one. */
    const start = (on: string): "granted" | "queued" | "unqueued" => {
      if (granted > 0 && on === grantedOn) {
        granted -= 1;
        return "granted";
      }
      if (sharedQueued() + 1 > 0) return "queued";
      unqueued -= 1;
      return "unqueued";
    };
    const job =
      <T>(on: string, fn: (server: string) => Promise<T>, signal: AbortSignal, alone: boolean, fromQueue: boolean) =>
      async (): Promise<T | typeof MOVED> => {
        if (on !== current) return MOVED;
        const queued = fromQueue && take();
        const weight = alone ? this.maxInflight : 1;
        // A call whose client went away while it waited never reaches the upstream.
        if (signal.aborted) {
          if (queued) drop();
          throw new AbortedError();
        }
        if (shared !== undefined) {
          const holds = queued ? start(on) : "unqueued";
          // This process's slot is held meanwhile: its queue order stays Bottleneck's.
          if (holds !== "granted") {
            try {
              await shared.acquire(weight, { server: on, fromQueue: holds === "queued", alone, signal });
            } catch (err) {
              if (holds === "queued") shared.unreserve(1);
              throw err;
            }
          }
        }
        const slots = this.slots(on);
        this.running += 1;
        slots.running += 1;
        try {
          return await fn(on);
        } finally {
          this.running -= 1;
          slots.running -= 1;
          shared?.release(on, weight);
        }
      };
    /** Schedules on the reservation's server; a job that finds it moved is scheduled again on the new one. */
    const schedule = async <T>(fn: (server: string) => Promise<T>, signal: AbortSignal, alone: boolean): Promise<T> => {
      for (;;) {
        const on = current;
        // Weight = every slot, so Bottleneck starts a lone call only when nothing else runs; priority 0
        // puts it ahead of waiting calls (the default is 5), so it waits for the running ones only.
        const options = alone ? { weight: this.maxInflight, priority: 0 } : {};
        const result = await this.slots(on).bottleneck.schedule(options, job(on, fn, signal, alone, !alone));
        if (result !== MOVED) return result;
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
      get server() {
        return current;
      },
      run: async <T>(fn: (server: string) => Promise<T>, signal: AbortSignal): Promise<T> => {
        if (signal.aborted) {
          if (take()) drop();
          throw new AbortedError();
        }
        await turn();
        try {
          // A call whose request ended while it waited for its turn does not queue behind other requests.
          if (signal.aborted) {
            if (take()) drop();
            throw new AbortedError();
          }
          return await schedule(fn, signal, false);
        } finally {
          pass();
        }
      },
      runAlone: <T>(fn: (server: string) => Promise<T>, signal: AbortSignal) => {
        if (signal.aborted) return Promise.reject(new AbortedError());
        return schedule(fn, signal, true);
      },
      moveTo: (to: string) => {
        if (to === current) return;
        this.slots(current).reserved -= left;
        this.slots(to).reserved += left;
        current = to;
        // Slots granted on the old server are handed back; those calls ask for slots on the new one.
        if (granted > 0) shared?.release(grantedOn, granted);
        unqueued += granted;
        granted = 0;
      },
      release: () => {
        this.reserved -= left;
        this.slots(current).reserved -= left;
        const queued = sharedQueued();
        if (queued > 0) shared?.unreserve(queued);
        if (granted > 0) shared?.release(grantedOn, granted);
        left = 0;
        granted = 0;
        unqueued = 0;
      },
    };
    return { reservation };
  }

  /** Seconds a refused client should wait: the calls ahead drained at the observed pace, at least 1. */
  retryAfterSeconds(ahead: number, averageCallMs: number, servers = 1): number {
    return Math.max(1, Math.ceil((ahead * averageCallMs) / (this.maxInflight * servers) / 1000));
  }

  async stop(): Promise<void> {
    await Promise.all([...this.servers.values()].map((s) => s.bottleneck.stop({ dropWaitingJobs: false })));
    await this.shared?.close();
  }
}
