import type { BackendInfo, DeciderRoutes } from "@localdecider/contracts";
import type { RouteHandler } from "@localdecider/service-kit";
import { modelCards } from "../models";

/** The model cards (what the SDK reads), and what answers behind them (ours: the server, or the embedded model). */
export function listModels(
  upstreamModel: string,
  describeBackend: () => BackendInfo,
): RouteHandler<DeciderRoutes["listModels"]> {
  const models = modelCards(upstreamModel);
  return () => ({ status: 200, body: { models, backend: describeBackend() } });
}
