import { rootCauseMessage } from "./types";

/** The outcome of probing `GET {upstream}/v1/models` for the configured model. */
export type Readiness = { ready: true } | { ready: false; message: string };

export interface ReadinessProbe {
  check(): Promise<Readiness>;
}

/**
 * Probes the model list with plain fetch (the `openai` client would turn a 404 into an exception that
 * hides the status). 404 gets the exact text the seed fixes; other failures name what is wrong.
 */
export class ModelListProbe implements ReadinessProbe {
  constructor(
    private readonly options: { baseURL: string; model: string; apiKey: string | undefined; timeoutMs: number },
  ) {}

  async check(): Promise<Readiness> {
    let response: Response;
    try {
      response = await fetch(`${this.options.baseURL}/models`, {
        headers: this.options.apiKey === undefined ? {} : { Authorization: `Bearer ${this.options.apiKey}` },
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
    } catch (err) {
      return { ready: false, message: `inference backend unreachable: ${rootCauseMessage(err)}` };
    }
    if (response.status === 404) return { ready: false, message: "inference backend returned HTTP 404" };
    if (!response.ok) return { ready: false, message: `inference backend returned HTTP ${response.status}` };
    let ids: string[];
    try {
      const body = (await response.json()) as { data?: unknown };
      if (!Array.isArray(body.data)) throw new Error("no data array");
      ids = body.data.flatMap((m: unknown) =>
        typeof m === "object" && m !== null && "id" in m && typeof m.id === "string" ? [m.id] : [],
      );
    } catch {
      return { ready: false, message: "inference backend answered GET /v1/models with an unexpected body" };
    }
    if (ids.length === 0) {
      return { ready: false, message: "inference backend lists no models (it found no model directory)" };
    }
    if (!ids.includes(this.options.model)) {
      return {
        ready: false,
        message: `inference backend does not serve model "${this.options.model}"; it lists: ${ids.join(", ")}`,
      };
    }
    return { ready: true };
  }
}
