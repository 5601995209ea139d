import type { BackendInfo, ModelsResponse } from "@localdecider/contracts";
import type { RequestHandler } from "express";
import { modelCards } from "../models";

/** The model cards (what the SDK reads), and what answers behind them (ours: the server, or the embedded model). */
export function listModels(upstreamModel: string, describeBackend: () => BackendInfo): RequestHandler {
  const models = modelCards(upstreamModel);
  return (_req, res) => {
    res.json({ models, backend: describeBackend() } satisfies ModelsResponse);
  };
}
