import { CallError, type CallFailure, type DeciderClient, isRetryable } from "./client";
import type { LoadedRecord } from "./dataset";
import type { Progress } from "./progress";
import { appendResult } from "./results";

export interface RunOptions {
  client: DeciderClient;
  model: string;
  /** Recorded with each answer: the fit date of the decider's calibration, or null. */
  calibration: string | null;
  resultsPath: string;
  /** Requests in flight at once. */
  concurrency: number;
  /** Further tries of a call that failed for a moment (429, 502, 503, 504, no answer). */
  retries: number;
  progress: Progress;
  /** Stops launching new calls when aborted (Ctrl-C); calls in flight finish and are kept. */
  signal?: AbortSignal;
}

export interface RunSummary {
  answered: number;
  failed: { key: string; line: number; error: CallFailure }[];
  retries: number;
  interrupted: boolean;
}

/** Longest wait before a retry, whatever Retry-After says. */
const MAX_RETRY_WAIT_SECONDS = 30;

/** Asks every record once, `concurrency` at a time, appending each result to the results file as it ends. */
export async function runRecords(records: readonly LoadedRecord[], options: RunOptions): Promise<RunSummary> {
  const summary: RunSummary = { answered: 0, failed: [], retries: 0, interrupted: false };
  let next = 0;
  const worker = async () => {
    while (next < records.length) {
      if (options.signal?.aborted === true) {
        summary.interrupted = true;
        return;
      }
      const item = records[next++] as LoadedRecord;
      const at = () => new Date().toISOString();
      try {
        const response = await withRetries(
          () => options.client.decide(options.model, item.record.state, item.record.questions),
          options.retries,
          () => {
            summary.retries += 1;
          },
        );
        appendResult(options.resultsPath, {
          key: item.key,
          line: item.line,
          status: "answered",
          model: response.model,
          calibration: options.calibration,
          answers: response.answers,
          at: at(),
        });
        summary.answered += 1;
        options.progress.tick(false);
      } catch (err) {
        if (!(err instanceof CallError)) throw err;
        appendResult(options.resultsPath, {
          key: item.key,
          line: item.line,
          status: "failed",
          error: err.failure,
          at: at(),
        });
        summary.failed.push({ key: item.key, line: item.line, error: err.failure });
        options.progress.tick(true);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency, records.length) }, worker));
  return summary;
}

async function withRetries<T>(call: () => Promise<T>, retries: number, onRetry: () => void): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (!(err instanceof CallError) || !isRetryable(err) || attempt >= retries) throw err;
      onRetry();
      const wait = Math.min(MAX_RETRY_WAIT_SECONDS, err.retryAfterSeconds ?? 0.5 * 2 ** attempt);
      await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    }
  }
}
