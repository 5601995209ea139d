import type { SystemOneRequest, SystemOneResponse } from "@localdecider/contracts";
import type { AppError, Logger } from "@localdecider/service-kit";
import type { Calibration } from "../calibration/calibration";
import { deciderError } from "../errors";
import { AbortedError, LimiterUnavailableError, type Reservation, type UpstreamLimiter } from "../limiter";
import { ACCEPTED_MODELS, servedModelName } from "../models";
import type { DeciderObserver } from "../observer";
import { renderPrompt } from "../prompt";
import type { ModelGate } from "../upstream/model-gate";
import type { ServerPool } from "../upstream/pool";
import { type ProbeResult, UpstreamError } from "../upstream/types";
import { answersOf, chunkDistributions, type PartResult } from "./answer";
import { finalRound, type Limits, type Part, type Plan, planRequest } from "./plan";
import { type ProbeRequest, probeOf } from "./probe";
import { outcomeOfToken, readOut, readScores } from "./readout";

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
}

/** llama.cpp's 500 when calls running at once overflow the context its slots share. */
const SHARED_CONTEXT_EXCEEDED = /context size has been exceeded/i;

/**
 * Turns an upstream failure into the client's error: a stable code and a short text. The server's own
 * text and the addresses involved go to the log (see Decider.ask), never to the client.
 */
export function upstreamAppError(err: UpstreamError, timeoutSeconds: number): AppError {
  const f = err.failure;
  switch (f.kind) {
    case "timeout":
      return deciderError("upstream_timeout", `inference backend did not answer within ${timeoutSeconds} s`);
    case "aborted":
      return deciderError("request_aborted", "request cancelled by the client");
    case "unreachable":
      return deciderError("upstream_unreachable", "inference backend unreachable");
    case "malformed":
      return deciderError("upstream_malformed", "inference backend returned a malformed response");
    case "http":
      if (f.status === 404) return deciderError("model_unavailable", "inference backend returned HTTP 404");
      if (
        (f.status === 400 && /context|too long|too many tokens|maximum.*length|exceed/i.test(f.message)) ||
        SHARED_CONTEXT_EXCEEDED.test(f.message)
      ) {
        return deciderError(
          "context_too_long",
          "the request does not fit the model's context: send a shorter state, or fewer questions per prompt (LOCALDECIDER_QUESTIONS_PER_CALL), or give the model a larger context (the embedded engine: LOCALDECIDER_CONTEXT_SIZE)",
        );
      }
      if (f.status === 429 || f.status === 503) {
        return deciderError("upstream_busy", `inference backend is busy (HTTP ${f.status})`, {
          headers: { "Retry-After": f.retryAfter ?? "1" },
        });
      }
      return deciderError("upstream_error", `inference backend returned HTTP ${f.status}`);
  }
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
}

/**
 * Answers System One requests. It only orchestrates: the plan decides the prompts and rounds, each part is
 * probed once at the position where its value begins (probe.ts), the read-out turns the reported
 * alternatives into a distribution (readout.ts), and answer.ts does the math.
 */
export class Decider {
  private averageCallMs = 1000;

  constructor(private readonly options: DeciderOptions) {}

  get servedModel(): string {
    return servedModelName(this.options.upstreamModel);
  }

  /** The use case: the model asked for, the model served, plan, admit (or refuse whole), decide. */
  async answer(request: SystemOneRequest, signal: AbortSignal): Promise<SystemOneResponse> {
    const { model, state, questions } = request;
    if (!ACCEPTED_MODELS.includes(model)) {
      throw deciderError("unknown_model", `Unknown model "${model}"; available models: ${ACCEPTED_MODELS.join(", ")}`);
    }
    await this.options.gate.assertServed();
    const plan = planRequest(questions, {
      ...this.options.limits,
      outcomesPerPart: this.options.pool.outcomesPerPart,
    });
    const reservation = await this.admit(plan);
    return this.decide(state, plan, reservation, signal);
  }

  /** Reserves every call of the plan, or throws the error that refuses the request whole. */
  private async admit(plan: Plan): Promise<Reservation> {
    // Refusing with 429 what can never fit would make well-behaved clients retry forever.
    if (!this.options.limiter.fits(plan.callCount)) {
      throw deciderError(
        "invalid_request",
        `this request needs ${plan.callCount} upstream calls but at most ${this.options.limiter.maxQueue} can be queued (LOCALDECIDER_MAX_QUEUE); send fewer questions per request`,
      );
    }
    const { limiter, pool } = this.options;
    // One server for all of the request's calls (its prompt prefix is cached there): the least loaded.
    const server = pool.choose((id) => limiter.load(id)) ?? pool.servers[0];
    let answer: Awaited<ReturnType<UpstreamLimiter["tryReserve"]>>;
    try {
      answer = await limiter.tryReserve(plan.callCount, server?.id);
    } catch (err) {
      throw limiterAppError(err);
    }
    if ("ahead" in answer) {
      this.options.observer.queueRejected();
      const retryAfter = limiter.retryAfterSeconds(answer.ahead, this.averageCallMs, pool.servers.length);
      throw deciderError("queue_full", `too many decisions queued; retry in ${retryAfter} s`, {
        headers: { "Retry-After": String(retryAfter) },
      });
    }
    return answer.reservation;
  }

  private async decide(
    state: unknown,
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
    };
    const onClientAbort = () => run.controller.abort();
    clientSignal.addEventListener("abort", onClientAbort, { once: true });
    // One deadline for the whole request: its queued calls, its calls and their retries together.
    const deadline = setTimeout(() => {
      run.timedOut = true;
      run.controller.abort();
    }, this.options.timeoutSeconds * 1000);
    try {
      const first = await this.askAll(run, state, plan.firstRound);
      const second =
        plan.splitChoices.length === 0
          ? []
          : await this.askAll(run, state, finalRound(plan, chunkDistributions(first)));
      if (run.absent.length > 0) {
        this.options.logger.warn("outcomes absent from the backend's reported alternatives were estimated", {
          share: "half of the smallest reported probability",
          absent: run.absent,
        });
      }
      return {
        model: this.servedModel,
        answers: answersOf(plan, [...first, ...second], this.options.calibration),
        usage: run.usage,
      };
    } catch (err) {
      if (run.timedOut) {
        throw deciderError("upstream_timeout", `the decision did not complete within ${this.options.timeoutSeconds} s`);
      }
      throw err;
    } finally {
      clearTimeout(deadline);
      clientSignal.removeEventListener("abort", onClientAbort);
      reservation.release();
    }
  }

  /** Probes every part of every prompt, all at once through the limiter; the first failure stops the rest. */
  private askAll(run: RequestRun, state: unknown, prompts: Part[][]): Promise<PartResult[]> {
    const calls = prompts.flatMap((parts) => {
      const shared = renderPrompt(state, parts);
      return parts.map((part, i) =>
        this.ask(run, probeOf(shared, part, i), part).catch((err: unknown) => {
          run.controller.abort();
          throw err;
        }),
      );
    });
    return Promise.all(calls);
  }

  /**
   * One part's call in a limiter slot. A shared-context overflow (calls that fit alone failing together)
   * is tried once more with no other call running; if it still does not fit, the request is too long. A
   * server that fails as a server fails is taken out of rotation and the call goes to another (failOver).
   */
  private async ask(run: RequestRun, probe: ProbeRequest, part: Part): Promise<PartResult> {
    const signal = run.controller.signal;
    const failed = new Set<string>();
    for (;;) {
      let server = run.reservation.server;
      const attempt = (on: string) => {
        server = on;
        return this.attempts(run, on, probe, part);
      };
      try {
        try {
          return await run.reservation.run(attempt, signal);
        } catch (err) {
          if (!(err instanceof UpstreamError && isSharedContextOverflow(err))) throw err;
          this.options.logger.warn("calls running together exceeded the backend's shared context; retrying alone", {
            question: part.question,
          });
          return await run.reservation.runAlone(attempt, signal);
        }
      } catch (err) {
        if (!signal.aborted && this.failOver(run, server, err, failed)) continue;
        throw this.clientError(err, part, server);
      }
    }
  }

  /**
   * After a call failed on `server`: when the failure says the server cannot serve (pool.failed), takes it
   * out of rotation and moves the request's remaining calls to the least loaded server this call has not
   * failed on. Returns whether the call should run again (on the reservation's server, which a sibling call
   * may have moved already). Bounded: each server fails a call at most once.
   */
  private failOver(run: RequestRun, server: string, err: unknown, failed: Set<string>): boolean {
    const { pool, limiter, logger } = this.options;
    if (!pool.failed(server, err)) return false;
    failed.add(server);
    if (run.reservation.server === server) {
      const next = pool.choose((id) => limiter.load(id), failed);
      if (next === undefined) return false;
      logger.warn("model server failed; its request moves to another", {
        from: server,
        to: next.id,
        failure: err instanceof UpstreamError ? err.failure : String(err),
      });
      run.reservation.moveTo(next.id);
    }
    return !failed.has(run.reservation.server);
  }

  /** A call's failure as the client's error (the server's own text goes to the log only). */
  private clientError(err: unknown, part: Part, server: string): unknown {
    if (err instanceof UpstreamError) {
      if (err.failure.kind !== "aborted") {
        this.options.logger.warn("upstream call failed", { question: part.question, server, failure: err.failure });
      }
      return upstreamAppError(err, this.options.timeoutSeconds);
    }
    if (err instanceof AbortedError) return deciderError("request_aborted", "request cancelled");
    return limiterAppError(err);
  }

  /** The call and its malformed-response retries, all inside one limiter slot. */
  private async attempts(run: RequestRun, server: string, probe: ProbeRequest, part: Part): Promise<PartResult> {
    const { pool, observer, logger, malformedRetries } = this.options;
    const { upstream } = pool.get(server);
    let reason = "";
    for (let attempt = 0; attempt <= malformedRetries; attempt++) {
      if (attempt > 0) observer.malformedRetry();
      const started = performance.now();
      let result: ProbeResult;
      try {
        result = await upstream.probe(probe, run.controller.signal);
      } catch (err) {
        const elapsed = performance.now() - started;
        if (err instanceof UpstreamError && err.failure.kind === "malformed") {
          observer.upstreamCall(elapsed, "malformed", server);
          reason = err.failure.message;
          logger.warn("malformed model response", { attempt: attempt + 1, reason });
          continue;
        }
        const kind = err instanceof UpstreamError ? err.failure.kind : "error";
        observer.upstreamCall(elapsed, kind === "timeout" || kind === "aborted" ? kind : "error", server);
        throw err;
      }
      const elapsed = performance.now() - started;
      run.usage.input_tokens += result.usage.input;
      run.usage.output_tokens += result.usage.output;
      observer.tokens(result.usage.input, result.usage.output);
      const distribution = this.distribution(run, result, probe, part);
      if (distribution !== undefined) {
        observer.upstreamCall(elapsed, "ok", server);
        this.averageCallMs = 0.8 * this.averageCallMs + 0.2 * elapsed;
        return { part, distribution };
      }
      observer.upstreamCall(elapsed, "malformed", server);
      const emitted = result.scores === undefined ? (result.emitted?.token ?? null) : null;
      reason = `the emitted token ${JSON.stringify(emitted)} begins no single outcome`;
      logger.warn("malformed model response", { attempt: attempt + 1, reason });
    }
    throw deciderError(
      "upstream_malformed",
      `inference backend returned malformed output ${malformedRetries + 1} time(s); last: ${reason}`,
    );
  }

  /**
   * The part's distribution from the reported alternatives; without logprobs, from the emitted token alone
   * when that is allowed (undefined when it begins no single outcome: a malformed answer).
   */
  private distribution(run: RequestRun, result: ProbeResult, probe: ProbeRequest, part: Part): number[] | undefined {
    if (result.scores !== undefined) return readScores(result.scores);
    // readOut is undefined for an empty list: alternatives asked for and none sent count as no logprobs.
    const read = result.alternatives === null ? undefined : readOut(result.alternatives, probe.reading);
    if (read !== undefined) {
      if (read.absent.length > 0) {
        this.options.observer.absentOutcomes(read.absent.length);
        run.absent.push({ question: part.question, outcomes: read.absent.map((i) => part.options[i]?.label ?? "") });
      }
      return read.distribution;
    }
    if (!this.options.allowNoLogprobs) {
      throw deciderError(
        "no_logprobs",
        "inference backend returned no logprobs, so no probabilities can be read; use a server that reports top_logprobs, or set LOCALDECIDER_ALLOW_NO_LOGPROBS=true to accept answers from the emitted token alone (probability 1)",
      );
    }
    const emitted = result.emitted === null ? undefined : outcomeOfToken(result.emitted.token, probe.reading);
    return emitted === undefined ? undefined : part.options.map((_, i) => (i === emitted ? 1 : 0));
  }
}

/** The shared limits' failure as the client's 503; any other error as it is. */
function limiterAppError(err: unknown): unknown {
  if (!(err instanceof LimiterUnavailableError)) return err;
  return deciderError("limiter_unavailable", `${err.message}; no new work is admitted until it answers again`, {
    headers: { "Retry-After": "1" },
    cause: err,
  });
}

function isSharedContextOverflow(err: UpstreamError): boolean {
  return err.failure.kind === "http" && err.failure.status === 500 && SHARED_CONTEXT_EXCEEDED.test(err.failure.message);
}
