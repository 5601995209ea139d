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
 *
 * /ready is open to anyone (probes carry no key), so it names no internal address: each model server is
 * named by its label (`server 1`, …) and the shared limits' Redis not at all. A caller holding the API key
 * (`keyHolder`: LOCALDECIDER_API_KEY set and its bearer sent) sees the addresses, and what failed on Redis.
 *
 * The 200 body says where the limits are counted (`limits`): without LOCALDECIDER_REDIS_URL each replica
 * counts alone. That is said, never failed on: one replica needs no Redis, and an orchestrator that scaled a
 * deployment past one without it is shown why it admits more than MAX_INFLIGHT per model server.
 */
export function ready(
  gate: ModelGate,
  limiter: Pick<UpstreamLimiter, "unavailable" | "shared">,
  pool: Pick<ServerPool, "states" | "servers">,
  upstream: string,
  model: string,
  keyHolder: (authorization: string | undefined) => boolean,
): RouteHandler<DeciderRoutes["ready"]> {
  return async ({ req }) => {
    const full = keyHolder(req.get("authorization"));
    // Checked first: without the shared limits no work is admitted, whatever the model server says.
    const down = await limiter.unavailable();
    if (down !== undefined) {
      // The log keeps what failed and where (the request's line names it in `cause`).
      throw deciderError("limiter_unavailable", full ? down.detail : down.message, {
        logLevel: "info",
        cause: new Error(down.detail),
      });
    }
    const result = await gate.check();
    // An expected state (a model loading, a server restarting) that health checks poll: the model gate logs
    // each change of it once at warn; each poll's 503 is no error of ours. A model on its way to ready (the
    // embedded engine downloading or loading, which logs its own progress) is not logged at info at all.
    const states = pool.states();
    const name = (s: (typeof states)[number]) => (full ? s.id : s.label);
    const several = pool.servers.length > 1;
    if (!result.ready) {
      throw deciderError("backend_not_ready", result.message, {
        logLevel: result.starting === true ? "debug" : "info",
        ...(several ? { details: states.map((s) => ({ path: name(s), message: s.reason ?? "ready" })) } : {}),
      });
    }
    const protocolOf = (s: (typeof states)[number]) => (s.protocol === undefined ? {} : { protocol: s.protocol });
    const servers = states.map((s) =>
      s.inRotation
        ? { server: name(s), state: "ready" as const, ...protocolOf(s) }
        : { server: name(s), state: "out" as const, reason: s.reason, ...protocolOf(s) },
    );
    const shown = full ? upstream : states.map((s) => s.label).join(",");
    // One model server: its protocol beside the address; several: each in its entry.
    const protocol = several || states[0] === undefined ? {} : protocolOf(states[0]);
    return {
      status: 200,
      body: {
        status: "ready",
        upstream: shown,
        model,
        ...protocol,
        ...(several ? { servers } : {}),
        limits: limiter.shared === undefined ? "this process" : "shared through Redis",
      },
    };
  };
}
