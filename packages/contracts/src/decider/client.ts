import { type ApiError, type CallOptions, type Client, type ClientOptions, createClient } from "../core/client";
import type { Decision, DecisionCreateParams } from "./decisions";
import { type DeciderRoutes, deciderRoutes } from "./routes";
import type { DeciderErrorCode } from "./schemas";

/** Errors a decider client throws for an error status, with the decider's error codes. */
export type DeciderApiError = ApiError<DeciderErrorCode>;

/** The decider's client: one method per route, and `decisions.create` as the `openai` SDK names it. */
export type DeciderClient = Client<DeciderRoutes> & {
  decisions: {
    /**
     * `POST /v1/decisions` (OpenAI's Decisions dialect): the body as `openai`'s `client.decisions.create()`
     * takes it, the decision parsed by its contract. An error status throws ApiError, with OpenAI's envelope
     * read: `message`, `code` and `param` (as `details[0].path`).
     */
    create(body: DecisionCreateParams, options?: CallOptions): Promise<Decision>;
  };
};

/**
 * `createDeciderClient({ baseUrl, token? })`: systemOne, decisions (and `decisions.create`), listModels, health,
 * ready. The official `@typesafe-ai/sdk` and `openai` SDKs also talk to the decider; this client is typed from
 * the service's own contracts.
 */
export function createDeciderClient(options: ClientOptions): DeciderClient {
  const client = createClient(deciderRoutes, options);
  return Object.assign(client, {
    decisions: Object.assign(client.decisions, {
      create: (body: DecisionCreateParams, call: CallOptions = {}) => client.decisions({ body, ...call }),
    }),
  });
}
