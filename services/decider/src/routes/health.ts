import type { DeciderRoutes } from "@localdecider/contracts/decider";
import type { RouteHandler } from "@localdecider/service-kit";
import { deciderError } from "../errors";
import type { UpstreamLimiter } from "../limits/limiter";
import type { ModelGate } from "../upstream/model-gate";
import type { ServerPool } from "../upstream/pool";

/** Liveness only: the process answers. */
export const health: RouteHandler<DeciderRoutes["health"]> = () => ({ status: 200, body: { status: "ok" } });

/**
 * Ready when the shared limits answer (with LOCALDECIDER_REDIS_URL) and a backend lists the configured
 * model (with several model servers: at least one); 503 with the reason otherwise. With several servers
 * both answers list each server's state (the 503 in its `details`).
 */
export function ready(
  gate: ModelGate,
  limiter: Pick<UpstreamLimiter, "unavailable">,
  pool: Pick<ServerPool, "states" | "servers">,
  upstream: string,
  model: string,
): RouteHandler<DeciderRoutes["ready"]> {
  return async () => {
    // Checked first: without the shared limits no work is admitted, whatever the model server says.
    const down = await limiter.unavailable();
    if (down !== undefined) throw deciderError("limiter_unavailable", down, { logLevel: "info" });
    const result = await gate.check();
    // An expected state (a model loading, a server restarting) that health checks poll: the model gate logs
    // each change of it once at warn; each poll's 503 is no error of ours. A model on its way to ready (the
    // embedded engine downloading or loading, which logs its own progress) is not logged at info at all.
    const states = pool.states();
    const several = pool.servers.length > 1;
    if (!result.ready) {
      throw deciderError("backend_not_ready", result.message, {
        logLevel: result.starting === true ? "debug" : "info",
        ...(several ? { details: states.map((s) => ({ path: s.id, message: s.reason ?? "ready" })) } : {}),
      });
    }
    const servers = states.map((s) =>
      s.inRotation
        ? { server: s.id, state: "ready" as const }
        : { server: s.id, state: "out" as const, reason: s.reason },
    );
    return { status: 200, body: { status: "ready", upstream, model, ...(several ? { servers } : {}) } };
  };
}
