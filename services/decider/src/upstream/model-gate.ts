import type { Logger } from "@localdecider/service-kit";
import { deciderError } from "../errors";
import { requestCancelled } from "./failure";
import type { Readiness, ReadinessProbe } from "./readiness";

/** How long a model-list answer is trusted on the decision path before it is asked again. */
export const MODEL_CHECK_MAX_AGE_MS = 5000;

/**
 * Keeps decisions from being served by the wrong model. llama.cpp answers a chat call with whatever model
 * it loaded, whatever name the call gives, so a 200 proves nothing: the model list does. Decisions reuse
 * a recent answer (at most MODEL_CHECK_MAX_AGE_MS old, one probe at a time); /ready always asks afresh.
 * Only a backend that answered and lacks the model blocks decisions: an unreachable one fails the
 * decision's own calls with their own error.
 */
export class ModelGate {
  private last: { at: number; result: Readiness } | undefined;
  private pending: Promise<Readiness> | undefined;

  constructor(
    private readonly probe: ReadinessProbe,
    private readonly logger: Logger,
    private readonly maxAgeMs = MODEL_CHECK_MAX_AGE_MS,
  ) {}

  /** Probes now (for /ready) and remembers the answer for the decision path. */
  async check(): Promise<Readiness> {
    this.pending ??= this.probe.check().then(
      (result) => {
        this.logChange(result);
        this.last = { at: Date.now(), result };
        this.pending = undefined;
        return result;
      },
      (err: unknown) => {
        this.pending = undefined;
        throw err;
      },
    );
    return this.pending;
  }

  /** The model server's state goes to the log when it changes (with the detail clients are not shown). */
  private logChange(result: Readiness): void {
    const before = this.last?.result;
    const text = (r: Readiness | undefined) =>
      r === undefined ? "" : r.ready ? "ready" : `${r.message}|${r.detail ?? ""}`;
    if (text(before) === text(result)) return;
    if (result.ready) this.logger.info("model server ready");
    else if (result.starting === true) this.logger.debug("model server not ready yet", { reason: result.message });
    else this.logger.warn("model server not ready", { reason: result.message, detail: result.detail });
  }

  /**
   * Throws the 503 `model_unavailable` when the backend answered that it does not hold the model. A request
   * waiting for a probe (a server's start-up check can take seconds) stops waiting when `signal` aborts (its
   * client went away) and throws `request_aborted`: the probe goes on for whoever else waits on it.
   */
  async assertServed(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw requestCancelled();
    const fresh = this.last !== undefined && Date.now() - this.last.at < this.maxAgeMs;
    const result = fresh ? (this.last as { result: Readiness }).result : await untilAborted(this.check(), signal);
    if (!result.ready && result.modelMissing) throw deciderError("model_unavailable", result.message);
  }
}

/** `promise`, or a `request_aborted` rejection as soon as `signal` aborts. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(requestCancelled());
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
