import { fetchChecked } from "./body-limit";
import type { PromptSeam } from "./llama-packed";

/**
 * What kind of OpenAI-compatible server answers, and what that means for how the decider talks to it. Read
 * once from the server itself (its model list, and llama.cpp's `/props`), never configured by hand.
 */
export type ServerKind = "llama.cpp" | "vllm" | "sglang" | "ollama" | "unknown";

export interface ServerProfile {
  kind: ServerKind;
  /**
   * `slot`: a prompt cache per slot (llama.cpp, Ollama's runner, and any server we cannot tell): a request's
   * calls run one at a time in one slot. `shared`: one prefix cache for every sequence (vLLM, SGLang): the
   * first call of a prompt alone, then its other calls at once, all reading the cached prefix.
   */
  prefixCache: "slot" | "shared";
  /** llama.cpp's parallel slots (`/props` total_slots): each request's calls name one (`id_slot`). */
  slots?: number;
  /** Takes `chat_template_kwargs` (llama.cpp, vLLM, SGLang): how thinking templates are told not to think. */
  templateKwargs: boolean;
  /**
   * llama.cpp only, once ServerCheck verified it: where its template's prompts can be cut into token ids and
   * text, so that a prompt's probes go in one `/completion` call (llama-packed.ts).
   */
  packing?: PromptSeam;
}

/** Before the server was asked (or when it could not be): the cautious way, which works on every server. */
export const UNKNOWN_SERVER: ServerProfile = { kind: "unknown", prefixCache: "slot", templateKwargs: false };

interface Fetcher {
  baseURL: string;
  authorization: string | undefined;
  timeoutMs: number;
  /** LOCALDECIDER_UPSTREAM_MAX_BODY. */
  maxBodyBytes?: number;
}

async function getJson(from: Fetcher, url: string): Promise<unknown> {
  const answer = await fetchChecked(
    url,
    {
      headers: from.authorization === undefined ? {} : { Authorization: from.authorization },
      signal: AbortSignal.timeout(from.timeoutMs),
    },
    from.maxBodyBytes,
  );
  if (!answer.ok) throw new Error(`GET ${url} answered HTTP ${answer.status}`);
  return JSON.parse(answer.text) as unknown;
}

/** The server's own root, without the `/v1` the OpenAI client needs (llama.cpp's `/props` lives there). */
export function rootOf(baseURL: string): string {
  return baseURL.replace(/\/v1\/?$/, "");
}

/**
 * Tells the server's kind from `GET /v1/models` (each server names itself in `owned_by`: llama.cpp
 * `llamacpp`, vLLM `vllm`, SGLang `sglang`, Ollama `library` or its user), then asks llama.cpp how many
 * slots it has. Throws when the server cannot be asked (the caller retries on its next readiness check).
 */
export async function detectServer(from: Fetcher): Promise<ServerProfile> {
  const body = (await getJson(from, `${from.baseURL}/models`)) as { data?: unknown; models?: unknown };
  const owners = new Set(
    (Array.isArray(body.data) ? body.data : []).flatMap((m: unknown) =>
      typeof m === "object" && m !== null && "owned_by" in m && typeof m.owned_by === "string" ? [m.owned_by] : [],
    ),
  );
  if (owners.has("llamacpp")) {
    const props = (await getJson(from, `${rootOf(from.baseURL)}/props`).catch(() => ({}))) as {
      total_slots?: unknown;
    };
    const slots = typeof props.total_slots === "number" && props.total_slots > 0 ? props.total_slots : undefined;
    return { kind: "llama.cpp", prefixCache: "slot", templateKwargs: true, ...(slots === undefined ? {} : { slots }) };
  }
  if (owners.has("vllm")) return { kind: "vllm", prefixCache: "shared", templateKwargs: true };
  if (owners.has("sglang")) return { kind: "sglang", prefixCache: "shared", templateKwargs: true };
  // Ollama's OpenAI layer answers /v1/models with `owned_by: "library"` (or the model's namespace).
  if (owners.has("library") || Array.isArray(body.models)) {
    return { kind: "ollama", prefixCache: "slot", templateKwargs: false };
  }
  return UNKNOWN_SERVER;
}
