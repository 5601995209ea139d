import { type CheckedAnswer, fetchChecked } from "./body-limit";
import type { Readiness } from "./readiness";
import type { ServerKind } from "./server-profile";
import type { Protocol } from "./types";

/** LOCALDECIDER_UPSTREAM_PROTOCOL: find out per server (`auto`), or take the one named. */
export type ProtocolSetting = "auto" | Protocol;

/** What the start-up check found a server speaks. */
export interface FoundProtocol {
  protocol: Protocol;
  /** How it was told, for the log: `configured`, `model list`, `ollama capabilities`, `probe`. */
  how: string;
  /** Native: the decision models the server lists (a client may name them); always holds the configured one. */
  decisionModels: string[];
  /**
   * Chat because the server said its model is not a decision model (its model list, its capabilities, a 501 on
   * the probe): how it said so, for /ready when the chat path fails too.
   */
  notDecisionModel?: string;
}

export interface ProtocolQuery {
  /** The server's address with `/v1`. */
  baseURL: string;
  authorization: string | undefined;
  timeoutMs: number;
  /** LOCALDECIDER_UPSTREAM_MODEL. */
  model: string;
  setting: ProtocolSetting;
  /** What server-profile.ts read from the model list (`ollama` has its capabilities at /api/show). */
  kind: ServerKind;
  /** LOCALDECIDER_UPSTREAM_MAX_BODY. */
  maxBodyBytes?: number;
}

/** The most of an Ollama server's other models whose capabilities are asked, to offer them to clients. */
export const OLLAMA_SHOW_LIMIT = 32;

/** The probe's own request: one question, small, the same every time, valid under llama.cpp's rules. */
export const PROBE_BODY = {
  state: "This is the decider's start-up check.",
  questions: { check: { type: "noul", instructions: "Is this a start-up check?" } },
};

/**
 * Which protocol a model server speaks, from what it publishes first, a probe last:
 *
 * - llama.cpp (b11361+) lists `"decisions"` in `data[].architecture.output_modalities` of `GET /v1/models`
 *   for a decision model (tools/server/README.md, "GET /models"), and `["text"]` (no "decisions") otherwise;
 * - Ollama lists `decision` in the `capabilities` of `POST /api/show` (0.35+, per the project's SYSTEMONE.md notes);
 * - anything else is asked once: `POST /v1/systemone` with PROBE_BODY. 200 (or a 422 on the request, which
 *   only a server that reads System One bodies gives) is native; 501 "not a decision model", a 404 or any
 *   other refusal is the chat path; a 429, a 5xx or no answer decides nothing (asked again at the next check).
 *
 * `systemone` skips what is published but still probes, so that a server which cannot answer is not ready
 * (501: not a decision model; 404: no such route) rather than failing every decision. `chat` sends nothing.
 * Returns the protocol, or a not-ready answer naming why; throws when the server could not be asked.
 */
export async function findProtocol(query: ProtocolQuery): Promise<FoundProtocol | Readiness> {
  if (query.setting === "chat") return { protocol: "chat", how: "configured", decisionModels: [] };
  if (query.setting === "decisions") return decisionsOrNotReady(query, "configured");
  const listed = await decisionModelsListed(query);
  if (query.setting === "auto") {
    const published = listed.published.get(query.model);
    if (published !== undefined) {
      return published
        ? { protocol: "systemone", how: "model list", decisionModels: withModel(listed.decision, query.model) }
        : {
            protocol: "chat",
            how: "model list",
            decisionModels: [],
            notDecisionModel: 'its model list does not name it a decision model (no "decisions" output)',
          };
    }
    if (query.kind === "ollama") {
      const capabilities = await ollamaCapabilities(query, query.model);
      if (capabilities !== undefined) {
        if (!capabilities.includes("decision")) {
          return {
            protocol: "chat",
            how: "ollama capabilities",
            decisionModels: [],
            notDecisionModel: "its capabilities (POST /api/show) do not include decision",
          };
        }
        const others = await ollamaDecisionModels(query, listed.ids);
        return { protocol: "systemone", how: "ollama capabilities", decisionModels: withModel(others, query.model) };
      }
    }
  }
  const probe = await probeSystemOne(query);
  if (probe.native) {
    return {
      protocol: "systemone",
      how: query.setting === "auto" ? "probe" : "configured",
      decisionModels: withModel(listed.decision, query.model),
    };
  }
  if (query.setting === "systemone") {
    return {
      ready: false,
      message:
        probe.status === 501
          ? "LOCALDECIDER_UPSTREAM_PROTOCOL is systemone but the model server's model is not a decision model (it answered POST /v1/systemone with HTTP 501); set it to auto to use the server's chat path"
          : `LOCALDECIDER_UPSTREAM_PROTOCOL is systemone but the model server does not answer POST /v1/systemone (HTTP ${probe.status})`,
      modelMissing: true,
      detail: probe.message,
    };
  }
  return {
    protocol: "chat",
    how: "probe",
    decisionModels: [],
    ...(probe.status === 501 ? { notDecisionModel: "it answered POST /v1/systemone with HTTP 501" } : {}),
  };
}

/**
 * SGLang's `/v1/decisions` is a dialect of its own on the same path (`questions:[{id, type: choice|score|yes_no,
 * question, options|levels}]`, answers keyed by id, `usage {prompt_tokens, total_tokens}`): the decider does not
 * speak it, and sending it OpenAI's shapes would fail every decision, so the server is not ready, saying so.
 */
export const SGLANG_DECISIONS =
  "the model server is SGLang, whose POST /v1/decisions is SGLang's own dialect (questions with id and question, answers keyed by id), not OpenAI's Decisions, which the decider speaks; use SGLang's chat path (LOCALDECIDER_UPSTREAM_PROTOCOL=chat or auto, with a model that reports logprobs) or a server that speaks OpenAI's dialect (vLLM 0.33+, LiteLLM)";

/** The Decisions probe's own request: one predicate, small, the same every time, only documented fields. */
export const DECISIONS_PROBE_BODY = {
  input: "This is the decider's start-up check.",
  questions: [{ type: "predicate", name: "check", instructions: "Is this a start-up check?" }],
};

/** What one `POST /v1/decisions` with DECISIONS_PROBE_BODY found. */
export type DecisionsProbe =
  | { dialect: "openai" }
  | { dialect: "sglang"; detail: string }
  | { dialect: "none"; status: number; message: string };

/**
 * Whether the server answers OpenAI's Decisions dialect for the model: a 200 whose `answers` is a list holding
 * a predicate answer. SGLang is told by its kind (its model list's `owned_by`), by a 200 in its shape (answers
 * keyed by id, or `usage.prompt_tokens`), or by a refusal naming its `yes_no` type. A 429, a 5xx (but 501) or
 * no answer decides nothing: it throws (asked again at the next check).
 */
export async function probeDecisions(query: ProtocolQuery): Promise<DecisionsProbe> {
  const response = await probePost(query, "decisions", DECISIONS_PROBE_BODY);
  const text = response.text;
  const body = parsed(text);
  const message = text.slice(0, 500);
  if (query.kind === "sglang" && response.status !== 404)
    return { dialect: "sglang", detail: "its model list names it SGLang" };
  if (response.status === 200 && isObject(body)) {
    const usage = isObject(body.usage) ? body.usage : {};
    if (isObject(body.answers) || ("prompt_tokens" in usage && !("input_tokens" in usage))) {
      return { dialect: "sglang", detail: `its answer is in SGLang's shape: ${message}` };
    }
    const first: unknown = Array.isArray(body.answers) ? body.answers[0] : undefined;
    if (isObject(first) && first.type === "predicate") return { dialect: "openai" };
  }
  if ((response.status === 400 || response.status === 422) && /yes_no/.test(message)) {
    return { dialect: "sglang", detail: `its refusal names SGLang's question types: ${message}` };
  }
  return { dialect: "none", status: response.status, message };
}

/** The Decisions dialect if the server answers it; else why not, as a not-ready answer (or undefined: `auto`). */
async function decisionsOrNotReady(query: ProtocolQuery, how: string): Promise<FoundProtocol | Readiness> {
  const probe = await probeDecisions(query);
  if (probe.dialect === "openai") return { protocol: "decisions", how, decisionModels: [query.model] };
  if (probe.dialect === "sglang")
    return { ready: false, message: SGLANG_DECISIONS, modelMissing: true, detail: probe.detail };
  return {
    ready: false,
    message:
      probe.status === 501
        ? "LOCALDECIDER_UPSTREAM_PROTOCOL is decisions but the model server cannot serve the model in its Decisions API (it answered POST /v1/decisions with HTTP 501)"
        : `LOCALDECIDER_UPSTREAM_PROTOCOL is decisions but the model server does not answer POST /v1/decisions (HTTP ${probe.status})`,
    modelMissing: true,
    detail: probe.message,
  };
}

/**
 * `auto`'s last resort, once neither System One nor a usable chat path answered: the server's Decisions API
 * (OpenAI's, vLLM 0.33's, LiteLLM's). Undefined when it has none (or could not be asked); SGLang's dialect is
 * a not-ready answer that says why.
 */
export async function decisionsLastResort(query: ProtocolQuery): Promise<FoundProtocol | Readiness | undefined> {
  let probe: DecisionsProbe;
  try {
    probe = await probeDecisions(query);
  } catch {
    return undefined;
  }
  if (probe.dialect === "openai") {
    return { protocol: "decisions", how: "probe (last resort)", decisionModels: [query.model] };
  }
  if (probe.dialect === "sglang")
    return { ready: false, message: SGLANG_DECISIONS, modelMissing: true, detail: probe.detail };
  return undefined;
}

function withModel(models: readonly string[], model: string): string[] {
  return [...new Set([model, ...models])];
}

interface Listed {
  /** Every model id (and alias) the list names. */
  ids: string[];
  /** Ids whose entry publishes its output modalities: true when they include "decisions". */
  published: Map<string, boolean>;
  /** The ids published as decision models. */
  decision: string[];
}

/** The server's `GET /v1/models`, read for what each entry publishes; an unreadable list publishes nothing. */
async function decisionModelsListed(query: ProtocolQuery): Promise<Listed> {
  const listed: Listed = { ids: [], published: new Map(), decision: [] };
  let body: unknown;
  try {
    body = await request(query, "GET", `${query.baseURL}/models`);
  } catch {
    return listed;
  }
  const data = isObject(body) && Array.isArray(body.data) ? body.data : [];
  for (const entry of data) {
    if (!isObject(entry) || typeof entry.id !== "string") continue;
    // llama.cpp names a model by its alias too (`aliases`); a client may use either.
    const names = [entry.id, ...(Array.isArray(entry.aliases) ? entry.aliases : [])].filter(
      (n): n is string => typeof n === "string" && n !== "",
    );
    listed.ids.push(...names);
    const outputs = isObject(entry.architecture) ? entry.architecture.output_modalities : undefined;
    if (!Array.isArray(outputs)) continue;
    const decides = outputs.includes("decisions");
    for (const name of names) listed.published.set(name, decides);
    if (decides) listed.decision.push(...names);
  }
  return listed;
}

/** An Ollama model's `capabilities` from `POST /api/show`, or undefined when the server does not say. */
async function ollamaCapabilities(query: ProtocolQuery, model: string): Promise<string[] | undefined> {
  try {
    const body = await request(query, "POST", `${rootOf(query.baseURL)}/api/show`, { model });
    const capabilities = isObject(body) ? body.capabilities : undefined;
    return Array.isArray(capabilities) ? capabilities.filter((c): c is string => typeof c === "string") : undefined;
  } catch {
    return undefined;
  }
}

/** The decision models among an Ollama server's others (the first OLLAMA_SHOW_LIMIT of its list). */
async function ollamaDecisionModels(query: ProtocolQuery, ids: readonly string[]): Promise<string[]> {
  const others = ids.filter((id) => id !== query.model).slice(0, OLLAMA_SHOW_LIMIT);
  const capabilities = await Promise.all(others.map((id) => ollamaCapabilities(query, id)));
  return others.filter((_, i) => capabilities[i]?.includes("decision") === true);
}

/** One `POST /v1/systemone` with PROBE_BODY: whether the server speaks System One for the model, and its status. */
async function probeSystemOne(query: ProtocolQuery): Promise<{ native: boolean; status: number; message: string }> {
  const response = await probePost(query, "systemone", PROBE_BODY);
  const text = response.text;
  if (response.status === 200) {
    const body = parsed(text);
    return { native: isObject(body) && isObject(body.answers), status: 200, message: "" };
  }
  return { native: response.status === 422, status: response.status, message: text.slice(0, 500) };
}

/**
 * One start-up probe, `POST {baseURL}/{path}` with the model and `body`, read as every check is (no redirect
 * followed, at most LOCALDECIDER_UPSTREAM_MAX_BODY). A 429, a 5xx (but 501) or no answer decides nothing: it
 * throws, and the server is asked again at its next check.
 */
async function probePost(query: ProtocolQuery, path: string, body: object): Promise<CheckedAnswer> {
  const response = await fetchChecked(
    `${query.baseURL}/${path}`,
    {
      method: "POST",
      headers: headersOf(query, true),
      body: JSON.stringify({ model: query.model, ...body }),
      signal: AbortSignal.timeout(query.timeoutMs),
    },
    query.maxBodyBytes,
  );
  if (response.status === 429 || (response.status >= 500 && response.status !== 501)) {
    throw new Error(`POST ${query.baseURL}/${path} answered HTTP ${response.status}`);
  }
  return response;
}

async function request(query: ProtocolQuery, method: "GET" | "POST", url: string, body?: unknown): Promise<unknown> {
  const response = await fetchChecked(
    url,
    {
      method,
      headers: headersOf(query, body !== undefined),
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(query.timeoutMs),
    },
    query.maxBodyBytes,
  );
  if (!response.ok) throw new Error(`${method} ${url} answered HTTP ${response.status}`);
  return JSON.parse(response.text) as unknown;
}

function headersOf(query: ProtocolQuery, json: boolean): Record<string, string> {
  return {
    ...(json ? { "content-type": "application/json" } : {}),
    ...(query.authorization === undefined ? {} : { Authorization: query.authorization }),
  };
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The server's own root, without the `/v1` (Ollama's `/api/show` lives there). */
export function rootOf(baseURL: string): string {
  return baseURL.replace(/\/v1\/?$/, "");
}
