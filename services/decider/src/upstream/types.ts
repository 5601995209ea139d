import type { TokenLogprob } from "../decide/logprobs";
import type { ChatMessage } from "../prompt";

export interface CompletionRequest {
  messages: ChatMessage[];
  /** JSON schema the answer must follow (sent as a strict `json_schema` response format). */
  schema: Record<string, unknown>;
}

export interface Completion {
  content: string | null;
  finishReason: string | null;
  /** The emitted tokens with their alternatives; null when the backend sent no logprobs. */
  logprobs: TokenLogprob[] | null;
  usage: { input: number; output: number };
}

/** What the decider needs from the model server. */
export interface Upstream {
  complete(request: CompletionRequest, signal: AbortSignal): Promise<Completion>;
}

/** How an upstream call failed, in terms the HTTP layer maps to statuses. */
export type UpstreamFailure =
  | { kind: "timeout" }
  | { kind: "aborted" }
  | { kind: "unreachable"; message: string }
  | { kind: "http"; status: number; message: string; retryAfter?: string };

export class UpstreamError extends Error {
  constructor(readonly failure: UpstreamFailure) {
    super(failure.kind === "http" ? `upstream HTTP ${failure.status}: ${failure.message}` : `upstream ${failure.kind}`);
    this.name = "UpstreamError";
  }
}

/**
 * The most specific message in an error's cause chain (fetch says "fetch failed" and keeps the real reason,
 * e.g. `connect ECONNREFUSED 127.0.0.1:8081`, in `cause`). Duck-typed: errors from another realm (undici's
 * under Jest) are not `instanceof Error` here.
 */
export function rootCauseMessage(err: unknown): string {
  let current: unknown = err;
  let message = String(err);
  for (let depth = 0; depth < 5 && typeof current === "object" && current !== null; depth++) {
    const { message: m, cause } = current as { message?: unknown; cause?: unknown };
    if (typeof m === "string" && m !== "") message = m;
    current = cause;
  }
  return message;
}
