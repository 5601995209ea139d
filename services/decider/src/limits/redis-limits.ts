import { randomUUID } from "node:crypto";
import type { Logger } from "@localdecider/service-kit";
import Redis from "ioredis";
import { LIMITS_SCRIPT } from "./redis-script";
import { AbortedError, LimiterUnavailableError, type SharedLimits, type Unavailable } from "./types";

/**
 * How often a replica waiting for a running slot asks again when no `freed` message came: messages are
 * not queued for a subscriber that reconnects, and a dead replica's slots free by expiry, which nobody
 * announces.
 */
const POLL_MS = 100;

export interface RedisLimitsOptions {
  /** redis:// or rediss:// (LOCALDECIDER_REDIS_URL). */
  url: string;
  /** Every key and the channel start with it (LOCALDECIDER_REDIS_PREFIX). */
  prefix: string;
  maxInflight: number;
  maxQueue: number;
  /** A replica not heard from for this long loses its reservations (LOCALDECIDER_REDIS_LEASE_MS). */
  leaseMs: number;
  logger: Logger;
}

type Mode = "op" | "admit" | "alone" | "unclaim" | "set" | "leave";

/**
 * The script's answer: admitted (1) or not (0), the totals it saw (queued, slots held on the target), the
 * slots `admit` granted, and the slot number pinned (-1: none).
 */
type Answer = [number, number, number, number, number];

interface RedisWithLimits extends Redis {
  localdeciderLimits(
    leases: string,
    queued: string,
    running: string,
    alone: string,
    pins: string,
    ...args: (string | number)[]
  ): Promise<Answer>;
}

/**
 * MAX_QUEUE and MAX_INFLIGHT (per model server, named by its address without credentials) shared by every
 * replica with the same Redis and prefix. Redis holds, per live replica, its queued calls and its running
 * slots on each server; one Lua script (redis-script.ts) checks the totals and
 * changes this replica's counts in one step, so two replicas can never both take the last place. Each
 * replica renews a lease on its counts (a heartbeat every third of LOCALDECIDER_REDIS_LEASE_MS); a replica
 * that stops renewing (killed, frozen, cut off) loses its counts when the lease ends.
 *
 * What this replica reports is never below what it holds: increments count from the moment they are sent,
 * decrements from the moment they are sent too (they free nothing before then), and every heartbeat sets
 * the replica's counts to that upper bound, which also restores them after Redis lost its data.
 */
export class RedisLimits implements SharedLimits {
  private readonly client: RedisWithLimits;
  private readonly subscriber: Redis;
  private readonly me = randomUUID();
  private readonly prefix: string;
  private readonly channel: string;
  private readonly display: string;
  /** Confirmed counts: what Redis holds for this replica once every sent change is applied. */
  private queued = 0;
  private readonly running = new Map<string, number>();
  /** Increments sent and not yet answered: counted in what this replica reports until they are. */
  private pendingQueued = 0;
  private readonly pendingRunning = new Map<string, number>();
  /** The slot numbers this replica holds on each server (confirmed by Redis). */
  private readonly pins = new Map<string, Set<number>>();
  /** The numbers of taking commands sent and not yet answered (their pins are not in `pins` yet). */
  private readonly unanswered = new Set<number>();
  private heartbeat: NodeJS.Timeout | undefined;
  /** Whether the last heartbeat reached Redis: until one does after a reconnect, nothing is admitted. */
  private synced = false;
  /** Servers on which a lone hold of this replica waits (and so may hold the `alone:` claim). */
  private readonly claims = new Set<string>();
  /** Calls waiting for a slot, per server, in the order they started waiting. */
  private readonly wakers = new Map<string, (() => void)[]>();
  /** Commands sent so far (changes and heartbeats), numbered in the order Redis will run them. */
  private sent = 0;
  /** The number of the last heartbeat sent. */
  private beatSent = 0;
  private down: string | undefined;
  private closed = false;

  constructor(private readonly options: RedisLimitsOptions) {
    this.prefix = options.prefix;
    this.channel = `${options.prefix}freed`;
    this.display = redisDisplay(options.url);
    const connection = {
      // Never queue a command while disconnected, never replay one after a reconnect: a reservation must
      // either be answered now or fail now (503), not be admitted later behind the client's back.
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      maxRetriesPerRequest: 0,
      commandTimeout: 2000,
      connectTimeout: 2000,
      retryStrategy: (attempt: number) => Math.min(attempt * 100, 1000),
    };
    this.client = new Redis(options.url, connection) as RedisWithLimits;
    this.client.defineCommand("localdeciderLimits", { numberOfKeys: 5, lua: LIMITS_SCRIPT });
    // The subscriber may queue its SUBSCRIBE until connected; ioredis subscribes again after a reconnect.
    this.subscriber = new Redis(options.url, { ...connection, enableOfflineQueue: true, maxRetriesPerRequest: null });
    this.subscriber.on("message", (_channel: string, message: string) => this.onMessage(message));
    void this.subscriber.subscribe(this.channel).catch(() => undefined);
    for (const [name, redis] of [
      ["commands", this.client],
      ["subscriber", this.subscriber],
    ] as const) {
      redis.on("error", (err: Error) => this.markDown(`${name}: ${err.message}`));
    }
    this.client.on("close", () => {
      this.synced = false;
      this.markDown("connection closed");
    });
    this.client.on("ready", () => void this.beat());
    this.heartbeat = setInterval(() => void this.beat(), Math.max(100, Math.floor(options.leaseMs / 3)));
    this.heartbeat.unref();
  }

  async reserve(
    calls: number,
    start?: { server: string },
  ): Promise<{ ok: true; slot: number | undefined } | { ok: false; ahead: number }> {
    const [ok, queued, running, granted, pinned] =
      start === undefined ? await this.change(calls, 0, "", "op") : await this.change(calls, 1, start.server, "admit");
    if (ok !== 1) return { ok: false, ahead: queued + running };
    return { ok: true, slot: granted === 1 ? pinned : undefined };
  }

  async acquire(options: { server: string; alone: boolean; signal: AbortSignal }): Promise<number> {
    const { server, alone, signal } = options;
    if (alone) this.claims.add(server);
    try {
      for (;;) {
        if (signal.aborted) throw new AbortedError();
        let answer: Answer;
        try {
          answer = await this.change(0, alone ? this.options.maxInflight : 1, server, alone ? "alone" : "op");
        } catch (err) {
          // The request is admitted: a slow or unreachable Redis makes it wait (until its own deadline, which
          // aborts the signal), not fail. An ask that timed out may still run in Redis later; the slot it took
          // is nobody's, and the next heartbeat, which sets this replica's counts and pins, gives it back.
          if (!(err instanceof LimiterUnavailableError) || this.closed) throw err;
          await this.nextChance(server, signal);
          continue;
        }
        const [ok, , , , pinned] = answer;
        // A lone hold has every slot of the server: it runs as slot 0.
        if (ok === 1) return alone ? 0 : pinned;
        await this.nextChance(server, signal);
      }
    } catch (err) {
      // A lone hold that gives up must not hold every other replica off until its claim expires.
      if (alone) void this.change(0, 0, server, "unclaim").catch(() => undefined);
      throw err;
    } finally {
      if (alone) this.claims.delete(server);
    }
  }

  release(server: string, slot: number | "alone", unreserve: number): void {
    const weight = slot === "alone" ? this.options.maxInflight : 1;
    void this.change(-unreserve, -weight, server, "op", slot === "alone" ? -1 : slot);
  }

  unreserve(calls: number): void {
    void this.change(-calls, 0, "", "op");
  }

  async unavailable(): Promise<Unavailable | undefined> {
    if (this.client.status !== "ready" || !this.synced) {
      return {
        message: "the shared limits' Redis is unreachable",
        detail: `the shared limits' Redis at ${this.display} is unreachable${this.down === undefined ? "" : ` (${this.down})`}`,
      };
    }
    try {
      await this.client.ping();
      return undefined;
    } catch (err) {
      return {
        message: "the shared limits' Redis does not answer",
        detail: `the shared limits' Redis at ${this.display} does not answer (${(err as Error).message})`,
      };
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.heartbeat);
    this.wakeAll();
    // Hand back what this replica still holds at once instead of leaving it to the lease, and leave nothing
    // of its own behind: the claims of lone holds still waiting (their own give-up cannot run once closed),
    // then every entry of this replica (`leave`, which wakes the waiters elsewhere). The other replicas'
    // entries stay; a key left empty is gone. Sent after every command of this replica (one connection, in
    // order), so nothing of it comes back after.
    if (this.client.status === "ready") {
      const nothing: Held = { queued: 0, running: new Map() };
      await Promise.all([...this.claims].map((server) => this.run(0, 0, server, "unclaim", nothing, { pins: [] })))
        .then(() => this.run(0, 0, "", "leave", nothing, { pins: [] }))
        .catch(() => undefined);
    }
    this.subscriber.disconnect();
    this.client.disconnect();
  }

  /** What this replica holds, never below the truth: confirmed counts plus increments still unanswered. */
  private reported(): Held {
    const running = new Map<string, number>();
    for (const server of new Set([...this.running.keys(), ...this.pendingRunning.keys()])) {
      running.set(server, (this.running.get(server) ?? 0) + (this.pendingRunning.get(server) ?? 0));
    }
    return { queued: this.queued + this.pendingQueued, running };
  }

  /** The slot numbers this replica has pinned (confirmed), as (server, number) pairs for the script. */
  private pinned(): (string | number)[] {
    return [...this.pins].flatMap(([server, slots]) => [...slots].flatMap((slot) => [server, slot]));
  }

  /**
   * Sends one change of this replica's counts; local counts follow the answer (see the class comment). A
   * change that frees only (release, unreserve) is never refused and counts at once; one that takes
   * (reserve, a slot) counts only once admitted, and is reported as taken while unanswered.
   */
  private async change(dq: number, dr: number, server: string, mode: Mode, freedPin = -1): Promise<Answer> {
    // A hand-back after close (a request that was still running) has nothing left to return: close() gave
    // back all this replica held. It never rejects, since nobody waits for a hand-back.
    if (this.closed && dq <= 0 && dr <= 0) return [1, 0, 0, 0, -1];
    if (this.closed) throw new LimiterUnavailableError("the decider is shutting down");
    // What Redis should hold for this replica before this change, if it has lost it.
    const before = this.reported();
    if (dq <= 0 && dr <= 0) {
      this.queued += dq;
      add(this.running, server, dr);
      if (freedPin >= 0) this.pins.get(server)?.delete(freedPin);
      // Unanswered (Redis down): the next heartbeat sets this replica's counts to what it holds.
      return this.run(dq, dr, server, mode, before, { freedPin }).catch((): Answer => [1, 0, 0, 0, -1]);
    }
    if (this.client.status !== "ready" || !this.synced) {
      // Clients see this text: no address (markDown logged it with the reason).
      throw new LimiterUnavailableError("the shared limits' Redis is unreachable");
    }
    const upQ = Math.max(dq, 0);
    const upR = Math.max(dr, 0);
    this.pendingQueued += upQ;
    add(this.pendingRunning, server, upR);
    const number = ++this.sent;
    this.unanswered.add(number);
    let answer: Answer;
    try {
      answer = await this.run(dq, dr, server, mode, before, { number });
    } catch (err) {
      throw new LimiterUnavailableError("the shared limits' Redis did not answer", { cause: err });
    } finally {
      this.unanswered.delete(number);
      this.pendingQueued -= upQ;
      add(this.pendingRunning, server, -upR);
    }
    // What the change did: an admission reserved its calls, and took a slot if one was granted; a refused
    // change did nothing.
    const [doneQ, doneR] = answer[0] === 0 ? [0, 0] : mode === "admit" ? [dq, answer[3]] : [dq, dr];
    this.queued += doneQ;
    add(this.running, server, doneR);
    if (answer[0] === 1 && answer[4] >= 0) {
      const pins = this.pins.get(server) ?? new Set<number>();
      this.pins.set(server, pins.add(answer[4]));
    }
    // A heartbeat sent while this change was unanswered wrote its increments as made (the upper bound) and
    // ran after it: whatever of them the change did not make would be held by nobody until the next one.
    // (Not after close: `leave` has removed every entry of this replica, and this would write them again.)
    if (!this.closed && this.beatSent > number && (upQ > doneQ || upR > doneR)) {
      void this.run(doneQ - upQ, doneR - upR, server, "op", this.reported()).catch(() => undefined);
    }
    return answer;
  }

  /** One run of the script (redis-script.ts) for this replica, with what it holds to restore if need be. */
  private run(
    dq: number,
    dr: number,
    server: string,
    mode: Mode,
    before: Held,
    extra: { number?: number; freedPin?: number; pins?: (string | number)[]; unanswered?: number } = {},
  ): Promise<Answer> {
    const o = this.options;
    const p = this.prefix;
    const number = extra.number ?? this.sent;
    const running = [...before.running];
    return this.client.localdeciderLimits(
      `${p}leases`,
      `${p}queued`,
      `${p}running`,
      `${p}alone:${server}`,
      `${p}pins`,
      this.me,
      o.leaseMs,
      mode,
      this.channel,
      o.maxQueue,
      o.maxInflight,
      server,
      dq,
      dr,
      number,
      extra.freedPin ?? -1,
      extra.unanswered ?? number,
      before.queued,
      running.length,
      ...running.flat(),
      ...(extra.pins ?? this.pinned()),
    );
  }

  /** Renews this replica's lease and sets its counts and pins (restoring them if Redis lost them). */
  private async beat(): Promise<void> {
    if (this.closed || this.client.status !== "ready") return;
    try {
      this.beatSent = ++this.sent;
      // Pins made by a command still unanswered are not in this.pins yet: the script keeps those.
      const unanswered = Math.min(this.beatSent, ...this.unanswered);
      await this.run(0, 0, "", "set", this.reported(), { number: this.beatSent, unanswered });
      if (!this.synced || this.down !== undefined) {
        this.options.logger.info("shared limits: Redis answers", { redis: this.display });
      }
      this.synced = true;
      this.down = undefined;
      this.wakeAll();
    } catch (err) {
      this.synced = false;
      this.markDown((err as Error).message);
    }
  }

  private markDown(reason: string): void {
    if (this.closed) return;
    if (this.down === undefined) {
      // Once per outage, not once per reconnect attempt.
      this.options.logger.warn("shared limits: Redis unreachable; no new work is admitted", {
        redis: this.display,
        reason,
      });
    }
    this.down = reason;
  }

  /** `freed <count> <server>`: that many slots of the server came free; anything else may free any. */
  private onMessage(message: string): void {
    const freed = /^freed (\d+) (.+)$/.exec(message);
    if (freed === null) {
      this.wakeAll();
      return;
    }
    // One waiting call per freed slot asks again, the longest waiting first: waking every waiting call of
    // every replica for each slot made a dozen script runs per slot handed over under contention.
    const waiting = this.wakers.get(freed[2] as string) ?? [];
    for (const wake of waiting.slice(0, Number(freed[1]))) wake();
  }

  private wakeAll(): void {
    for (const waiting of this.wakers.values()) for (const wake of [...waiting]) wake();
  }

  /** Resolves on a `freed` message for `server`, after POLL_MS, or rejects when the call is cancelled. */
  private nextChance(server: string, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiting = this.wakers.get(server) ?? [];
      this.wakers.set(server, waiting);
      const done = () => {
        clearTimeout(timer);
        const at = waiting.indexOf(done);
        if (at >= 0) waiting.splice(at, 1);
        signal.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        done();
        reject(new AbortedError());
      };
      const timer = setTimeout(done, POLL_MS);
      waiting.push(done);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }
}

/** What this replica holds: queued calls (all servers) and running slots per server. */
interface Held {
  queued: number;
  running: Map<string, number>;
}

/** Adds `delta` to a per-server count, keeping every server once seen (the heartbeat then sets it to 0). */
function add(counts: Map<string, number>, server: string, delta: number): void {
  if (delta !== 0 || !counts.has(server)) counts.set(server, (counts.get(server) ?? 0) + delta);
}

/** The Redis address for logs and /ready: never its password. */
export function redisDisplay(url: string): string {
  const u = new URL(url);
  u.username = "";
  u.password = "";
  return u.toString().replace(/\/$/, "");
}
