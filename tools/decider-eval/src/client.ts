import { ApiError, ApiRequestError, type Client } from "@localdecider/contracts";
import {
  createDeciderClient,
  type DeciderRoutes,
  type ModelsResponse,
  type Question,
  type SystemOneResponse,
} from "@localdecider/contracts/decider";
import type { DataRecord } from "./dataset";

/**
 * The tool's way to the model: the decider's typed client from the contracts (`createDeciderClient`), with
 * its failures turned into what the results file and the report keep.
 */

/** A failed call, as the results file and the report keep it. */
export interface CallFailure {
  /** HTTP status, or 0 when no usable answer came (unreachable, timeout, a body breaking the contract). */
  status: number;
  code: string;
  message: string;
}

export class CallError extends Error {
  constructor(
    readonly failure: CallFailure,
    readonly retryAfterSeconds?: number,
  ) {
    super(`${failure.status === 0 ? "" : `HTTP ${failure.status} `}${failure.code}: ${failure.message}`);
  }
}

export interface ClientOptions {
  url: string;
  apiKey: string | undefined;
  /** Seconds one call may take before it is abandoned. */
  timeoutSeconds: number;
}

export class DeciderClient {
  private readonly client: Client<DeciderRoutes>;

  constructor(options: ClientOptions) {
    this.client = createDeciderClient({
      baseUrl: options.url,
      token: options.apiKey,
      timeoutMs: options.timeoutSeconds * 1000,
    });
  }

  models(): Promise<ModelsResponse> {
    return failuresAsCallErrors(() => this.client.listModels());
  }

  decide(model: string, state: DataRecord["state"], questions: Record<string, Question>): Promise<SystemOneResponse> {
    return failuresAsCallErrors(() => this.client.systemOne({ body: { model, state, questions } }));
  }
}

async function failuresAsCallErrors<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof ApiError) {
      const retryAfter = Number(err.headers.get("retry-after") ?? Number.NaN);
      throw new CallError(
        { status: err.status, code: err.code ?? "http_error", message: err.message },
        Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : undefined,
      );
    }
    if (err instanceof ApiRequestError) {
      const code = err.reason === "network" ? "unreachable" : err.reason;
      throw new CallError({ status: 0, code, message: err.message });
    }
    throw err;
  }
}

/** Worth another try: the decider or its model server was busy or unreachable for a moment. */
export function isRetryable(err: CallError): boolean {
  const { status, code } = err.failure;
  return (
    (status === 0 && code !== "invalid_response") ||
    status === 429 ||
    status === 502 ||
    status === 503 ||
    status === 504
  );
}
