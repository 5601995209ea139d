import type { BackendInfo, DeciderRoutes, ModelsCalibration } from "@localdecider/contracts/decider";
import type { RouteHandlers } from "@localdecider/service-kit";
import type { UpstreamAccepts } from "../backend";
import type { Decider } from "../decide/decider";
import type { UpstreamLimiter } from "../limits/limiter";
import type { ModelGate } from "../upstream/model-gate";
import type { ServerPool } from "../upstream/pool";
import { decisions } from "./decisions";
import { health, ready } from "./health";
import { listModels } from "./models";
import { systemOne } from "./systemone";

export interface RouteDeps {
  decider: Decider;
  gate: ModelGate;
  limiter: Pick<UpstreamLimiter, "unavailable">;
  pool: Pick<ServerPool, "states" | "servers" | "decisionModels">;
  upstream: string;
  upstreamModel: string;
  describeBackend: () => BackendInfo;
  /** Whether images and box questions may pass (routes/images.ts). */
  upstreamAccepts: () => UpstreamAccepts;
  /** LOCALDECIDER_CALIBRATION as GET /v1/models shows it. */
  calibration: ModelsCalibration;
  /** Whether an Authorization header carries LOCALDECIDER_API_KEY (auth.ts keyHolder): only then are addresses shown. */
  keyHolder: (authorization: string | undefined) => boolean;
}

/** One handler per contract in deciderRoutes (@localdecider/contracts); registerRoutes wires them. */
export function deciderHandlers(deps: RouteDeps): RouteHandlers<DeciderRoutes> {
  return {
    health,
    ready: ready(deps.gate, deps.limiter, deps.pool, deps.upstream, deps.upstreamModel, deps.keyHolder),
    listModels: listModels(
      deps.upstreamModel,
      deps.describeBackend,
      deps.calibration,
      deps.pool,
      deps.keyHolder,
      deps.gate,
    ),
    systemOne: systemOne(deps.decider, deps.upstreamAccepts),
    decisions: decisions(deps.decider, deps.upstreamAccepts),
  };
}
