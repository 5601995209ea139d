import { rootCauseMessage } from "./types";

/**
 * The outcome of probing `GET {upstream}/v1/models` for the configured model. `modelMissing`: the backend
 * answered, and it does not hold the model (HTTP 404, or a list without it): decisions must not be served
 * then, since llama.cpp answers chat calls with whatever model it loaded, whatever name they give.
 */
export type Readiness =
  | { ready: true }
  | {
      ready: false;
      /** For clients: a stable text that names no address and repeats no server text. */
      message: string;
      modelMissing: boolean;
      /** For the log only: what exactly failed (it may name internal addresses). */
      detail?: string;
    };

/** The seed's text for a backend that does not hold the configured model; details follow it. */
export const MODEL_404 = "inference backend returned HTTP 404";

export interface ReadinessProbe {
  check(): Promise<Readiness>;
  /** How long the decision path may reuse an answer (default MODEL_CHECK_MAX_AGE_MS; 0 for a state in memory). */
  readonly maxAgeMs?: number;
}

/**
 * Probes the model list with plain fetch (the `openai` client would turn a 404 into an exception that
 * hides the status). A 404, or a list without the model, gets the text the seed fixes for a backend that
 * does not hold the model (llama.cpp never answers 404 here: it lists what it loaded); other failures name
 * what is wrong.
 */
export class ModelListProbe implements ReadinessProbe {
  constructor(
    private readonly options: { baseURL: string; model: string; authorization: string | undefined; timeoutMs: number },
  ) {}

  async check(): Promise<Readiness> {
    let response: Response;
    try {
      response = await fetch(`${this.options.baseURL}/models`, {
        headers: this.options.authorization === undefined ? {} : { Authorization: this.options.authorization },
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
    } catch (err) {
      return {
        ready: false,
        message: "inference backend unreachable",
        modelMissing: false,
        detail: `GET ${this.options.baseURL}/models: ${rootCauseMessage(err)}`,
      };
    }
    const { model } = this.options;
    // A real 404 gets exactly the seed's text (its conformance checks compare it whole).
    if (response.status === 404) return { ready: false, message: MODEL_404, modelMissing: true };
    if (!response.ok) {
      return { ready: false, message: `inference backend returned HTTP ${response.status}`, modelMissing: false };
    }
    let ids: string[];
    try {
      const body = (await response.json()) as { data?: unknown };
      if (!Array.isArray(body.data)) throw new Error("no data array");
      ids = body.data.flatMap((m: unknown) =>
        typeof m === "object" && m !== null && "id" in m && typeof m.id === "string" ? [m.id] : [],
      );
    } catch {
      return {
        ready: false,
        message: "inference backend answered GET /v1/models with an unexpected body",
        modelMissing: false,
      };
    }
    if (ids.length === 0) {
      return {
        ready: false,
        message: `${MODEL_404}: it lists no models (it found no model directory), so not "${model}"`,
        modelMissing: true,
      };
    }
    if (!ids.includes(model)) {
      return {
        ready: false,
        message: `${MODEL_404}: it does not serve model "${model}"; it lists: ${ids.join(", ")}`,
        modelMissing: true,
      };
    }
    return { ready: true };
  }
}
