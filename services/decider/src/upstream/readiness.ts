import { bodyTooLarge, type CheckedAnswer, fetchChecked, redirected } from "./body-limit";
import { MODEL_404 } from "./failure";
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
      /** For clients: a stable text that names no address, repeats no server text and lists no model it has. */
      message: string;
      modelMissing: boolean;
      /** For the log only: what exactly failed (it may name internal addresses). */
      detail?: string;
      /**
       * On its way to ready (the embedded model starting, downloading, loading): expected, polled for, and
       * logged by the engine itself, so neither the gate nor /ready logs it as a failure.
       */
      starting?: boolean;
    };

/**
 * How much of a model server's list the log gets when the configured model is not on it: the first `names`
 * names, each cut to `chars` characters, and the count. Clients get none of it: model names can be private
 * (`ft:customer-acme-private-2026`) and the list has no length of its own.
 */
export const MODEL_LIST_LOG_LIMIT = { names: 20, chars: 100 };

/** A model list for the log, bounded by MODEL_LIST_LOG_LIMIT: `3 models: a, b, c` or `57 models: a, …, t (and 37 more)`. */
export function loggedModelList(ids: readonly string[]): string {
  const { names, chars } = MODEL_LIST_LOG_LIMIT;
  const shown = ids.slice(0, names).map((id) => {
    const points = [...id];
    return JSON.stringify(points.length > chars ? `${points.slice(0, chars).join("")}…` : id);
  });
  const more = ids.length > names ? ` (and ${ids.length - names} more)` : "";
  return `${ids.length} model${ids.length === 1 ? "" : "s"}: ${shown.join(", ")}${more}`;
}

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
    private readonly options: {
      baseURL: string;
      model: string;
      authorization: string | undefined;
      timeoutMs: number;
      /** LOCALDECIDER_UPSTREAM_MAX_BODY: a longer list is an unexpected body, not read whole. */
      maxBodyBytes?: number;
    },
  ) {}

  async check(): Promise<Readiness> {
    let response: CheckedAnswer;
    try {
      response = await fetchChecked(
        `${this.options.baseURL}/models`,
        {
          headers: this.options.authorization === undefined ? {} : { Authorization: this.options.authorization },
          signal: AbortSignal.timeout(this.options.timeoutMs),
        },
        this.options.maxBodyBytes,
      );
    } catch (err) {
      if (bodyTooLarge(err) !== undefined) {
        return {
          ready: false,
          message: "inference backend answered GET /v1/models with a body larger than LOCALDECIDER_UPSTREAM_MAX_BODY",
          modelMissing: false,
          detail: rootCauseMessage(err),
        };
      }
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
    // Decisions follow no redirect, so neither does readiness: another host's list says nothing of this one.
    if (redirected(response)) {
      return {
        ready: false,
        message: `inference backend answered GET /v1/models with a redirect (HTTP ${response.status}); the decider follows none: set LOCALDECIDER_UPSTREAM to the address that serves the model`,
        modelMissing: false,
        detail: `redirected to ${response.location ?? "(no Location)"}`,
      };
    }
    if (!response.ok) {
      return { ready: false, message: `inference backend returned HTTP ${response.status}`, modelMissing: false };
    }
    let ids: string[];
    try {
      const body = JSON.parse(response.text) as { data?: unknown };
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
      // Which models the server has goes to the log only (bounded), never to /ready or a decision's 503.
      return {
        ready: false,
        message: `${MODEL_404}: it does not serve model "${model}"`,
        modelMissing: true,
        detail: `GET ${this.options.baseURL}/models lists ${loggedModelList(ids)}`,
      };
    }
    return { ready: true };
  }
}
