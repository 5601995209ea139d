import type { ModelsResponse } from "@localdecider/contracts";
import type { RequestHandler } from "express";
import { modelCards } from "../models";

export function listModels(upstreamModel: string): RequestHandler {
  const body: ModelsResponse = { models: modelCards(upstreamModel) };
  return (_req, res) => {
    res.json(body);
  };
}
