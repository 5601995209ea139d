import { randomUUID } from "node:crypto";
import type { Logger } from "@localdecider/service-kit";
import Redis from "ioredis";
import { AbortedError, LimiterUnavailableError, type SharedLimits } from "./limiter";
import { LIMITS_SCRIPT } from "./redis-script";

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

type Mode = "op" | "admit" | "alone" | "unclaim" | "set";

/**
 * The script's answer: admitted (1) or not (0), the totals it saw (queued, running on the target), and the
 * slots `admit` granted.
 */
type Answer = [number, number, number, number];

interface RedisWithLimits extends Redis {
  localdeciderLimits(
    leases: string,
    queued: string,
    running: string,
    alone: string,
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
  private heartbeat: NodeJS.Timeout | undefined;
  /** Whether the last heartbeat reached Redis: until one does after a reconnect, nothing is admitted. */
  private synced = false;
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
    this.client.defineCommand("localdeciderLimits", { numberOfKeys: 4, lua: LIMITS_SCRIPT });
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
    start?: { server: string; slots: number },
  ): Promise<{ ok: true; started: number } | { ok: false; ahead: number }> {
    const [ok, queued, running, started] =
      start === undefined || start.slots <= 0
        ? await this.change(calls, 0, "", "op")
        : await this.change(calls, Math.min(start.slots, calls), start.server, "admit");
    return ok === 1 ? { ok: true, started } : { ok: false, ahead: queued + running };
  }

  async acquire(
    weight: number,
    options: { server: string; fromQueue: boolean; alone: boolean; signal: AbortSignal },
  ): Promise<void> {
    const { server, fromQueue, alone, signal } = options;
    try {
      for (;;) {
        if (signal.aborted) throw new AbortedError();
        const [ok] = await this.change(fromQueue ? -1 : 0, weight, server, alone ? "alone" : "op");
        if (ok === 1) return;
        await this.nextChance(server, signal);
      }
    } catch (err) {
      // A lone call that gives up must not hold every other replica off until its claim expires.
      if (alone) void this.change(0, 0, server, "unclaim").catch(() => undefined);
      throw err;
    }
  }

  release(server: string, weight: number): void {
    void this.change(0, -weight, server, "op");
  }

  unreserve(calls: number): void {
    void this.change(-calls, 0, "", "op");
  }

  async unavailable(): Promise<string | undefined> {
    if (this.client.status !== "ready" || !this.synced) {
      return `the shared limits' Redis at ${this.display} is unreachable${this.down === undefined ? "" : ` (${this.down})`}`;
    }
    try {
      await this.client.ping();
      return undefined;
    } catch (err) {
      return `the shared limits' Redis at ${this.display} does not answer (${(err as Error).message})`;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.heartbeat);
    this.wakeAll();
    // Hand back what this replica still holds at once instead of leaving it to the lease.
    if (this.client.status === "ready") {
      const held = this.reported();
      const freed = [...held.running].filter(([, running]) => running > 0);
      await Promise.all([
        this.run(-held.queued, 0, "", "op", held),
        ...freed.map(([server, running]) => this.run(0, -running, server, "op", held)),
      ]).catch(() => undefined);
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

  /**
   * Sends one change of this replica's counts; local counts follow the answer (see the class comment). A
   * change that frees only (release, unreserve) is never refused and counts at once; one that takes
   * (reserve, a slot) counts only once admitted, and is reported as taken while unanswered.
   */
  private async change(dq: number, dr: number, server: string, mode: Mode): Promise<Answer> {
    if (this.closed) throw new LimiterUnavailableError("the decider is shutting down");
    // What Redis should hold for this replica before this change, if it has lost it.
    const before = this.reported();
    if (dq <= 0 && dr <= 0) {
      this.queued += dq;
      add(this.running, server, dr);
      // Unanswered (Redis down): the next heartbeat sets this replica's counts to what it holds.
      return this.run(dq, dr, server, mode, before).catch((): Answer => [1, 0, 0, 0]);
    }
    if (this.client.status !== "ready" || !this.synced) {
      throw new LimiterUnavailableError(`the shared limits' Redis at ${this.display} is unreachable`);
    }
    const upQ = Math.max(dq, 0);
    const upR = Math.max(dr, 0);
    this.pendingQueued += upQ;
    add(this.pendingRunning, server, upR);
    const number = ++this.sent;
    let answer: Answer;
    try {
      answer = await this.run(dq, dr, server, mode, before);
    } catch (err) {
      throw new LimiterUnavailableError(`the shared limits' Redis at ${this.display} did not answer`, { cause: err });
    } finally {
      this.pendingQueued -= upQ;
      add(this.pendingRunning, server, -upR);
    }
    // What the change did: of the calls an admission reserved, those granted a slot at once run, the rest
    // are queued; a refused change did nothing.
    const [doneQ, doneR] = answer[0] === 0 ? [0, 0] : mode === "admit" ? [dq - answer[3], answer[3]] : [dq, dr];
    this.queued += doneQ;
    add(this.running, server, doneR);
    // A heartbeat sent while this change was unanswered wrote its increments as made (the upper bound) and
    // ran after it: whatever of them the change did not make would be held by nobody until the next one.
    if (this.beatSent > number && (upQ > doneQ || upR > doneR)) {
      void this.run(doneQ - upQ, doneR - upR, server, "op", this.reported()).catch(() => undefined);
    }
    return answer;
  }

  /** One run of the script (redis-script.ts) for this replica, with what it holds to restore if need be. */
  private run(dq: number, dr: number, server: string, mode: Mode, before: Held): Promise<Answer> {
    const o = this.options;
    const p = this.prefix;
    return this.client.localdeciderLimits(
      `${p}leases`,
      `${p}queued`,
      `${p}running`,
      `${p}alone:${server}`,
      this.me,
      o.leaseMs,
      mode,
      this.channel,
      o.maxQueue,
      o.maxInflight,
      server,
      dq,
      dr,
      before.queued,
      ...[...before.running].flat(),
    );
  }

  /** Renews this replica's lease and sets its counts (restoring them if Redis lost them). */
  private async beat(): Promise<void> {
    if (this.closed || this.client.status !== "ready") return;
    try {
      this.beatSent = ++this.sent;
      await this.run(0, 0, "", "set", this.reported());
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
