import type { Answer, Question, SystemOneResponse } from "@localdecider/contracts";
import type { AppError, Logger } from "@localdecider/service-kit";
import { deciderError } from "../errors";
import { AbortedError, type Reservation, type UpstreamLimiter } from "../limiter";
import { servedModelName } from "../models";
import type { DeciderObserver } from "../observer";
import { renderPrompt } from "../prompt";
import { type Completion, type Upstream, UpstreamError } from "../upstream/types";
import { codeDistribution, valueOffset } from "./logprobs";
import { argmax, choiceConfidence, scoreStats } from "./math";
import {
  answerKey,
  callSchema,
  choiceOptions,
  type Limits,
  MAX_OUTCOMES_PER_PART,
  type OutcomeCode,
  type Part,
  type Plan,
  packCalls,
  planRequest,
} from "./plan";
import { recombineChunks } from "./recombine";

export interface DeciderOptions {
  upstream: Upstream;
  limiter: UpstreamLimiter;
  observer: DeciderObserver;
  logger: Logger;
  limits: Limits;
  malformedRetries: number;
  upstreamModel: string;
  timeoutSeconds: number;
}

type Parsed = { ok: true; values: OutcomeCode[] } | { ok: false; reason: string };

/** Checks the model's JSON: one valid code per part, nothing missing, not cut off. */
export function parseAnswers(completion: Completion, parts: Part[]): Parsed {
  if (completion.finishReason === "length") return { ok: false, reason: "output truncated (finish_reason length)" };
  if (completion.content === null) return { ok: false, reason: "no output" };
  let json: unknown;
  try {
    json = JSON.parse(completion.content);
  } catch {
    return { ok: false, reason: "output is not JSON" };
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    return { ok: false, reason: "output is not a JSON object" };
  }
  const values: OutcomeCode[] = [];
  for (const [i, part] of parts.entries()) {
    const key = answerKey(i);
    if (!Object.hasOwn(json, key)) return { ok: false, reason: `answer ${key} missing` };
    const value: unknown = (json as Record<string, unknown>)[key];
    if (!part.options.some((o) => o.code === value)) {
      return { ok: false, reason: `answer ${key} is not one of its codes: ${JSON.stringify(value)}` };
    }
    values.push(value as OutcomeCode);
  }
  return { ok: true, values };
}

/** Turns an upstream failure into the client's error. */
export function upstreamAppError(err: UpstreamError, timeoutSeconds: number): AppError {
  const f = err.failure;
  switch (f.kind) {
    case "timeout":
      return deciderError("upstream_timeout", `inference backend did not answer within ${timeoutSeconds} s`);
    case "aborted":
      return deciderError("request_aborted", "request cancelled by the client");
    case "unreachable":
      return deciderError("upstream_unreachable", `inference backend unreachable: ${f.message}`);
    case "http":
      if (f.status === 404) {
        return deciderError("model_unavailable", `inference backend returned HTTP 404: ${f.message}`);
      }
      if (f.status === 400 && /context|too long|too many tokens|maximum.*length|exceed/i.test(f.message)) {
        return deciderError("context_too_long", `the request does not fit the model's context: ${f.message}`);
      }
      if (f.status === 429 || f.status === 503) {
        return deciderError("upstream_busy", `inference backend is busy (HTTP ${f.status})`, {
          headers: { "Retry-After": f.retryAfter ?? "1" },
        });
      }
      return deciderError("upstream_error", `inference backend returned HTTP ${f.status}: ${f.message}`);
  }
}

/** Answers System One requests: plans the upstream calls, runs them through the limiter, does the math. */
export class Decider {
  private warnedNoLogprobs = false;
  private averageCallMs = 1000;

  constructor(private readonly options: DeciderOptions) {}

  get servedModel(): string {
    return servedModelName(this.options.upstreamModel);
  }

  plan(questions: Record<string, Question>): Plan {
    return planRequest(questions, this.options.limits);
  }

  /** Reserves every call of the plan, or throws the 429 that refuses the request whole. */
  admit(plan: Plan): Reservation {
    // Refusing with 429 what can never fit would make well-behaved clients retry forever.
    if (!this.options.limiter.fits(plan.callCount)) {
      throw deciderError(
        "invalid_request",
        `this request needs ${plan.callCount} upstream calls but at most ${this.options.limiter.maxQueue} can be queued (LOCALDECIDER_MAX_QUEUE); send fewer questions per request`,
      );
    }
    const reservation = this.options.limiter.tryReserve(plan.callCount);
    if (reservation === undefined) {
      this.options.observer.queueRejected();
      const retryAfter = this.options.limiter.retryAfterSeconds(this.averageCallMs);
      throw deciderError("queue_full", `too many decisions queued; retry in ${retryAfter} s`, {
        headers: { "Retry-After": String(retryAfter) },
      });
    }
    return reservation;
  }

  async decide(
    state: unknown,
    questions: Record<string, Question>,
    plan: Plan,
    reservation: Reservation,
    clientSignal: AbortSignal,
  ): Promise<SystemOneResponse> {
    // One failed call fails the request, so it also stops the request's other calls.
    const controller = new AbortController();
    const onClientAbort = () => controller.abort();
    clientSignal.addEventListener("abort", onClientAbort, { once: true });
    const usage = { input_tokens: 0, output_tokens: 0 };
    const call = (parts: Part[]) => this.call(state, parts, reservation, controller.signal, usage);
    try {
      const dists = new Map<string, number[]>();
      const chunks = new Map<string, number[][]>();
      const first = await this.all(plan.firstRound.map(call), controller);
      plan.firstRound.forEach((parts, c) => {
        parts.forEach((part, i) => {
          const dist = first[c]?.[i] as number[];
          if (part.round.kind === "chunk") {
            const list = chunks.get(part.question) ?? [];
            list[part.round.index] = dist;
            chunks.set(part.question, list);
          } else dists.set(part.question, dist);
        });
      });
      if (chunks.size > 0) {
        const finals: Part[] = [];
        for (const [name, list] of chunks) {
          const question = questions[name] as Extract<Question, { type: "choice" }>;
          const labels = Object.entries(question.criteria);
          const leaders = list.map(
            (dist, c) => labels[c * MAX_OUTCOMES_PER_PART + argmax(dist)] as [string, (typeof labels)[0][1]],
          );
          finals.push({
            question: name,
            kind: "choice",
            instructions: question.instructions ?? undefined,
            options: choiceOptions(leaders),
            round: { kind: "final" },
          });
        }
        const finalCalls = packCalls(finals, this.options.limits);
        const second = await this.all(finalCalls.map(call), controller);
        finalCalls.forEach((parts, c) => {
          parts.forEach((part, i) => {
            const list = chunks.get(part.question) as number[][];
            dists.set(part.question, recombineChunks(list, second[c]?.[i] as number[]).flat());
          });
        });
      }
      const answers: Record<string, Answer> = Object.fromEntries(
        Object.entries(questions).map(([name, q]) => [name, toAnswer(q, dists.get(name) as number[])]),
      );
      return { model: this.servedModel, answers, usage };
    } finally {
      clientSignal.removeEventListener("abort", onClientAbort);
      reservation.release();
    }
  }

  /** Promise.all that aborts the siblings as soon as one call fails. */
  private async all<T>(calls: Promise<T>[], controller: AbortController): Promise<T[]> {
    return Promise.all(
      calls.map((p) =>
        p.catch((err: unknown) => {
          controller.abort();
          throw err;
        }),
      ),
    );
  }

  /** One upstream call (with its malformed-output retries, in the same limiter slot): a distribution per part. */
  private call(
    state: unknown,
    parts: Part[],
    reservation: Reservation,
    signal: AbortSignal,
    usage: { input_tokens: number; output_tokens: number },
  ): Promise<number[][]> {
    const { upstream, observer, logger, malformedRetries, timeoutSeconds } = this.options;
    const request = { messages: renderPrompt(state, parts), schema: callSchema(parts) };
    return reservation
      .run(async () => {
        let reason = "";
        for (let attempt = 0; attempt <= malformedRetries; attempt++) {
          if (attempt > 0) observer.malformedRetry();
          const started = performance.now();
          let completion: Completion;
          try {
            completion = await upstream.complete(request, signal);
          } catch (err) {
            const outcome = err instanceof UpstreamError ? err.failure.kind : "error";
            observer.upstreamCall(
              performance.now() - started,
              outcome === "timeout" || outcome === "aborted" ? outcome : "error",
            );
            throw err;
          }
          const elapsed = performance.now() - started;
          usage.input_tokens += completion.usage.input;
          usage.output_tokens += completion.usage.output;
          observer.tokens(completion.usage.input, completion.usage.output);
          const parsed = parseAnswers(completion, parts);
          if (parsed.ok) {
            observer.upstreamCall(elapsed, "ok");
            this.averageCallMs = 0.8 * this.averageCallMs + 0.2 * elapsed;
            return this.distributions(completion, parts, parsed.values);
          }
          observer.upstreamCall(elapsed, "malformed");
          reason = parsed.reason;
          logger.warn("malformed model output", { attempt: attempt + 1, reason });
        }
        throw deciderError(
          "upstream_malformed",
          `inference backend returned malformed output ${malformedRetries + 1} time(s); last: ${reason}`,
        );
      }, signal)
      .catch((err: unknown) => {
        if (err instanceof UpstreamError) throw upstreamAppError(err, timeoutSeconds);
        if (err instanceof AbortedError) throw deciderError("request_aborted", "request cancelled");
        throw err;
      });
  }

  private distributions(completion: Completion, parts: Part[], values: OutcomeCode[]): number[][] {
    const oneHot = (part: Part, value: OutcomeCode) => part.options.map((o) => (o.code === value ? 1 : 0));
    const tokens = completion.logprobs;
    if (tokens === null) {
      if (!this.warnedNoLogprobs) {
        this.warnedNoLogprobs = true;
        this.options.logger.warn(
          "inference backend returned no logprobs; answers fall back to the emitted outcome with probability 1",
        );
      }
      return parts.map((part, i) => oneHot(part, values[i] as OutcomeCode));
    }
    const text = tokens.map((t) => t.token).join("");
    return parts.map((part, i) => {
      const offset = valueOffset(text, answerKey(i));
      const codes = part.options.map((o) => o.code);
      const dist = offset === undefined ? undefined : codeDistribution(tokens, offset, codes);
      return dist ?? oneHot(part, values[i] as OutcomeCode);
    });
  }
}

function toAnswer(question: Question, dist: number[]): Answer {
  switch (question.type) {
    case "noul":
      return { type: "noul", noul: dist[0] as number };
    case "score": {
      const { score, confidence } = scoreStats(dist);
      return {
        type: "score",
        score,
        probabilities: Object.fromEntries(dist.map((p, i) => [String(i), p])),
        confidence,
        legend: Object.fromEntries(question.criteria.map((c, i) => [String(i), c])),
      };
    }
    case "choice": {
      const labels = Object.keys(question.criteria);
      return {
        type: "choice",
        choice: labels[argmax(dist)] as string,
        probabilities: Object.fromEntries(labels.map((label, i) => [label, dist[i] as number])),
        confidence: choiceConfidence(dist),
      };
    }
  }
}
