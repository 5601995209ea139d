import type { DeciderReadyResponse, HealthResponse } from "@localdecider/contracts";
import type { RequestHandler } from "express";
import { deciderError } from "../errors";
import type { ModelGate } from "../upstream/model-gate";

/** Liveness only: the process answers. */
export const health: RequestHandler = (_req, res) => {
  res.json({ status: "ok" } satisfies HealthResponse);
};

/** Ready when the backend lists the configured model; 503 with the reason otherwise. */
export function ready(gate: ModelGate, upstream: string, model: string): RequestHandler {
  return async (_req, res) => {
    const result = await gate.check();
    // An expected state (a model loading, a server restarting) that health checks poll: the model gate logs
    // each change of it once at warn; each poll's 503 is no error of ours.
    if (!result.ready) throw deciderError("backend_not_ready", result.message, { logLevel: "info" });
    res.json({ status: "ready", upstream, model } satisfies DeciderReadyResponse);
  };
}
