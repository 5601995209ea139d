import OpenAI from "openai";
import type { ProbeRequest } from "../decide/probe";
import type { Alternative } from "../decide/readout";
import { type ProbeResult, rootCauseMessage, type Upstream, UpstreamError } from "./types";

/** `top_logprobs` asked for: the most OpenAI, vLLM (default max_logprobs) and Ollama accept. */
export const TOP_LOGPROBS = 20;

export interface OpenAIUpstreamOptions {
  baseURL: string;
  model: string;
  /** The Authorization header to send (see upstreamAuthorization), or none. */
  authorization: string | undefined;
  timeoutMs: number;
}

type ChatBody = OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming;

/**
 * The upstream through the official `openai` client, with its own retries off and the timeout explicit.
 * Each probe asks for one token after the prefilled assistant message and reads the reported alternatives.
 */
export class OpenAIUpstream implements Upstream {
  private readonly client: OpenAI;

  constructor(private readonly options: OpenAIUpstreamOptions) {
    this.client = new OpenAI({
      baseURL: options.baseURL,
      // The client insists on a key; the header it would make from it is replaced by ours, or unused.
      apiKey: "not-needed",
      defaultHeaders: { Authorization: options.authorization ?? null },
      // The decider's own retries (malformed output, a shared-context overflow) are the only ones; the
      // client's default (2, with backoff) would hide faults and hold a limiter slot meanwhile.
      maxRetries: 0,
      // A backstop only: our own timer (below) fires first and is what the client sees as a timeout.
      timeout: options.timeoutMs + 1000,
      fetch: openAIShapedErrors,
    });
  }

  async probe(request: ProbeRequest, signal: AbortSignal): Promise<ProbeResult> {
    // Our own timer decides what a timeout is: the client's own timeout surfaces as a generic connection
    // error wherever the abort reason is not an Error of this realm (e.g. under Jest).
    const timer = AbortSignal.timeout(this.options.timeoutMs);
    const body: ChatBody & Record<string, unknown> = {
      model: this.options.model,
      messages: request.messages,
      temperature: 0,
      max_tokens: 1,
      logprobs: true,
      top_logprobs: TOP_LOGPROBS,
      // Continue the final (assistant) message instead of opening a new turn: vLLM needs both fields;
      // llama.cpp does this by default and accepts them; Ollama continues a final assistant message by
      // default and ignores them.
      continue_final_message: true,
      add_generation_prompt: false,
    };
    let response: OpenAI.Chat.Completions.ChatCompletion;
    for (let attempt = 0; ; attempt++) {
      try {
        response = await this.client.chat.completions.create(body, { signal: AbortSignal.any([signal, timer]) });
        break;
      } catch (err) {
        if (timer.aborted && !signal.aborted) throw new UpstreamError({ kind: "timeout" });
        const failure = toUpstreamError(err);
        // A kept-alive connection the server closed as the call went out (its idle timeout) fails before
        // any answer; the call only reads, so it is sent once more on a new connection. A server that is
        // gone refuses that one too (and the failure stands).
        if (attempt === 0 && !signal.aborted && isCutConnection(failure)) continue;
        throw failure;
      }
    }
    const choice = response.choices?.[0];
    if (choice === undefined) throw new UpstreamError({ kind: "malformed", message: "the response has no choice" });
    const first = choice.logprobs?.content?.[0];
    const usage = response.usage as
      | (OpenAI.CompletionUsage & { prompt_tokens_details?: { cached_tokens?: number } })
      | undefined;
    const cached = usage?.prompt_tokens_details?.cached_tokens ?? 0;
    return {
      alternatives: first === undefined ? null : (first.top_logprobs ?? []).map(alternative),
      emitted: first === undefined ? emittedText(choice.message?.content, request) : alternative(first),
      usage: { input: Math.max(0, (usage?.prompt_tokens ?? 0) - cached), output: usage?.completion_tokens ?? 0 },
    };
  }
}

function alternative(t: { token: string; logprob: number; bytes?: number[] | null }): Alternative {
  return t.bytes === undefined || t.bytes === null
    ? { token: t.token, logprob: t.logprob }
    : { token: t.token, logprob: t.logprob, bytes: t.bytes };
}

/**
 * Without logprobs, the emitted text is all there is (its probability unknown, so 0 in log space). llama.cpp
 * returns the prefill and its continuation as one (trimmed) content; the prefill is taken off again.
 */
function emittedText(content: string | null | undefined, request: ProbeRequest): Alternative | null {
  if (content === null || content === undefined) return null;
  const prefill = request.messages.at(-1)?.content ?? "";
  for (const start of [prefill, prefill.trimEnd()]) {
    if (start !== "" && content.startsWith(start)) return { token: content.slice(start.length), logprob: 0 };
  }
  return { token: content, logprob: 0 };
}

/**
 * fetch that rewrites error bodies into OpenAI's `{ error: { message } }`, the only shape the client
 * reads a message from: vLLM answers `{ object: "error", message, type, code }` and some servers
 * `{ error: "<text>" }`. Successful responses pass through untouched.
 */
export async function openAIShapedErrors(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const response = await fetch(input, init);
  if (response.ok) return response;
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = { error: { message: text } };
  }
  if (typeof body === "object" && body !== null) {
    const record = body as Record<string, unknown>;
    if (typeof record.error === "string") body = { error: { message: record.error } };
    else if (typeof record.error !== "object" && typeof record.message === "string") {
      body = { error: { message: record.message, type: record.type, code: record.code } };
    }
  }
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  headers.delete("content-encoding");
  headers.set("content-type", "application/json");
  return new Response(JSON.stringify(body), { status: response.status, statusText: response.statusText, headers });
}

/** The server's own message: OpenAI-shaped `{error:{message}}`, vLLM's `{message}`, or the client's text. */
function serverMessage(err: InstanceType<typeof OpenAI.APIError>): string {
  const body: unknown = err.error;
  if (typeof body === "object" && body !== null) {
    if ("message" in body && typeof body.message === "string") return body.message;
    if ("error" in body && typeof body.error === "string") return body.error;
  }
  return err.message;
}

/** A connection cut before any answer (reset, closed by the other side), as opposed to one refused. */
function isCutConnection(err: UpstreamError): boolean {
  return (
    err.failure.kind === "unreachable" && /other side closed|ECONNRESET|EPIPE|socket hang up/i.test(err.failure.message)
  );
}

export function toUpstreamError(err: unknown): UpstreamError {
  if (err instanceof OpenAI.APIUserAbortError) return new UpstreamError({ kind: "aborted" });
  if (err instanceof OpenAI.APIConnectionTimeoutError) return new UpstreamError({ kind: "timeout" });
  if (err instanceof OpenAI.APIConnectionError) {
    return new UpstreamError({ kind: "unreachable", message: rootCauseMessage(err.cause ?? err) });
  }
  if (err instanceof OpenAI.APIError && err.status !== undefined) {
    const retryAfter = err.headers?.get("retry-after") ?? undefined;
    return new UpstreamError({
      kind: "http",
      status: err.status,
      message: serverMessage(err),
      ...(retryAfter === undefined ? {} : { retryAfter }),
    });
  }
  return new UpstreamError({ kind: "unreachable", message: rootCauseMessage(err) });
}
