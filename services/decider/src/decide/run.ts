import type { JsonValue } from "@localdecider/contracts";
import type { SystemOneRequest } from "@localdecider/contracts/decider";
import type { Reservation } from "../limits/limiter";
import type { DeciderObserver } from "../observer";
import type { ProbeRequest, ProbeUsage } from "../upstream/types";
import type { PartResult } from "./answer";
import type { Part, Plan } from "./plan";
import { probeOf } from "./probe";
import { promptOf, type ShownState } from "./prompt";

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
  /** Jev 1.14's images, passed to every native call of the request. */
  assets: SystemOneRequest["assets"];
  /** Servers that cannot serve this request (they do not hold the decision model it names). */
  except: ReadonlySet<string>;
  /** When the request's deadline (LOCALDECIDER_TIMEOUT) passes, in performance.now() milliseconds. */
  deadlineAt: number;
  reservation: Reservation;
  controller: AbortController;
  /** Set when the request's deadline (LOCALDECIDER_TIMEOUT) passed: every failure after it is a 504. */
  timedOut: boolean;
  usage: { input_tokens: number; output_tokens: number };
  /** Prompt tokens the backend took from its cache (ProbeUsage.cached), summed over the request's calls. */
  cachedTokens: number;
  /** Outcomes estimated from the bound because no reported alternative could begin them. */
  absent: { question: string; outcomes: string[] }[];
  /** The client's prompt_cache_key, when it gave one (ProbeOptions.cacheKey). */
  cacheKey?: string | undefined;
  /** Prefers the slot that last held this request's state (one about the same state reads it once). */
  affinity: string;
}

/** The tokens a call reports, counted for the request's `usage` and the metrics. */
export function countUsage(run: RequestRun, observer: DeciderObserver, usage: ProbeUsage): void {
  run.usage.input_tokens += usage.input;
  run.usage.output_tokens += usage.output;
  run.cachedTokens += usage.cached ?? 0;
  observer.tokens(usage.input, usage.output);
}

/**
 * One prompt of the plan: its parts, and what each read once asked. Its chat probes are rendered only while
 * the request holds a slot (a request waiting in the queue holds its parsed body, nothing more), and dropped
 * once every part is read.
 */
export class PromptJobs {
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
