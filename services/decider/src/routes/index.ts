import type { BackendInfo } from "@localdecider/contracts";
import { jsonBody } from "@localdecider/service-kit";
import type { Express } from "express";
import { bearerAuth } from "../auth";
import type { Decider } from "../decide/decider";
import type { ModelGate } from "../upstream/model-gate";
import { health, ready } from "./health";
import { listModels } from "./models";
import { systemOne } from "./systemone";

export interface RouteDeps {
  decider: Decider;
  gate: ModelGate;
  apiKey: string | undefined;
  upstream: string;
  upstreamModel: string;
  describeBackend: () => BackendInfo;
  bodyLimit: string | number;
}

export { ROUTE_DOCS } from "./docs";

/** Every route, registered in one place; ROUTE_DOCS (./docs) documents the same paths for OpenAPI. */
export function registerRoutes(app: Express, deps: RouteDeps): void {
  app.get("/health", health);
  app.get("/ready", ready(deps.gate, deps.upstream, deps.upstreamModel));
  app.use("/v1", bearerAuth(deps.apiKey));
  app.get("/v1/models", listModels(deps.upstreamModel, deps.describeBackend));
  // The body is parsed after the bearer check, so an unauthenticated client cannot make us read 1 MiB.
  app.post("/v1/systemone", jsonBody({ limit: deps.bodyLimit }), systemOne(deps.decider));
}
