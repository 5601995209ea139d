import type { BackendInfo, DeciderRoutes, ModelsCalibration } from "@localdecider/contracts/decider";
import type { RouteHandler } from "@localdecider/service-kit";
import { modelCards } from "../models";

/**
 * The model cards (what the SDK reads), what answers behind them (ours: the server, or the embedded model),
 * and the calibration applied to the answers (ours too).
 */
export function listModels(
  upstreamModel: string,
  describeBackend: () => BackendInfo,
  calibration: ModelsCalibration,
): RouteHandler<DeciderRoutes["listModels"]> {
  const models = modelCards(upstreamModel);
  return () => ({ status: 200, body: { models, backend: describeBackend(), calibration } });
}
