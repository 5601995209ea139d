import { classifyTransport, retryOnNewConnection } from "./failure";
import type { HttpRequest } from "./http-fetch";
import { UpstreamError } from "./types";

/** What a native adapter (System One or Decisions) is built with. */
export interface NativeAdapterOptions {
  /** The server's address with `/v1`. */
  baseURL: string;
  /** The Authorization header to send (see upstreamAuthorization), or none. */
  authorization: string | undefined;
  /** Told when the server answers 501 for a call without images: it cannot serve the model (any more). */
  onNotDecisionModel?: () => void;
  /** The clock learnt option limits expire by (tests move it); Date.now by default. */
  now?: () => number;
  /** LOCALDECIDER_UPSTREAM_MAX_BODY (default DEFAULT_UPSTREAM_MAX_BODY). */
  maxBodyBytes?: number;
}

/** A native server's answer to one call: its status, its body as text, its Retry-After. */
export interface NativeResponse {
  status: number;
  text: string;
  retryAfter: string | undefined;
}

/**
 * One POST of a native call (System One or Decisions); a kept-alive connection cut as it went out is tried
 * once more (the call changes nothing on the server before it answers). `signal` is the decision's: its
 * deadline (LOCALDECIDER_TIMEOUT, which always ends it: no timer of its own per call) or its client going away.
 */
export async function postJson(
  send: HttpRequest,
  url: URL,
  headers: Record<string, string>,
  body: string,
  signal: AbortSignal,
): Promise<NativeResponse> {
  for (let attempt = 0; ; attempt++) {
    try {
      const response = await send(url, { method: "POST", headers, body, signal });
      const retryAfter = response.headers["retry-after"];
      return { status: response.status, text: response.body.toString("utf8"), retryAfter };
    } catch (err) {
      if (signal.aborted) throw new UpstreamError({ kind: "aborted" });
      const failure = classifyTransport(err);
      if (retryOnNewConnection(failure)) {
        if (attempt === 0) continue;
        throw new UpstreamError({ kind: "unreachable", detail: "detail" in failure ? failure.detail : "" });
      }
      throw new UpstreamError(failure);
    }
  }
}

/**
 * The message of an error body: `{"error":{"message"}}` (llama.cpp, Jev, OpenAI, vLLM), `{"error":"…"}`
 * (Ollama), or the text.
 */
export function errorMessage(text: string): string {
  try {
    const body: unknown = JSON.parse(text);
    if (isObject(body)) {
      if (isObject(body.error) && typeof body.error.message === "string") return body.error.message;
      if (typeof body.error === "string") return body.error;
      if (typeof body.message === "string") return body.message;
    }
  } catch {
    // Not JSON: the text itself.
  }
  return text.slice(0, 1000);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
