import type { BackendInfo, DeciderRoutes, ModelsCalibration } from "@localdecider/contracts/decider";
import type { RouteHandler } from "@localdecider/service-kit";
import { modelCards } from "../models";
import type { ServerPool } from "../upstream/pool";

/**
 * The model cards (what the SDK reads), what answers behind them (ours: the server, or the embedded model),
 * and the calibration applied to the answers (ours too). The route is open without LOCALDECIDER_API_KEY, so
 * the model servers' addresses are shown to key holders only; anyone else gets their labels (`server 1`, …).
 */
export function listModels(
  upstreamModel: string,
  describeBackend: () => BackendInfo,
  calibration: ModelsCalibration,
  pool: Pick<ServerPool, "states">,
  keyHolder: (authorization: string | undefined) => boolean,
): RouteHandler<DeciderRoutes["listModels"]> {
  const models = modelCards(upstreamModel);
  return ({ req }) => {
    const backend = describeBackend();
    const shown =
      backend.kind === "server" && !keyHolder(req.get("authorization"))
        ? {
            ...backend,
            address: pool
              .states()
              .map((s) => s.label)
              .join(","),
          }
        : backend;
    return { status: 200, body: { models, backend: shown, calibration } };
  };
}
