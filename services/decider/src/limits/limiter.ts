import Bottleneck from "bottleneck";
import { AbortedError, type LimiterCounts, type SharedLimits, type SlotLease, type Unavailable } from "./types";

/** One model server's slots in this process. */
interface ServerSlots {
  /** Holds at most MAX_INFLIGHT requests on this server at once (one job per request's stay there). */
  bottleneck: Bottleneck;
  /** Calls reserved for this server and not yet started. */
  reserved: number;
  /** Calls running on this server now. */
  running: number;
  /** Holds of requests scheduled here and not yet finished (waiting in Bottleneck or holding a slot). */
  holds: number;
  /** The Bottleneck job at the tail of this server's queue, waiting for the next request (see Standby). */
  standby: Standby | undefined;
  /**
   * Without shared limits: the slot numbers free in this process, each with the affinity of the request
   * that held it last (a request about the same prompt prefix finds its cache there).
   */
  free: { slot: number; affinity: string | undefined }[];
}

/** A hold that found its reservation moved to another server before it started: it is scheduled there. */
const MOVED: unique symbol = Symbol("moved");
/** A hold whose request was cancelled while it waited for its slot. */
const ABORTED: unique symbol = Symbol("aborted");

/**
 * A Bottleneck job scheduled before the request that will use it arrives. Bottleneck yields to the event
 * loop with 0 ms timers (a 1 ms floor each) between receiving, registering and starting a job: about 4 ms
 * before a job starts on an idle server. Each server keeps one standby at the tail of its queue; a request
 * hands it its hold and a new one is scheduled behind it, so the request finds its job through those
 * yields already, or started. It is a job like any other, scheduled in arrival order (requests queue in
 * Bottleneck in the order they came, each behind the standby it took): it holds one of Bottleneck's
 * MAX_INFLIGHT places while it waits for work, which it only has when nothing else waits for one (anything
 * that comes after it takes it). A lone hold dismisses it.
 */
interface Standby {
  /** Hands it the work to run in its place, or nothing (dismissed: it frees its place at once). */
  give(work: (() => Promise<unknown>) | undefined): void;
}

/** What a hold may say of itself. */
export interface HoldOptions {
  /**
   * Wait for every slot of the server and run with none other beside it: a server whose slots share one
   * context may fail calls that only fit alone. Ahead of the queue, behind the holds running now.
   */
  alone?: boolean;
  /** Requests with the same affinity (their prompt's shared prefix) prefer the slot that held it last. */
  affinity?: string;
}

/**
 * At most `maxInflight` requests at once on each model server, each holding one of its slots for as long as
 * it runs there (a Bottleneck per server, one job per request's stay), and at most `maxQueue` calls admitted
 * in all. Admission is by reservation: a request reserves every call it will make before any runs, so one
 * whose calls do not all fit is refused whole. A request runs its calls in its slot, so a server that keeps
 * a prompt cache per slot (llama.cpp) reads each request's prompt once. Requests wait for a slot in
 * arrival order. Bottleneck never retries; the decider's retries run inside the hold.
 */
export class UpstreamLimiter {
  private readonly servers = new Map<string, ServerSlots>();
  /** Calls of the requests admitted and not yet finished (what MAX_QUEUE bounds, as across replicas). */
  private admitted = 0;
  /** Calls admitted and not yet started, on every server. */
  reserved = 0;
  /** Calls running now, on every server. */
  running = 0;
  /** The mean upstream call of late (an exponential average), for Retry-After. */
  private averageCallMs = 1000;

  constructor(
    readonly maxInflight: number,
    readonly maxQueue: number,
    /** Unset: this process's limits alone (no Redis, nothing else loaded). */
    readonly shared?: SharedLimits,
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
  async unavailable(): Promise<Unavailable | undefined> {
    return this.shared?.unavailable();
  }

  /** @internal The slots of `server` in this process (made on first use). */
  slotsOf(server: string): ServerSlots {
    let slots = this.servers.get(server);
    if (slots === undefined) {
      slots = {
        bottleneck: new Bottleneck({ maxConcurrent: this.maxInflight }),
        reserved: 0,
        running: 0,
        holds: 0,
        standby: undefined,
        free: Array.from({ length: this.maxInflight }, (_, slot) => ({ slot, affinity: undefined })),
      };
      this.servers.set(server, slots);
      this.standBy(slots);
    }
    return slots;
  }

  /** Schedules a standby job for `slots` unless one is there (or the limiter stopped). */
  standBy(slots: ServerSlots): void {
    if (slots.standby !== undefined || this.stopped) return;
    let give: Standby["give"] = () => undefined;
    const work = new Promise<(() => Promise<unknown>) | undefined>((resolve) => {
      give = resolve;
    });
    slots.standby = { give };
    slots.bottleneck.schedule(async () => (await work)?.()).catch(() => undefined);
  }

  /**
   * The standby at the tail of `slots`' queue, taken (a new one is scheduled behind it), or undefined once the
   * limiter has stopped (the caller then schedules on Bottleneck, which refuses).
   */
  takeStandby(slots: ServerSlots): Standby | undefined {
    this.standBy(slots);
    const standby = slots.standby;
    slots.standby = undefined;
    this.standBy(slots);
    return standby;
  }

  /** Frees the place a standby holds or waits for (a lone hold needs every place). */
  dismissStandby(slots: ServerSlots): void {
    slots.standby?.give(undefined);
    slots.standby = undefined;
  }

  /**
   * Reserves `calls` upstream calls on `server`, or says how many calls are queued or running ahead when they
   * would overflow the queue (here, or across replicas with shared limits). Throws LimiterUnavailableError
   * when the shared limits cannot be asked, and AbortedError when `signal` aborted before the reservation was
   * made or while the shared limits were asked (what they granted is handed back at once).
   */
  async tryReserve(
    calls: number,
    server: string,
    signal?: AbortSignal,
  ): Promise<{ reservation: Reservation } | { ahead: number }> {
    if (signal?.aborted) throw new AbortedError();
    const shared = this.shared;
    const slots = this.slotsOf(server);
    if (shared === undefined) {
      if (this.admitted + calls > this.maxQueue) return { ahead: this.admitted };
      this.admitted += calls;
      this.countReserved(server, calls);
      return { reservation: new Reservation(this, server, calls, undefined) };
    }
    // The request takes its slot in the same round trip when this process has one free for it here.
    const start = slots.holds < this.maxInflight ? { server } : undefined;
    // Counted on the server at once, so that requests choosing a server meanwhile see this one's load.
    this.countReserved(server, calls);
    let answer: Awaited<ReturnType<SharedLimits["reserve"]>> | undefined;
    try {
      answer = await shared.reserve(calls, start);
    } finally {
      if (answer?.ok !== true) this.countReserved(server, -calls);
    }
    if (!answer.ok) return { ahead: answer.ahead };
    const granted = answer.slot === undefined ? undefined : { server, slot: answer.slot };
    const reservation = new Reservation(this, server, calls, granted);
    if (signal?.aborted) {
      // The client went away during the round trip: nothing of it stays reserved.
      reservation.release();
      throw new AbortedError();
    }
    return { reservation };
  }

  /** @internal Calls reserved and not yet started change by `delta`, in all and on `server`. */
  countReserved(server: string, delta: number): void {
    this.reserved += delta;
    this.slotsOf(server).reserved += delta;
  }

  /** @internal A request admitted in this process alone has finished: its calls leave MAX_QUEUE. */
  finished(calls: number): void {
    if (this.shared === undefined) this.admitted -= calls;
  }

  /** @internal A call of `ms` ended well: the pace Retry-After is computed from. */
  observeCall(ms: number): void {
    this.averageCallMs = 0.8 * this.averageCallMs + 0.2 * ms;
  }

  /** Seconds a refused client should wait: the calls ahead drained at the observed pace, at least 1. */
  retryAfterSeconds(ahead: number, servers = 1): number {
    return Math.max(1, Math.ceil((ahead * this.averageCallMs) / (this.maxInflight * servers) / 1000));
  }

  private stopped = false;

  async stop(): Promise<void> {
    this.stopped = true;
    for (const slots of this.servers.values()) this.dismissStandby(slots);
    await Promise.all([...this.servers.values()].map((s) => s.bottleneck.stop({ dropWaitingJobs: false })));
    await this.shared?.close();
  }
}

/**
 * The upstream calls one admitted request may make, all on one model server (its prompt is cached there)
 * until moveTo() sends the rest elsewhere. The request runs its calls inside hold(), in one slot of that
 * server; release() returns what it did not use. With shared limits, the request's calls stay counted as
 * queued across replicas until its last slot is freed (one round trip frees both).
 */
export class Reservation {
  private current: string;
  /** Calls not yet started. */
  private left: number;
  private released = false;
  /** Calls still counted as queued in the shared limits. */
  private sharedQueued: number;
  /** A slot the shared limits granted at admission, not yet taken by a hold. */
  private granted: { server: string; slot: number } | undefined;

  constructor(
    private readonly limiter: UpstreamLimiter,
    server: string,
    private readonly calls: number,
    granted: { server: string; slot: number } | undefined,
  ) {
    this.current = server;
    this.left = calls;
    this.sharedQueued = limiter.shared === undefined ? 0 : calls;
    this.granted = granted;
  }

  /** The server its next calls go to. */
  get server(): string {
    return this.current;
  }

  /**
   * Runs `work` holding one slot of the reservation's server: it waits for a slot in arrival order (a lone
   * hold for every slot, ahead of the queue), then `work` makes its calls through the lease. The result is
   * returned as soon as `work` is done; Bottleneck's own bookkeeping of the freed slot follows. When `signal`
   * aborts while the hold still waits for its slot, it throws AbortedError at once (the caller then releases
   * the reservation): Bottleneck has no way to take a job out of its queue, so the job stays there and, when
   * its turn comes, ends without taking a slot. Once `work` runs, it stops on the signal itself.
   */
  async hold<T>(work: (lease: SlotLease) => Promise<T>, signal: AbortSignal, options: HoldOptions = {}): Promise<T> {
    const alone = options.alone === true;
    for (;;) {
      if (signal.aborted) throw new AbortedError();
      const on = this.current;
      const slots = this.limiter.slotsOf(on);
      const done = new Deferred<T>();
      let started = false;
      // The job stays in Bottleneck's queue after its client went away: it lets go of the work (and of the
      // request it holds: its body, its prompts) then, not when its turn comes.
      let task: typeof work | undefined = work;
      const job = async (): Promise<typeof MOVED | undefined> => {
        if (on !== this.current) return MOVED;
        // A hold given up while it waited (see below) takes no slot when its turn comes.
        if (task === undefined || (signal.aborted && !started)) {
          done.reject(new AbortedError());
          return undefined;
        }
        started = true;
        try {
          done.resolve(await this.inSlot(on, slots, task, signal, alone, options.affinity));
        } catch (err) {
          done.reject(err);
        }
        return undefined;
      };
      slots.holds += 1;
      let scheduled: Promise<typeof MOVED | undefined>;
      if (alone) {
        // Weight = every place, so Bottleneck starts a lone hold only when nothing else runs; priority 0
        // puts it ahead of waiting holds, so it waits for the running ones only.
        this.limiter.dismissStandby(slots);
        scheduled = slots.bottleneck.schedule({ weight: this.limiter.maxInflight, priority: 0 }, job);
      } else {
        const standby = this.limiter.takeStandby(slots);
        if (standby === undefined) {
          scheduled = slots.bottleneck.schedule(job);
        } else {
          const ran = new Deferred<typeof MOVED | undefined>();
          standby.give(() => job().then(ran.resolve));
          scheduled = ran.promise;
        }
      }
      const gaveUp = new Deferred<typeof ABORTED>();
      const onAbort = () => {
        if (started) return;
        task = undefined;
        gaveUp.resolve(ABORTED);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      let outcome: Awaited<typeof scheduled> | { value: T } | typeof ABORTED;
      try {
        outcome = await Promise.race([
          done.promise.then((value) => ({ value })),
          scheduled.finally(() => {
            slots.holds -= 1;
            // After a lone hold (which dismissed it), the next request finds a standby again.
            if (alone) this.limiter.standBy(slots);
          }),
          gaveUp.promise,
        ]);
      } finally {
        signal.removeEventListener("abort", onAbort);
      }
      if (outcome === ABORTED) throw new AbortedError();
      if (outcome === MOVED) continue;
      if (outcome !== undefined) return outcome.value;
      return done.promise;
    }
  }

  /** Takes a slot (this process's, or the shared limits'), runs `work` in it, frees it. */
  private async inSlot<T>(
    on: string,
    slots: ServerSlots,
    work: (lease: SlotLease) => Promise<T>,
    signal: AbortSignal,
    alone: boolean,
    affinity: string | undefined,
  ): Promise<T> {
    // A request whose client went away while it waited never reaches the upstream.
    if (signal.aborted) throw new AbortedError();
    const shared = this.limiter.shared;
    let slot: number;
    let local: ServerSlots["free"][number] | undefined;
    if (shared === undefined) {
      // Bottleneck runs a lone hold only with every slot free, so it needs no number of its own.
      local = alone ? undefined : takeFree(slots.free, affinity);
      slot = local?.slot ?? 0;
    } else if (!alone && this.granted?.server === on) {
      slot = this.granted.slot;
      this.granted = undefined;
    } else {
      this.returnGrant();
      slot = await shared.acquire({ server: on, alone, signal });
    }
    try {
      return await work(new Lease(this.limiter, this, on, slot));
    } finally {
      if (local !== undefined) slots.free.push({ slot, affinity });
      if (shared !== undefined) {
        // The request's last slot also hands back its queued calls, in the same round trip.
        const unreserve = this.left === 0 ? this.sharedQueued : 0;
        this.sharedQueued -= unreserve;
        shared.release(on, alone ? "alone" : slot, unreserve);
      }
    }
  }

  /**
   * @internal `parts` reserved calls of this reservation start (see SlotLease.call): taken off what is
   * reserved, never below nothing (a retry was not reserved).
   */
  take(parts: number): void {
    const taken = Math.min(parts, this.left);
    this.left -= taken;
    this.limiter.countReserved(this.current, -taken);
  }

  /** Sends the calls not yet started to `server` (failover); a hold waiting on the old server follows. */
  moveTo(server: string): void {
    if (server === this.current) return;
    this.limiter.countReserved(this.current, -this.left);
    this.limiter.countReserved(server, this.left);
    this.current = server;
    this.returnGrant();
  }

  /** The request is done: returns its place in the queue, its calls not started, a slot granted and not taken. */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.limiter.finished(this.calls);
    this.limiter.countReserved(this.current, -this.left);
    this.left = 0;
    const shared = this.limiter.shared;
    if (shared === undefined) return;
    if (this.granted !== undefined) {
      shared.release(this.granted.server, this.granted.slot, this.sharedQueued);
      this.granted = undefined;
    } else if (this.sharedQueued > 0) {
      shared.unreserve(this.sharedQueued);
    }
    this.sharedQueued = 0;
  }

  /** A slot granted at admission that this request will not use (it moved, or runs alone): freed. */
  private returnGrant(): void {
    if (this.granted === undefined) return;
    this.limiter.shared?.release(this.granted.server, this.granted.slot, 0);
    this.granted = undefined;
  }
}

/** A request's hold of one slot: its calls are counted as they run, and timed for Retry-After. */
class Lease implements SlotLease {
  constructor(
    private readonly limiter: UpstreamLimiter,
    private readonly reservation: Reservation,
    readonly server: string,
    readonly slot: number,
  ) {}

  async call<T>(fn: () => Promise<T>, parts = 1): Promise<T> {
    this.reservation.take(parts);
    const slots = this.limiter.slotsOf(this.server);
    this.limiter.running += parts;
    slots.running += parts;
    const started = performance.now();
    try {
      const result = await fn();
      // The pace Retry-After is computed from is per part: a call that answered several counts as several.
      this.limiter.observeCall((performance.now() - started) / parts);
      return result;
    } finally {
      this.limiter.running -= parts;
      slots.running -= parts;
    }
  }
}

/** The free slot that last held `affinity`, else the one free the longest. */
function takeFree(free: ServerSlots["free"], affinity: string | undefined): ServerSlots["free"][number] {
  let at = affinity === undefined ? -1 : free.findIndex((f) => f.affinity === affinity);
  if (at < 0) at = 0;
  const [taken] = free.splice(at, 1);
  if (taken === undefined) throw new Error("no free slot: Bottleneck ran more holds than MAX_INFLIGHT");
  return taken;
}

class Deferred<T> {
  resolve!: (value: T) => void;
  reject!: (err: unknown) => void;
  readonly promise = new Promise<T>((resolve, reject) => {
    this.resolve = resolve;
    this.reject = reject;
  });
}
