import type { BackendInfo, DeciderRoutes, ModelsCalibration } from "@localdecider/contracts/decider";
import type { RouteHandler } from "@localdecider/service-kit";
import { decisionModelCards, modelCards } from "../models";
import type { ModelGate } from "../upstream/model-gate";

/**
 * The model cards (what the SDK reads): our own names, then each decision model a native server lists (which
 * a client may name too); what answers behind them (ours: the server, or the embedded model), and the
 * calibration applied to the answers (ours too).
 */
export function listModels(
  upstreamModel: string,
  describeBackend: () => BackendInfo,
  calibration: ModelsCalibration,
  decisionModels: () => readonly string[],
  gate: Pick<ModelGate, "recent">,
): RouteHandler<DeciderRoutes["listModels"]> {
  const own = modelCards(upstreamModel);
  return async () => {
    // Which protocol each server speaks, and which decision models it lists, are known once it was checked.
    await gate.recent().catch(() => undefined);
    const models = [...own, ...decisionModelCards(decisionModels(), own)];
    return { status: 200, body: { models, backend: describeBackend(), calibration } };
  };
}
