import { type ApiError, type Client, type ClientOptions, createClient } from "../core/client";
import { type DeciderRoutes, deciderRoutes } from "./routes";
import type { DeciderErrorCode } from "./schemas";

/** Errors a decider client throws for an error status, with the decider's error codes. */
export type DeciderApiError = ApiError<DeciderErrorCode>;

/**
 * `createDeciderClient({ baseUrl, token? })`: systemOne, listModels, health, ready. The official
 * `@typesafe-ai/sdk` also talks to the decider; this client is typed from the service's own contracts.
 */
export function createDeciderClient(options: ClientOptions): Client<DeciderRoutes> {
  return createClient(deciderRoutes, options);
}
