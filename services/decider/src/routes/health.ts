import type { DeciderReadyResponse, HealthResponse } from "@localdecider/contracts";
import type { RequestHandler } from "express";
import { deciderError } from "../errors";
import type { ReadinessProbe } from "../upstream/readiness";

/** Liveness only: the process answers. */
export const health: RequestHandler = (_req, res) => {
  res.json({ status: "ok" } satisfies HealthResponse);
};

/** Ready when the backend lists the configured model; 503 with the reason otherwise. */
export function ready(probe: ReadinessProbe, upstream: string, model: string): RequestHandler {
  return async (_req, res) => {
    const result = await probe.check();
    if (!result.ready) throw deciderError("backend_not_ready", result.message);
    res.json({ status: "ready", upstream, model } satisfies DeciderReadyResponse);
  };
}
