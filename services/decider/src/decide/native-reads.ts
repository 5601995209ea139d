import type { Logger } from "@localdecider/service-kit";
import type { SlotLease } from "../limits/types";
import type { DeciderObserver } from "../observer";
import { backoffMs, RETRY_AFTER_LIMITS, retryAfterSeconds } from "../upstream/retry-after";
import { type NativeUpstream, UpstreamError } from "../upstream/types";
import { nativeQuestionOf, type Read, readNativeAnswer } from "./native";
import type { Part } from "./plan";
import { countUsage, type PromptJobs, type RequestRun } from "./run";

export interface NativeReadsOptions {
  observer: DeciderObserver;
  logger: Logger;
}

/**
 * How a prompt's parts are read from a server that speaks System One: the parts asked in one native call
 * (under the client's question names), each answer checked against its part (native.ts). While the server
 * answers 429 and the wait (waitOut) ends before the request's deadline, the call waits and is sent again
 * (llama.cpp's decision queue is full: it drains); a 413 splits the call in two, down to one part.
 */
export function nativeReads(
  options: NativeReadsOptions,
  run: RequestRun,
  lease: SlotLease,
  upstream: NativeUpstream,
  prompt: PromptJobs,
): (asked: number[]) => Promise<Read[]> {
  const read = async (parts: Part[]): Promise<Read[]> => {
    const call = {
      model: run.model,
      state: run.state,
      questions: parts.map(nativeQuestionOf),
      ...(run.assets === undefined || Object.keys(run.assets).length === 0 ? {} : { assets: run.assets }),
    };
    const signal = run.controller.signal;
    for (;;) {
      try {
        const where = { signal, slot: lease.slot, ...(run.cacheKey === undefined ? {} : { cacheKey: run.cacheKey }) };
        const result = await lease.call(() => upstream.decide(call, where), parts.length);
        countUsage(run, options.observer, result.usage);
        return parts.map((part) =>
          readNativeAnswer(
            part,
            Object.hasOwn(result.answers, part.question) ? result.answers[part.question] : undefined,
          ),
        );
      } catch (err) {
        const failure = err instanceof UpstreamError && !signal.aborted ? err.failure : undefined;
        if (failure?.kind === "busy" && (await waitOut(options.logger, run, lease, failure))) continue;
        if (failure?.kind === "too_large" && parts.length > 1) {
          options.logger.info("the model server refused a call as too large; sending it in two", {
            server: lease.server,
            questions: parts.length,
          });
          const half = Math.ceil(parts.length / 2);
          const head = await read(parts.slice(0, half));
          return [...head, ...(await read(parts.slice(half)))];
        }
        throw err;
      }
    }
  };
  return (asked) => read(asked.map((i) => prompt.parts[i] as Part));
}

/**
 * Waits out a native server's 429 (backoffMs: at least 1 s, doubling, with jitter, as long as its Retry-After
 * asks within bounds) when that ends before the request's deadline and the request has waits left
 * (RETRY_AFTER_LIMITS.maxWaitsPerRequest); returns false (the 429 then stands: 503 with Retry-After) otherwise.
 */
async function waitOut(
  logger: Logger,
  run: RequestRun,
  lease: SlotLease,
  failure: { retryAfter?: string },
): Promise<boolean> {
  if (run.busyWaits >= RETRY_AFTER_LIMITS.maxWaitsPerRequest) return false;
  const asked = retryAfterSeconds(failure.retryAfter);
  if (asked !== undefined && asked * 1000 > RETRY_AFTER_LIMITS.maxWaitMs) return false;
  const ms = backoffMs(failure.retryAfter, run.busyWaits);
  if (performance.now() + ms >= run.deadlineAt) return false;
  run.busyWaits += 1;
  logger.info("the model server is busy (429); the call waits and is sent again", { server: lease.server, waitMs: ms });
  const signal = run.controller.signal;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
  if (signal.aborted) throw new UpstreamError({ kind: "aborted" });
  return true;
}
