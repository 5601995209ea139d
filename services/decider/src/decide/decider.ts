import { setMaxListeners } from "node:events";
import type { SystemOneRequest, SystemOneResponse, TextQuestion } from "@localdecider/contracts/decider";
import type { Logger } from "@localdecider/service-kit";
import type { Calibration } from "../calibration/calibration";
import type { Reservation, UpstreamLimiter } from "../limits/limiter";
import type { SlotLease } from "../limits/types";
import { ACCEPTED_MODELS, servedModelName } from "../models";
import type { DeciderObserver } from "../observer";
import {
  clientError,
  deadlinePassed,
  malformedOutput,
  noLogprobs,
  queueFull,
  retryAlone,
  tooManyCalls,
  unknownModel,
} from "../upstream/failure";
import type { ModelGate } from "../upstream/model-gate";
import type { ServerPool } from "../upstream/pool";
import { type Alternative, type ProbeRequest, type ProbeResult, type Upstream, UpstreamError } from "../upstream/types";
import { answersOf, chunkDistributions, type PartResult } from "./answer";
import { finalRound, type Limits, type Part, type Plan, planRequest } from "./plan";
import { probeOf } from "./probe";
import { jsonLengths, promptOf, ShownState } from "./prompt";
import { outcomeOfToken, readOut, readScores } from "./readout";
import { runInOrder } from "./schedule";

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
 * What a parsed request may hold on the heap, at most: its strings (two bytes a character at worst, and
 * the compact JSON counts every character of every string) and a fixed cost per JSON value (an empty
 * object, the costliest value per byte of body, takes ~64 bytes parsed; measured on Node 20).
 */
export function requestWeight(request: unknown): number {
  const { compact, values } = jsonLengths(request);
  return 2 * compact + 64 * values;
}

/** What one request's calls share: its reservation, its cancellation, its usage and its notes. */
interface RequestRun {
  reservation: Reservation;
  controller: AbortController;
  /** Set when the request's deadline (LOCALDECIDER_TIMEOUT) passed: every failure after it is a 504. */
  timedOut: boolean;
  usage: { input_tokens: number; output_tokens: number };
  /** Outcomes estimated from the bound because no reported alternative could begin them. */
  absent: { question: string; outcomes: string[] }[];
  /** Prefers the slot that last held this request's state (one about the same state reads it once): its fence. */
  affinity: string;
}

/**
 * One prompt of the plan: its parts, and what each read once probed. Its probes are rendered only while the
 * request holds a slot (a request waiting in the queue holds its parsed body, nothing more), and dropped
 * once every part is read.
 */
class PromptJobs {
  readonly results: (number[] | undefined)[];
  private probes: ProbeRequest[] | undefined;

  constructor(readonly parts: Part[]) {
    this.results = parts.map(() => undefined);
  }

  /** The indexes of the parts not read yet. */
  pending(): number[] {
    return this.parts.flatMap((_, i) => (this.results[i] === undefined ? [i] : []));
  }

  /** The probes of the prompt, rendered on first use: the prompt's shared messages once, a prefill each. */
  probesOf(state: ShownState): ProbeRequest[] {
    if (this.probes === undefined) {
      const shared = promptOf(state.block(), this.parts);
      this.probes = this.parts.map((part, i) => probeOf(shared, part, i));
    }
    return this.probes;
  }

  /** Every part read: the rendered prompt is no longer needed. */
  settle(): void {
    if (this.pending().length === 0) this.probes = undefined;
  }

  partResults(): PartResult[] {
    return this.parts.map((part, i) => ({ part, distribution: this.results[i] as number[] }));
  }
}

/**
 * The questions answered from token probabilities. A box question never gets here: routes/images.ts admits
 * one only for an upstream that accepts images (a native System One server), so one here is a wiring fault.
 */
function textQuestions(questions: SystemOneRequest["questions"]): Record<string, TextQuestion> {
  for (const [name, question] of Object.entries(questions)) {
    if (question.type === "box") {
      throw new Error(`box question "${name}" reached the probability path, which cannot answer it`);
    }
  }
  return questions as Record<string, TextQuestion>;
}

/**
 * Answers System One requests. It only orchestrates: the plan decides the prompts and rounds, the request
 * holds one slot of one model server for all of its calls (the limiter), each part is probed once at the
 * position where its value begins (probe.ts) in the order schedule.ts gives, the read-out turns the reported
 * alternatives into a distribution (readout.ts), and answer.ts does the math.
 */
export class Decider {
  /** Bytes the requests admitted and not finished hold (requestWeight), against maxHeldBytes. */
  private heldBytes = 0;

  constructor(private readonly options: DeciderOptions) {}

  get servedModel(): string {
    return servedModelName(this.options.upstreamModel);
  }

  /** The use case: the model asked for, the model served, plan, admit (or refuse whole), decide. */
  async answer(request: SystemOneRequest, signal: AbortSignal): Promise<SystemOneResponse> {
    const { model, state, questions } = request;
    if (!ACCEPTED_MODELS.includes(model)) throw unknownModel(model, ACCEPTED_MODELS);
    await this.options.gate.assertServed(signal);
    const plan = planRequest(textQuestions(questions), {
      ...this.options.limits,
      outcomesPerPart: this.options.pool.outcomesPerPart,
    });
    // Measured (not rendered) before admission: a state too large is refused before it waits anywhere.
    const shown = new ShownState(state, this.options.maxStateChars);
    const weight = requestWeight(request);
    if (this.heldBytes + weight > this.options.maxHeldBytes && this.heldBytes > 0) {
      this.options.observer.queueRejected();
      const { limiter, pool } = this.options;
      throw queueFull(limiter.retryAfterSeconds(limiter.counts().queued, pool.servers.length));
    }
    this.heldBytes += weight;
    try {
      const reservation = await this.admit(plan, signal);
      return await this.decide(shown, plan, reservation, signal);
    } finally {
      this.heldBytes -= weight;
    }
  }

  /** Reserves every call of the plan, or throws the error that refuses the request whole (or cancelled). */
  private async admit(plan: Plan, signal: AbortSignal): Promise<Reservation> {
    if (!this.options.limiter.fits(plan.callCount)) throw tooManyCalls(plan.callCount, this.options.limiter.maxQueue);
    const { limiter, pool } = this.options;
    // One server for all of the request's calls (its prompt prefix is cached there): the least loaded.
    const server = pool.choose((id) => limiter.load(id)) ?? (pool.servers[0] as (typeof pool.servers)[number]);
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

  private async decide(
    shown: ShownState,
    plan: Plan,
    reservation: Reservation,
    clientSignal: AbortSignal,
  ): Promise<SystemOneResponse> {
    // One failed call fails the request, so it also stops the request's other calls.
    const run: RequestRun = {
      reservation,
      controller: new AbortController(),
      timedOut: false,
      usage: { input_tokens: 0, output_tokens: 0 },
      absent: [],
      affinity: shown.affinity,
    };
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
      const first = plan.firstRound.map((parts) => new PromptJobs(parts));
      let second: PromptJobs[] | undefined = plan.splitChoices.length === 0 ? [] : undefined;
      await this.inSlot(run, async (lease) => {
        await this.probeAll(run, lease, shown, first);
        // The final round needs the first round's chunk leaders: planned once, in the same slot.
        second ??= finalRound(plan, chunkDistributions(resultsOf(first))).map((parts) => new PromptJobs(parts));
        await this.probeAll(run, lease, shown, second);
      });
      if (run.absent.length > 0) {
        this.options.logger.warn("outcomes absent from the backend's reported alternatives were estimated", {
          share: "half of the smallest reported probability",
          absent: run.absent,
        });
      }
      return {
        model: this.servedModel,
        answers: answersOf(plan, [...resultsOf(first), ...resultsOf(second ?? [])], this.options.calibration),
        usage: run.usage,
      };
    } catch (err) {
      if (run.timedOut) throw deadlinePassed(this.options.timeoutSeconds);
      throw err;
    } finally {
      clearTimeout(deadline);
      clientSignal.removeEventListener("abort", onClientAbort);
      reservation.release();
    }
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
   * Reads the parts not read yet, prompt by prompt: all of a prompt's pending parts in one call where the
   * backend can (probeMany), else one call each in the order the server's prefix cache wants.
   */
  private async probeAll(run: RequestRun, lease: SlotLease, shown: ShownState, prompts: PromptJobs[]): Promise<void> {
    const { upstream } = this.options.pool.get(lease.server);
    for (const prompt of prompts) {
      const pending = prompt.pending();
      if (pending.length === 0) continue;
      const probeMany = upstream.probeMany?.bind(upstream);
      if (probeMany !== undefined && pending.length > 1) {
        await this.attemptsTogether(run, lease, probeMany, shown, prompt, pending);
      } else {
        await runInOrder([pending], upstream.prefixCache, async (i) => {
          prompt.results[i] = await this.attempts(run, lease, upstream, shown, prompt, i);
        });
      }
      prompt.settle();
    }
  }

  /**
   * After the request failed on `server`: when the failure says the server cannot serve (pool.failed), takes
   * it out of rotation and moves the request to the least loaded server it has not failed on. Returns
   * whether the request should go on there. Bounded: each server fails a request at most once.
   */
  private failOver(run: RequestRun, server: string, err: unknown, failed: Set<string>): boolean {
    const { pool, limiter, logger } = this.options;
    if (!pool.failed(server, err)) return false;
    failed.add(server);
    const next = pool.choose((id) => limiter.load(id), failed);
    if (next === undefined) return false;
    logger.warn("model server failed; its request moves to another", {
      from: server,
      to: next.id,
      failure: err instanceof UpstreamError ? err.failure : String(err),
    });
    run.reservation.moveTo(next.id);
    return true;
  }

  /** One part's call and its malformed-response retries, each a call of the lease. */
  private async attempts(
    run: RequestRun,
    lease: SlotLease,
    upstream: Upstream,
    shown: ShownState,
    prompt: PromptJobs,
    index: number,
  ): Promise<number[]> {
    const probe = prompt.probesOf(shown)[index] as ProbeRequest;
    const reads = await this.withRetries(run, lease, [index], prompt, [probe], (asked) =>
      upstream.probe(asked[0] as ProbeRequest, { signal: run.controller.signal, slot: lease.slot }).then((r) => [r]),
    );
    return reads[0] as number[];
  }

  /** A prompt's pending parts in one call (probeMany), and its retries. */
  private async attemptsTogether(
    run: RequestRun,
    lease: SlotLease,
    probeMany: NonNullable<Upstream["probeMany"]>,
    shown: ShownState,
    prompt: PromptJobs,
    pending: number[],
  ): Promise<void> {
    const probes = prompt.probesOf(shown);
    const asked = pending.map((i) => probes[i] as ProbeRequest);
    const reads = await this.withRetries(run, lease, pending, prompt, asked, (again) =>
      probeMany(again, { signal: run.controller.signal, slot: lease.slot }),
    );
    for (const [k, i] of pending.entries()) prompt.results[i] = reads[k];
  }

  /**
   * Calls of the lease for the prompt's parts `indexes` (their probes `probes`), each answering every part
   * still unread, until all are read or MALFORMED_RETRIES retries are spent: a retry asks only the parts whose
   * answer was malformed. Each call is timed and counted; a failure other than a malformed answer is thrown.
   */
  private async withRetries(
    run: RequestRun,
    lease: SlotLease,
    indexes: readonly number[],
    prompt: PromptJobs,
    probes: readonly ProbeRequest[],
    call: (probes: ProbeRequest[]) => Promise<ProbeResult[]>,
  ): Promise<number[][]> {
    const { observer, logger, malformedRetries } = this.options;
    const reads: number[][] = [];
    let left = indexes.map((_, k) => k);
    let reason = "";
    for (let attempt = 0; attempt <= malformedRetries && left.length > 0; attempt++) {
      if (attempt > 0) observer.malformedRetry();
      const asked = left.map((k) => probes[k] as ProbeRequest);
      const started = performance.now();
      let results: ProbeResult[] | undefined;
      try {
        results = await lease.call(() => call(asked), asked.length);
      } catch (err) {
        const elapsed = performance.now() - started;
        if (!(err instanceof UpstreamError && err.failure.kind === "malformed")) {
          const kind = err instanceof UpstreamError ? err.failure.kind : "error";
          observer.upstreamCall(elapsed, kind === "timeout" || kind === "aborted" ? kind : "error", lease.server);
          throw err;
        }
        reason = err.failure.detail;
      }
      const elapsed = performance.now() - started;
      const still: number[] = [];
      for (const [j, k] of left.entries()) {
        const part = prompt.parts[indexes[k] as number] as Part;
        const result = results?.[j];
        if (result !== undefined) {
          run.usage.input_tokens += result.usage.input;
          run.usage.output_tokens += result.usage.output;
          observer.tokens(result.usage.input, result.usage.output);
          const read = this.distribution(run, result, asked[j] as ProbeRequest, part);
          if ("distribution" in read) {
            reads[k] = read.distribution;
            continue;
          }
          reason = read.malformed;
        }
        still.push(k);
        logger.warn("malformed model response", { question: part.question, attempt: attempt + 1, reason });
      }
      observer.upstreamCall(elapsed, still.length > 0 ? "malformed" : "ok", lease.server);
      left = still;
    }
    if (left.length > 0) throw malformedOutput(malformedRetries + 1, reason);
    return reads;
  }

  /**
   * The part's distribution from the reported alternatives; without logprobs, from the emitted token alone
   * when that is allowed. Malformed (and never a made-up answer) when no reported alternative begins any
   * outcome, or the emitted token begins no single outcome.
   */
  private distribution(
    run: RequestRun,
    result: ProbeResult,
    probe: ProbeRequest,
    part: Part,
  ): { distribution: number[] } | { malformed: string } {
    if (result.scores !== undefined) return { distribution: readScores(result.scores) };
    // readOut is undefined for an empty list: alternatives asked for and none sent count as no logprobs.
    const read = result.alternatives === null ? undefined : readOut(result.alternatives, probe.reading);
    if (read !== undefined) {
      if (read.absent.length === part.options.length) {
        return { malformed: `no reported alternative begins an outcome; ${whereMassWent(result.alternatives ?? [])}` };
      }
      if (read.absent.length > 0) {
        this.options.observer.absentOutcomes(read.absent.length);
        run.absent.push({ question: part.question, outcomes: read.absent.map((i) => part.options[i]?.label ?? "") });
      }
      return { distribution: read.distribution };
    }
    if (!this.options.allowNoLogprobs) {
      this.options.logger.warn("the model server returned no logprobs", {
        question: part.question,
        response: result.raw ?? "(alternatives: [])",
      });
      throw noLogprobs();
    }
    const emitted = result.emitted === null ? undefined : outcomeOfToken(result.emitted.token, probe.reading);
    if (emitted === undefined) {
      return {
        malformed: `the emitted token ${JSON.stringify(result.emitted?.token ?? null)} begins no single outcome`,
      };
    }
    return { distribution: part.options.map((_, i) => (i === emitted ? 1 : 0)) };
  }
}

function resultsOf(prompts: readonly PromptJobs[]): PartResult[] {
  return prompts.flatMap((prompt) => prompt.partResults());
}

/** What the model put its probability on, when no reported alternative begins an outcome: the top three. */
function whereMassWent(alternatives: readonly Alternative[]): string {
  const top = [...alternatives].sort((a, b) => b.logprob - a.logprob).slice(0, 3);
  const shown = top.map((a) => {
    const text =
      a.token === "" && a.bytes !== undefined
        ? `<${a.bytes.map((b) => `0x${b.toString(16)}`).join(" ")}>`
        : JSON.stringify(a.token);
    return `${text} (${(100 * Math.exp(a.logprob)).toFixed(1)} %)`;
  });
  return `the model put its probability on ${shown.join(", ")}`;
}
