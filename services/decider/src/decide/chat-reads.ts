import type { Logger } from "@localdecider/service-kit";
import type { SlotLease } from "../limits/types";
import type { DeciderObserver } from "../observer";
import { noLogprobs } from "../upstream/failure";
import type { Alternative, ProbeRequest, ProbeResult, Upstream } from "../upstream/types";
import type { Read } from "./native";
import type { Part } from "./plan";
import { outcomeOfToken, readOut, readScores } from "./readout";
import { countUsage, type PromptJobs, type RequestRun } from "./run";

export interface ChatReadsOptions {
  observer: DeciderObserver;
  logger: Logger;
  /** LOCALDECIDER_ALLOW_NO_LOGPROBS: answer from the emitted token alone when a backend sends no logprobs. */
  allowNoLogprobs: boolean;
}

/**
 * How a prompt's parts are read on the chat path: each part is probed at the position where its value begins
 * (probe.ts), all the parts asked in one call where the backend can (probeMany), else one call for the one
 * part asked; the reported alternatives (or an engine's exact scores) become the part's distribution.
 */
export function chatReads(
  options: ChatReadsOptions,
  run: RequestRun,
  lease: SlotLease,
  upstream: Upstream,
  prompt: PromptJobs,
): (asked: number[]) => Promise<Read[]> {
  return async (asked) => {
    const probes = prompt.probesOf(run.shown);
    const requests = asked.map((i) => probes[i] as ProbeRequest);
    const call = { signal: run.controller.signal, slot: lease.slot, cacheKey: run.cacheKey };
    const many = upstream.probeMany?.bind(upstream);
    const results =
      many !== undefined && requests.length > 1
        ? await lease.call(() => many(requests, call), requests.length)
        : [await lease.call(() => upstream.probe(requests[0] as ProbeRequest, call), 1)];
    return asked.map((i, j): Read => {
      const result = results[j];
      if (result === undefined) return { malformed: "the backend answered fewer probes than it was asked" };
      countUsage(run, options.observer, result.usage);
      return distribution(options, run, result, requests[j] as ProbeRequest, prompt.parts[i] as Part);
    });
  };
}

/**
 * The part's distribution from the reported alternatives; without logprobs, from the emitted token alone
 * when that is allowed. Malformed (and never a made-up answer) when no reported alternative begins any
 * outcome, or the emitted token begins no single outcome.
 */
function distribution(
  options: ChatReadsOptions,
  run: RequestRun,
  result: ProbeResult,
  probe: ProbeRequest,
  part: Part,
): Read {
  if (result.scores !== undefined) return { distribution: readScores(result.scores) };
  // readOut is undefined for an empty list: alternatives asked for and none sent count as no logprobs.
  const read = result.alternatives === null ? undefined : readOut(result.alternatives, probe.reading);
  if (read !== undefined) {
    if (read.absent.length === part.options.length) {
      return { malformed: `no reported alternative begins an outcome; ${whereMassWent(result.alternatives ?? [])}` };
    }
    if (read.absent.length > 0) {
      options.observer.absentOutcomes(read.absent.length);
      run.absent.push({ question: part.question, outcomes: read.absent.map((i) => part.options[i]?.label ?? "") });
    }
    return { distribution: read.distribution };
  }
  if (!options.allowNoLogprobs) {
    options.logger.warn("the model server returned no logprobs", {
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
