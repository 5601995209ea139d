import type {
  BackendInfo,
  DeciderRoutes,
  ModelCard,
  ModelsCalibration,
  OpenAIModel,
} from "@localdecider/contracts/decider";
import type { RouteHandler } from "@localdecider/service-kit";
import { decisionModelCards, modelCards } from "../models";
import type { ModelGate } from "../upstream/model-gate";
import type { ServerPool } from "../upstream/pool";
import { whileClientWaits } from "./client-signal";

/**
 * The model cards (what the SDK reads): our own names, then each decision model a native server lists (which
 * a client may name too); what answers behind them (ours: the server, or the embedded model), and the
 * calibration applied to the answers (ours too). The route is open without LOCALDECIDER_API_KEY, so the model
 * servers' addresses are shown to key holders only; anyone else gets their labels (`server 1`, …).
 */
export function listModels(
  upstreamModel: string,
  describeBackend: () => BackendInfo,
  calibration: ModelsCalibration,
  pool: Pick<ServerPool, "states" | "decisionModels">,
  keyHolder: (authorization: string | undefined) => boolean,
  gate: Pick<ModelGate, "recent">,
): RouteHandler<DeciderRoutes["listModels"]> {
  const own = modelCards(upstreamModel);
  return async ({ req, res }) => {
    // Which protocol each server speaks, and which decision models it lists, are known once it was checked; a
    // client that goes away meanwhile stops waiting (request_aborted), any other failure still lists ours.
    await whileClientWaits(res, (signal) =>
      gate.recent(signal).catch((err: unknown) => {
        if (signal.aborted) throw err;
      }),
    );
    const models = [...own, ...decisionModelCards(pool.decisionModels(), own)];
    // The same models as OpenAI lists them, for the `openai` SDK's client.models.list().
    const listed = { models, object: "list" as const, data: models.map(openAIModel) };
    const backend = describeBackend();
    if (backend.kind !== "server" || keyHolder(req.get("authorization"))) {
      return { status: 200, body: { ...listed, backend, calibration } };
    }
    const states = pool.states();
    const labelOf = (id: string) => states.find((s) => s.id === id)?.label ?? id;
    const shown = {
      ...backend,
      address: states.map((s) => s.label).join(","),
      ...(backend.servers === undefined
        ? {}
        : { servers: backend.servers.map((s) => ({ ...s, server: labelOf(s.server) })) }),
    };
    return { status: 200, body: { ...listed, backend: shown, calibration } };
  };
}

/** A model card as OpenAI's model object: created at its release date (UTC midnight), owned by localdecider. */
function openAIModel(card: ModelCard): OpenAIModel {
  const created = Math.floor(Date.parse(`${card.release_date}T00:00:00Z`) / 1000);
  return { id: card.name, object: "model", created: Number.isFinite(created) ? created : 0, owned_by: "localdecider" };
}
