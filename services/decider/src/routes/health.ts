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
    if (!result.ready) throw deciderError("backend_not_ready", result.message);
    res.json({ status: "ready", upstream, model } satisfies DeciderReadyResponse);
  };
}
