import type { JsonValue } from "@localdecider/contracts";
import type { ImageAsset } from "@localdecider/contracts/decider";
import type { Reservation } from "../limits/limiter";
import type { DeciderObserver } from "../observer";
import type { ProbeRequest, ProbeUsage } from "../upstream/types";
import type { PartResult } from "./answer";
import type { Part, Plan } from "./plan";
import { probeOf } from "./probe";
import { promptOf, type ShownState } from "./prompt";
import type { TaskUsage } from "./task";

/** What one request's calls share: its plan, its reservation, its cancellation, its usage and its notes. */
export interface RequestRun {
  /** The plan being run: replaced (once per lesson) when a native server teaches a smaller option limit. */
  plan: Plan;
  /** The model asked for upstream: LOCALDECIDER_UPSTREAM_MODEL, or a decision model the client named. */
  model: string;
  /** The client's state as it sent it: a native call carries it as is (the chat probe renders it). */
  state: JsonValue;
  /** The state as the chat probes show it: measured at admission, rendered once in the slot. */
  shown: ShownState;
  /** Images by name, passed to every native call of the request. */
  assets: Readonly<Record<string, ImageAsset>> | undefined;
  /** Whether a question may be refused while the others are answered (DecisionTask.partial). */
  partial: boolean;
  /** Servers that cannot serve this request (they do not hold the decision model it names). */
  except: ReadonlySet<string>;
  /** When the request's deadline (LOCALDECIDER_TIMEOUT) passes, in performance.now() milliseconds. */
  deadlineAt: number;
  reservation: Reservation;
  controller: AbortController;
  /** Set when the request's deadline (LOCALDECIDER_TIMEOUT) passed: every failure after it is a 504. */
  timedOut: boolean;
  usage: TaskUsage;
  /** Outcomes estimated from the bound because no reported alternative could begin them. */
  absent: { question: string; outcomes: string[] }[];
  /** Prefers the slot that last held this request's state (one about the same state reads it once). */
  affinity: string;
  /** Waits on a busy server's 429 so far (bounded by RETRY_AFTER_LIMITS.maxWaitsPerRequest). */
  busyWaits: number;
  /** The client's cache key, hashed (DecisionTask.cacheKey): passed with every call (ProbeOptions.cacheKey). */
  cacheKey: string | undefined;
}

/** The tokens a call reports, counted for the request's `usage` and the metrics. */
export function countUsage(run: RequestRun, observer: DeciderObserver, usage: ProbeUsage): void {
  run.usage.input += usage.input;
  run.usage.output += usage.output;
  run.usage.cached += usage.cached ?? 0;
  observer.tokens(usage.input, usage.output);
}

/**
 * One prompt of the plan: its parts, and what each read once asked. Its chat probes are rendered only while
 * the request holds a slot (a request waiting in the queue holds its parsed body, nothing more), and dropped
 * once every part is read.
 */
export class PromptJobs {
  /** Each part's distribution once read, or its refusal (a part refused is not asked again). */
  readonly results: (number[] | { refusal: string } | undefined)[];
  private probes: ProbeRequest[] | undefined;

  constructor(readonly parts: Part[]) {
    this.results = parts.map(() => undefined);
  }

  /** The indexes of the parts not read (nor refused) yet. */
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
    return this.parts.map((part, i) => {
      const result = this.results[i] as number[] | { refusal: string };
      return Array.isArray(result) ? { part, distribution: result } : { part, refusal: result.refusal };
    });
  }
}
