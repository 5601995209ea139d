import type { Logger } from "@localdecider/service-kit";
import type { SlotLease } from "../limits/types";
import type { DeciderObserver } from "../observer";
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
 * answers 429 with a Retry-After that ends before the request's deadline, the call waits that long and is
 * sent again (llama.cpp's decision queue is full: it drains); a 413 splits the call in two, down to one part.
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
        if (failure?.kind === "busy" && (await waitOut(options.logger, run, lease, failure.retryAfter))) continue;
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
 * Waits out a native server's 429 for as long as its Retry-After says (1 s without one), when that ends
 * before the request's deadline; returns false (the 429 then stands: 503 with Retry-After) otherwise.
 */
async function waitOut(
  logger: Logger,
  run: RequestRun,
  lease: SlotLease,
  retryAfter: string | undefined,
): Promise<boolean> {
  const ms = retryAfterMs(retryAfter);
  if (performance.now() + ms >= run.deadlineAt) return false;
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

/** Milliseconds a Retry-After asks for: delay-seconds or an HTTP date (RFC 9110, 10.2.3); 1 s without one. */
export function retryAfterMs(value: string | undefined): number {
  if (value === undefined || value.trim() === "") return 1000;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? 1000 : Math.max(0, at - Date.now());
}
