import type { ModelsResponse } from "@localdecider/contracts/decider";
import { CallError, type DeciderClient } from "./client";

/** Why a run stops before it asks anything; the CLI prints it and exits 1. */
export class PreflightStop extends Error {}

export interface PreflightOptions {
  url: string;
  /** Notes while waiting: at each change of phase, and of its text at most every 10 s (a download's percent). */
  note: (text: string) => void;
  /** Stops the wait (Ctrl-C): the run then ends as interrupted. */
  signal?: AbortSignal;
  /** Between two looks at a model on its way (downloading, loading); tests shorten it. */
  pollMs?: number;
}

/**
 * GET /v1/models before any record is sent: the decider's calibration (kept with each answer) and whether its
 * model can answer. An embedded model that failed to download or load stops the run here, with the decider's
 * own reason, instead of sending every record to a 503; one still on its way is waited for (its state noted
 * at each change), since every record would fail meanwhile. Deciders that do not say (in front of a model
 * server, or older than `backend.phase`) are taken as they are.
 */
export async function preflight(
  client: DeciderClient,
  options: PreflightOptions,
): Promise<ModelsResponse | "interrupted"> {
  let last = { phase: "", state: "", at: 0 };
  const aborted = () => options.signal?.aborted === true;
  for (;;) {
    let models: ModelsResponse;
    try {
      models = await client.models();
    } catch (err) {
      if (err instanceof CallError)
        throw new PreflightStop(`the decider at ${options.url} did not list its models: ${err.message}`);
      throw err;
    }
    const backend = models.backend;
    if (backend?.kind !== "embedded" || backend.phase === undefined || backend.phase === "ready") return models;
    if (backend.phase === "failed" || backend.phase === "closed") {
      throw new PreflightStop(
        `the decider at ${options.url} cannot answer: its model ${backend.source} is not loaded: ${backend.state}`,
      );
    }
    const now = performance.now();
    if (backend.phase !== last.phase || (backend.state !== last.state && now - last.at >= 10_000)) {
      options.note(`waiting for the decider's model: ${backend.state}`);
      last = { phase: backend.phase, state: backend.state, at: now };
    }
    if (aborted()) return "interrupted";
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, options.pollMs ?? 1000);
      function done() {
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", done);
        resolve();
      }
      options.signal?.addEventListener("abort", done, { once: true });
    });
    if (aborted()) return "interrupted";
  }
}
