import { type DeciderErrorBody, ModelsResponse, type Question, SystemOneResponse } from "@localdecider/contracts";

/** A failed call, as the results file and the report keep it. */
export interface CallFailure {
  /** HTTP status, or 0 when no response came (unreachable, timeout, bad body). */
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

/** A small client of the decider's HTTP API (the tool's only way to the model). */
export class DeciderClient {
  private readonly base: string;

  constructor(private readonly options: ClientOptions) {
    this.base = options.url.replace(/\/+$/, "");
  }

  async models(): Promise<ModelsResponse> {
    const body = await this.call("GET", "/v1/models", undefined);
    const parsed = ModelsResponse.safeParse(body);
    if (!parsed.success)
      throw new CallError({ status: 0, code: "bad_response", message: "GET /v1/models: unexpected body" });
    return parsed.data;
  }

  async decide(model: string, state: unknown, questions: Record<string, Question>): Promise<SystemOneResponse> {
    const body = await this.call("POST", "/v1/systemone", { model, state, questions });
    const parsed = SystemOneResponse.safeParse(body);
    if (!parsed.success) {
      throw new CallError({ status: 0, code: "bad_response", message: "POST /v1/systemone: unexpected body" });
    }
    return parsed.data;
  }

  private async call(method: string, path: string, body: unknown): Promise<unknown> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.options.apiKey !== undefined) headers.authorization = `Bearer ${this.options.apiKey}`;
    let res: Response;
    try {
      res = await fetch(`${this.base}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.timeoutSeconds * 1000),
      });
    } catch (err) {
      const timeout = (err as Error).name === "TimeoutError";
      throw new CallError({
        status: 0,
        code: timeout ? "timeout" : "unreachable",
        message: timeout
          ? `no answer within ${this.options.timeoutSeconds} s`
          : `cannot reach ${this.base} (${String((err as { cause?: unknown }).cause ?? err)})`,
      });
    }
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (!res.ok) {
      const error = (json ?? {}) as Partial<DeciderErrorBody>;
      const retryAfter = Number(res.headers.get("retry-after"));
      throw new CallError(
        { status: res.status, code: error.code ?? "http_error", message: error.error ?? text.slice(0, 200) },
        Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : undefined,
      );
    }
    if (json === undefined) throw new CallError({ status: res.status, code: "bad_response", message: "not JSON" });
    return json;
  }
}

/** Worth another try: the decider or its model server was busy or unreachable for a moment. */
export function isRetryable(err: CallError): boolean {
  const { status } = err.failure;
  return status === 0 || status === 429 || status === 502 || status === 503 || status === 504;
}
