import { createHash } from "node:crypto";
import { setMaxListeners } from "node:events";
import type { Logger } from "@localdecider/service-kit";
import type { Calibration } from "../calibration/calibration";
import type { Reservation, UpstreamLimiter } from "../limits/limiter";
import type { SlotLease } from "../limits/types";
import { ACCEPTED_MODELS, servedModelName } from "../models";
import type { DeciderObserver } from "../observer";
import {
  clientError,
  deadlinePassed,
  imagesNeedNative,
  malformedOutput,
  queueFull,
  retryAlone,
  tooFewOptions,
  tooManyCalls,
  unknownModel,
} from "../upstream/failure";
import type { ModelGate } from "../upstream/model-gate";
import type { ServerPool } from "../upstream/pool";
import { isNative, UpstreamError } from "../upstream/types";
import { answersOf, chunkDistributions, type PartResult } from "./answer";
import { chatReads } from "./chat-reads";
import type { Read } from "./native";
import { nativeReads } from "./native-reads";
import {
  chunkSize,
  finalRound,
  type Limits,
  MAX_OUTCOMES_PER_PART,
  type Part,
  type Plan,
  planRequest,
  questionById,
} from "./plan";
import { jsonLengths, jsonWeight, ShownState } from "./prompt";
import { PromptJobs, type RequestRun } from "./run";
import { runInOrder } from "./schedule";
import type { DecisionTask, TaskResult } from "./task";

export interface DeciderOptions {
  /** The model servers (or the embedded engine, a pool of one). */
  pool: ServerPool;
  limiter: UpstreamLimiter;
  observer: DeciderObserver;
  logger: Logger;
  gate: ModelGate;
  limits: Limits;
  malformedRetries: number;
  upstreamModel: string;
  timeoutSeconds: number;
  /** LOCALDECIDER_ALLOW_NO_LOGPROBS: answer from the emitted token alone when a backend sends no logprobs. */
  allowNoLogprobs: boolean;
  /** LOCALDECIDER_CALIBRATION: temperatures applied to every answer. */
  calibration?: Calibration;
  /** Most characters the state may take as the prompt shows it (LOCALDECIDER_BODY_LIMIT): more is a 413. */
  maxStateChars: number;
  /**
   * Most bytes of heap the requests admitted and not finished may hold (their parsed bodies, by
   * requestWeight): past it a request is refused as the queue being full. Bounds memory by what is held,
   * whatever MAX_QUEUE and the body limit allow together.
   */
  maxHeldBytes: number;
}

/**
 * What a parsed request may hold on the heap, at most (jsonWeight). Its state, measured already by ShownState,
 * is counted from that measure when given, so that no request is walked twice before it is admitted.
 */
export function requestWeight(request: unknown, shown?: ShownState): number {
  if (shown === undefined || typeof request !== "object" || request === null) return jsonWeight(jsonLengths(request));
  // The state's place counted as a null (4 characters, 1 value), then swapped for the state's own weight.
  return jsonWeight(jsonLengths({ ...request, state: null })) - jsonWeight({ compact: 4, values: 1 }) + shown.weight;
}

/**
 * Answers decision tasks (task.ts: each dialect's route translates its requests into one). It only orchestrates: the plan decides the prompts and rounds, the request
 * holds one slot of one model server for all of its calls (the limiter), each prompt's parts are read through
 * the server's protocol (chat-reads.ts: probed where each value begins; native-reads.ts: one System One call,
 * each answer checked by native.ts) with the same retries, and answer.ts does the math and the calibration.
 */
export class Decider {
  /** Bytes the requests admitted and not finished hold (requestWeight), against maxHeldBytes. */
  private heldBytes = 0;

  constructor(private readonly options: DeciderOptions) {}

  get servedModel(): string {
    return servedModelName(this.options.upstreamModel);
  }

  /** The use case: the model asked for, the model served, plan, admit (or refuse whole), decide. */
  async run(task: DecisionTask, signal: AbortSignal): Promise<TaskResult> {
    const { state, questions } = task;
    const target = await this.target(task, signal);
    const plan = feasible(planRequest(questions, this.limitsFor(target)));
    // Measured (not rendered) before admission: a state too large is refused before it waits anywhere.
    const shown = new ShownState(state, this.options.maxStateChars);
    const weight = requestWeight(task, shown);
    const cacheKey = task.cacheKey === undefined ? undefined : `key:${keyHash(task.cacheKey)}`;
    if (this.heldBytes + weight > this.options.maxHeldBytes && this.heldBytes > 0) {
      this.options.observer.queueRejected();
      const { limiter, pool } = this.options;
      throw queueFull(limiter.retryAfterSeconds(limiter.counts().queued, pool.servers.length));
    }
    this.heldBytes += weight;
    try {
      const reservation = await this.admit(plan, target.except, signal, cacheKey);
      const run: RequestRun = {
        plan,
        model: target.model,
        state,
        assets: task.assets,
        partial: task.partial,
        except: target.except,
        deadlineAt: performance.now() + this.options.timeoutSeconds * 1000,
        reservation,
        controller: new AbortController(),
        timedOut: false,
        usage: { input: 0, cached: 0, output: 0 },
        absent: [],
        shown,
        // A client's cache key names the slot's prompt cache; without one, the state does.
        affinity: cacheKey === undefined ? shown.affinity : cacheKey,
        cacheKey,
        busyWaits: 0,
      };
      return await this.decide(run, signal);
    } finally {
      this.heldBytes -= weight;
    }
  }

  /**
   * The model a request names, as the model asked upstream and the servers that cannot serve the request: our
   * own names (`localdecider`, `jev-latest`, `jev`) are LOCALDECIDER_UPSTREAM_MODEL on every server; another
   * name must be a decision model a native server lists (llama.cpp's router mode, Ollama), served only there.
   * Jev 1.14's images and box questions go to a server that speaks System One itself, or nowhere.
   */
  private async target(
    task: DecisionTask,
    signal: AbortSignal,
  ): Promise<{ model: string; except: ReadonlySet<string> }> {
    const { gate, pool, upstreamModel } = this.options;
    const { model } = task;
    // Which protocol each server speaks, and which decision models it lists, are known once it was checked.
    await gate.assertServed(signal);
    const except = new Set<string>();
    if (!ACCEPTED_MODELS.includes(model)) {
      for (const s of pool.servers) if (!(s.decisionModels ?? []).includes(model)) except.add(s.id);
      if (except.size === pool.servers.length) {
        const routable = pool.decisionModels().filter((m) => !ACCEPTED_MODELS.includes(m));
        throw unknownModel(model, [...ACCEPTED_MODELS, ...routable]);
      }
    }
    if (usesImages(task)) {
      for (const s of pool.servers) if (!isNative(s.upstream)) except.add(s.id);
      if (except.size === pool.servers.length) throw imagesNeedNative();
    }
    return { model: ACCEPTED_MODELS.includes(model) ? upstreamModel : model, except };
  }

  /**
   * The plan's limits for the servers that may serve this request: a choice is split into chunks that every
   * one of them can tell apart (a chat probe's top-20 alternatives, a native server's option limit for the
   * model), and with a native server among them each call carries at most one part of a question.
   */
  private limitsFor(target: { model: string; except: ReadonlySet<string> }): Limits {
    let perPart = Number.POSITIVE_INFINITY;
    let native = false;
    for (const server of this.options.pool.servers) {
      if (target.except.has(server.id)) continue;
      const port = server.upstream;
      if (isNative(port)) native = true;
      perPart = Math.min(
        perPart,
        isNative(port) ? port.optionLimit(target.model) : (port.outcomesPerPart ?? MAX_OUTCOMES_PER_PART),
      );
    }
    return { ...this.options.limits, outcomesPerPart: perPart, ...(native ? { onePartPerQuestion: true } : {}) };
  }

  /**
   * Reserves every call of the plan, or throws the error that refuses the request whole (or cancelled). One
   * server for all of the request's calls (its prompt prefix is cached there): the one a cache key maps to,
   * else the least loaded.
   */
  private async admit(
    plan: Plan,
    except: ReadonlySet<string>,
    signal: AbortSignal,
    cacheKey: string | undefined,
  ): Promise<Reservation> {
    if (!this.options.limiter.fits(plan.callCount)) throw tooManyCalls(plan.callCount, this.options.limiter.maxQueue);
    const { limiter, pool } = this.options;
    const server =
      (cacheKey === undefined ? pool.choose((id) => limiter.load(id), except) : pool.chooseFor(cacheKey, except)) ??
      (pool.servers.find((s) => !except.has(s.id)) as (typeof pool.servers)[number]);
    let answer: Awaited<ReturnType<UpstreamLimiter["tryReserve"]>>;
    try {
      answer = await limiter.tryReserve(plan.callCount, server.id, signal);
    } catch (err) {
      throw clientError(err, this.options.timeoutSeconds);
    }
    if ("ahead" in answer) {
      this.options.observer.queueRejected();
      throw queueFull(limiter.retryAfterSeconds(answer.ahead, pool.servers.length));
    }
    return answer.reservation;
  }

  private async decide(run: RequestRun, clientSignal: AbortSignal): Promise<TaskResult> {
    // One failed call fails the request, so it also stops the request's other calls.
    // Each call in flight listens to the request's signal (and stops listening when it ends); on a server
    // with a shared prefix cache a prompt's calls run at once, more than Node's default warning level.
    setMaxListeners(0, run.controller.signal);
    const onClientAbort = () => run.controller.abort();
    clientSignal.addEventListener("abort", onClientAbort, { once: true });
    if (clientSignal.aborted) run.controller.abort();
    // One deadline for the whole request: its wait for a slot, its calls and their retries together.
    const deadline = setTimeout(() => {
      run.timedOut = true;
      run.controller.abort();
    }, this.options.timeoutSeconds * 1000);
    try {
      let first = run.plan.firstRound.map((parts) => new PromptJobs(parts));
      let second: PromptJobs[] | undefined = run.plan.splitChoices.length === 0 ? [] : undefined;
      await this.inSlot(run, async (lease) => {
        for (;;) {
          try {
            await this.probeAll(run, lease, first);
            // The final round needs the first round's chunk leaders: planned once, in the same slot.
            second ??= finalRound(run.plan, chunkDistributions(resultsOf(first))).map((parts) => new PromptJobs(parts));
            await this.probeAll(run, lease, second);
            return;
          } catch (err) {
            // A native server that takes fewer options per question than assumed: split again, in this slot.
            if (!this.replan(run, err)) throw err;
            first = run.plan.firstRound.map((parts) => new PromptJobs(parts));
            second = run.plan.splitChoices.length === 0 ? [] : undefined;
          }
        }
      });
      if (run.absent.length > 0) {
        this.options.logger.warn("outcomes absent from the backend's reported alternatives were estimated", {
          share: "half of the smallest reported probability",
          absent: run.absent,
        });
      }
      return {
        model: servedModelName(run.model),
        outcomes: answersOf(run.plan, [...resultsOf(first), ...resultsOf(second ?? [])], this.options.calibration),
        usage: run.usage,
      };
    } catch (err) {
      if (run.timedOut) throw deadlinePassed(this.options.timeoutSeconds);
      throw err;
    } finally {
      clearTimeout(deadline);
      clientSignal.removeEventListener("abort", onClientAbort);
      run.reservation.release();
    }
  }

  /**
   * After `err`: when a native server named a smaller option limit than the plan's chunks (its 422), the
   * request is planned again with chunks of that size (the server remembers it for later requests), and
   * true is returned. Bounded: the chunk size only goes down. A limit too small for two rounds is the
   * client's error.
   */
  private replan(run: RequestRun, err: unknown): boolean {
    if (!(err instanceof UpstreamError) || err.failure.kind !== "option_limit") return false;
    const { limit } = err.failure;
    if (limit < 2 || limit >= chunkSize(run.plan.limits)) return false;
    const plan = feasible(planRequest(run.plan.questions, { ...run.plan.limits, outcomesPerPart: limit }));
    this.options.logger.warn("the model server takes fewer options per question than assumed; choices split again", {
      server: run.reservation.server,
      limit,
    });
    run.plan = plan;
    return true;
  }

  /**
   * Runs `work` holding a slot of the request's server, again after a failure that it survives: a
   * shared-context overflow (calls of several requests that fit alone failing together) holds every slot
   * of the server for the rest of the request; a server that fails as a server fails is taken out of
   * rotation and the request moves to another (each server fails a request once). `work` skips what is done.
   */
  private async inSlot(run: RequestRun, work: (lease: SlotLease) => Promise<void>): Promise<void> {
    const signal = run.controller.signal;
    const failed = new Set<string>();
    let alone = false;
    for (;;) {
      const server = run.reservation.server;
      try {
        await run.reservation.hold(work, signal, { alone, affinity: run.affinity });
        return;
      } catch (err) {
        if (!signal.aborted && !alone && err instanceof UpstreamError && retryAlone(err.failure)) {
          this.options.logger.warn("calls running together exceeded the backend's shared context; retrying alone", {
            server,
          });
          alone = true;
          continue;
        }
        if (!signal.aborted && this.failOver(run, server, err, failed)) continue;
        if (err instanceof UpstreamError && err.failure.kind !== "aborted") {
          // The server's own text goes to the log only.
          this.options.logger.warn("upstream call failed", { server, failure: err.failure });
        }
        throw clientError(err, this.options.timeoutSeconds);
      }
    }
  }

  /**
   * Reads the parts not read yet, prompt by prompt, through the server's protocol: on a native server a
   * prompt's pending parts in one System One call (native-reads.ts); on the chat path all of them in one call
   * where the backend can (probeMany), else one call each in the order the server's prefix cache wants
   * (chat-reads.ts, schedule.ts). Either way the same retries (withRetries).
   */
  private async probeAll(run: RequestRun, lease: SlotLease, prompts: PromptJobs[]): Promise<void> {
    const { upstream } = this.options.pool.get(lease.server);
    for (const prompt of prompts) {
      const pending = prompt.pending();
      if (pending.length === 0) continue;
      if (isNative(upstream) || (upstream.probeMany !== undefined && pending.length > 1)) {
        const read = isNative(upstream)
          ? nativeReads(this.options, run, lease, upstream, prompt)
          : chatReads(this.options, run, lease, upstream, prompt);
        const reads = await this.withRetries(run, lease, prompt.parts, pending, read);
        for (const [k, i] of pending.entries()) prompt.results[i] = reads[k];
      } else {
        const read = chatReads(this.options, run, lease, upstream, prompt);
        await runInOrder([pending], upstream.prefixCache, async (i) => {
          prompt.results[i] = (await this.withRetries(run, lease, prompt.parts, [i], read))[0];
        });
      }
      prompt.settle();
    }
  }

  /**
   * After the request failed on `server`: when the failure says the server cannot serve (pool.failed), takes
   * it out of rotation and moves the request to the least loaded server it has not failed on (and that can
   * serve its model). Returns whether the request should go on there. Bounded: each server fails a request at
   * most once.
   */
  private failOver(run: RequestRun, server: string, err: unknown, failed: Set<string>): boolean {
    const { pool, limiter, logger } = this.options;
    if (!pool.failed(server, err)) return false;
    failed.add(server);
    const next = pool.choose((id) => limiter.load(id), new Set([...failed, ...run.except]));
    if (next === undefined) return false;
    logger.warn("model server failed; its request moves to another", {
      from: server,
      to: next.id,
      failure: err instanceof UpstreamError ? err.failure : String(err),
    });
    run.reservation.moveTo(next.id);
    return true;
  }

  /**
   * Calls for a prompt's parts `indexes` (into `parts`), each call answering every part still unread, until
   * all are read or MALFORMED_RETRIES retries are spent: a retry asks only the parts whose answer was
   * malformed. `call` runs its upstream calls in the lease and reads each asked part; each attempt is timed
   * and counted. A failure other than a malformed answer is thrown.
   */
  private async withRetries(
    run: RequestRun,
    lease: SlotLease,
    parts: readonly Part[],
    indexes: readonly number[],
    call: (asked: number[]) => Promise<Read[]>,
  ): Promise<(number[] | { refusal: string })[]> {
    const { observer, logger, malformedRetries } = this.options;
    const reads: (number[] | { refusal: string })[] = [];
    let left = indexes.map((_, k) => k);
    let reason = "";
    for (let attempt = 0; attempt <= malformedRetries && left.length > 0; attempt++) {
      if (attempt > 0) observer.malformedRetry();
      const started = performance.now();
      let results: Read[] | undefined;
      try {
        results = await call(left.map((k) => indexes[k] as number));
      } catch (err) {
        if (!(err instanceof UpstreamError && err.failure.kind === "malformed")) {
          const kind = err instanceof UpstreamError ? err.failure.kind : "error";
          const elapsed = performance.now() - started;
          observer.upstreamCall(elapsed, kind === "timeout" || kind === "aborted" ? kind : "error", lease.server);
          throw err;
        }
        reason = err.failure.detail;
        // What the server sent is for the log only (the client gets the decider's words: `reason`).
        if (err.failure.serverText !== undefined) {
          logger.warn("malformed model response body", { server: lease.server, serverText: err.failure.serverText });
        }
      }
      const elapsed = performance.now() - started;
      const still: number[] = [];
      for (const [j, k] of left.entries()) {
        const read = results?.[j];
        if (read !== undefined && "distribution" in read) {
          reads[k] = read.distribution;
          continue;
        }
        if (read !== undefined && "refusal" in read) {
          // The server declined the question: its answer, not a fault, so never asked again.
          if (!run.partial) throw malformedOutput(attempt + 1, read.refusal);
          reads[k] = { refusal: read.refusal };
          continue;
        }
        if (read !== undefined) reason = read.malformed;
        still.push(k);
        const part = parts[indexes[k] as number] as Part;
        logger.warn("malformed model response", { question: part.question, attempt: attempt + 1, reason });
      }
      observer.upstreamCall(elapsed, still.length > 0 ? "malformed" : "ok", lease.server);
      left = still;
    }
    if (left.length > 0 && !run.partial) throw malformedOutput(malformedRetries + 1, reason);
    // Where refusals may be given, a part with no evidence after the retries is refused, the others answered.
    for (const k of left)
      reads[k] = { refusal: `no readable answer after ${malformedRetries + 1} attempts: ${reason}` };
    return reads;
  }
}

/** Whether a task holds images or a box question, which only a native server can answer. */
function usesImages(task: DecisionTask): boolean {
  return Object.keys(task.assets ?? {}).length > 0 || task.questions.some((q) => q.kind === "box");
}

/** A cache key as the slot affinity names it: hashed, so that no client's key is held or logged in clear. */
function keyHash(key: string): string {
  return createHash("sha256").update(key).digest("hex").slice(0, 16);
}

/** The plan, if every split choice's leaders fit one final round (its chunks are at most a chunk's size). */
function feasible(plan: Plan): Plan {
  const size = chunkSize(plan.limits);
  const over = plan.splitChoices.find((c) => c.chunks > size);
  if (over !== undefined)
    throw tooFewOptions(size, over.question, questionById(plan, over.question)?.options.length ?? 0);
  return plan;
}

function resultsOf(prompts: readonly PromptJobs[]): PartResult[] {
  return prompts.flatMap((prompt) => prompt.partResults());
}
