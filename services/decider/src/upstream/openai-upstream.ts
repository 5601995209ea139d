import OpenAI from "openai";
import { classifyStatus, classifyTransport, retryOnNewConnection } from "./failure";
import { outcomesGrammar } from "./grammar";
import { createHttpTransport } from "./http-fetch";
import { LlamaNative } from "./llama-native";
import { findSeam, PackedProbes, type PromptSeam } from "./llama-packed";
import { alternative, TOP_LOGPROBS, truncated } from "./reported";
import { rootOf, type ServerProfile, UNKNOWN_SERVER } from "./server-profile";
import {
  type Alternative,
  type ChatMessage,
  type ProbeOptions,
  type ProbeRequest,
  type ProbeResult,
  type Reading,
  type Upstream,
  UpstreamError,
} from "./types";

export interface OpenAIUpstreamOptions {
  baseURL: string;
  model: string;
  /** The Authorization header to send (see upstreamAuthorization), or none. */
  authorization: string | undefined;
  timeoutMs: number;
}

export type ChatBody = OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming & Record<string, unknown>;
export type Completion = OpenAI.Chat.Completions.ChatCompletion;

/**
 * The upstream through the official `openai` client, with its own retries off and the timeout explicit.
 * Each probe asks for one token after the prefilled assistant message and reads the reported alternatives.
 * What it sends beyond OpenAI's fields depends on the server's kind (its profile, read once by
 * ServerCheck): llama.cpp gets the request's slot (`id_slot`), servers that take them get
 * `chat_template_kwargs` that turn a thinking template's thinking off. On llama.cpp, once ServerCheck has
 * verified where its template's prompts can be cut, a prompt's probes go in one `/completion` call instead
 * (probeMany, llama-packed.ts).
 */
export class OpenAIUpstream implements Upstream {
  private readonly client: OpenAI;
  /** llama.cpp's own endpoints, over the same connections. */
  private readonly native: LlamaNative;
  private serverProfile: ServerProfile = UNKNOWN_SERVER;
  /** A llama.cpp server's prompts in one `/completion` call each, once ServerCheck found its template's seam. */
  private packed: PackedProbes | undefined;

  constructor(private readonly options: OpenAIUpstreamOptions) {
    // One set of kept-alive connections for the chat calls and llama.cpp's own endpoints.
    const { fetch, request } = createHttpTransport();
    this.native = new LlamaNative({
      root: rootOf(options.baseURL),
      authorization: options.authorization,
      timeoutMs: options.timeoutMs,
      request,
    });
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
      fetch: openAIShapedErrors(fetch),
    });
  }

  /** What kind of server answers (UNKNOWN_SERVER until ServerCheck has asked it). */
  get profile(): ServerProfile {
    return this.serverProfile;
  }

  set profile(profile: ServerProfile) {
    this.serverProfile = profile;
    this.packed =
      profile.kind === "llama.cpp" && profile.packing !== undefined
        ? new PackedProbes(this.native, profile.packing, profile.templateKwargs)
        : undefined;
  }

  /**
   * A prompt's probes in one call, on a llama.cpp server whose template's seam is known (see llama-packed.ts);
   * absent otherwise, so the decider asks one chat call per probe in the order the server's cache wants.
   */
  get probeMany(): Upstream["probeMany"] {
    const packed = this.packed;
    if (packed === undefined) return undefined;
    return async (requests, options) => {
      const results = await packed.probeMany(requests, options);
      if (results !== undefined) return results;
      // This prompt rendered otherwise than the seam expects: its probes one chat call each, in its slot.
      const each: ProbeResult[] = [];
      for (const request of requests) each.push(await this.probe(request, options));
      return each;
    };
  }

  /** Where this llama.cpp server's prompts can be cut into ids and text (llama-packed.ts), or why nowhere. */
  findSeam(messages: readonly ChatMessage[], signal: AbortSignal): Promise<{ seam: PromptSeam } | { reason: string }> {
    return findSeam(this.native, messages, this.serverProfile.templateKwargs, signal);
  }

  /** The packed path over a seam, before the profile holds it (ServerCheck compares it with the chat path). */
  packedWith(seam: PromptSeam): PackedProbes {
    return new PackedProbes(this.native, seam, this.serverProfile.templateKwargs);
  }

  get prefixCache(): "slot" | "shared" {
    return this.profile.prefixCache;
  }

  /** The chat body of a probe: one token after the prefill, its top alternatives, on the request's slot. */
  body(
    messages: ProbeRequest["messages"],
    options: { slot?: number | undefined; temperature?: number } = {},
  ): ChatBody {
    const { kind, templateKwargs } = this.profile;
    return {
      model: this.options.model,
      messages,
      temperature: options.temperature ?? 0,
      max_tokens: 1,
      logprobs: true,
      top_logprobs: TOP_LOGPROBS,
      // Continue the final (assistant) message instead of opening a new turn: vLLM needs both fields;
      // llama.cpp does this by default and accepts them; Ollama continues a final assistant message by
      // default and ignores them.
      continue_final_message: true,
      add_generation_prompt: false,
      // A thinking template (Qwen3 and others) would otherwise open a think block before the answer.
      ...(templateKwargs ? { chat_template_kwargs: { enable_thinking: false } } : {}),
      ...(kind === "llama.cpp" && options.slot !== undefined && options.slot >= 0 ? { id_slot: options.slot } : {}),
    };
  }

  async probe(request: ProbeRequest, options: ProbeOptions): Promise<ProbeResult> {
    const response = await this.ask(this.body(request.messages, options), request.reading, options.signal);
    return resultOf(response, request);
  }

  /** One probe's call as `body` says; on llama.cpp, again with a grammar when its token was a UTF-8 piece. */
  async ask(body: ChatBody, reading: Reading, signal: AbortSignal): Promise<Completion> {
    const response = await this.complete(body, signal);
    if (this.profile.kind !== "llama.cpp" || !noLogprobsForAPiece(response)) return response;
    // llama-server drops the logprobs of a sampled token that is only part of a UTF-8 character (it waits
    // for the rest, which max_tokens 1 never brings). Asked again with the sampled token held to the
    // outcomes' texts by a grammar; the reported alternatives are the raw distribution either way.
    return this.complete({ ...body, grammar: outcomesGrammar(reading) }, signal);
  }

  /**
   * One chat call; a kept-alive connection cut as it went out is tried once more. `signal` ends it: the
   * decision's own deadline (LOCALDECIDER_TIMEOUT for the whole request, which the decider reports as a
   * timeout) or its client going away. The client's timeout (a second later) is only a backstop.
   */
  async complete(body: ChatBody, signal: AbortSignal): Promise<Completion> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.client.chat.completions.create(body, { signal });
      } catch (err) {
        const { failure } = toUpstreamError(err);
        // The call only reads, so one cut as it went out is sent once more on a new connection. A server
        // that is gone refuses that one too, and the failure stands as unreachable.
        if (!signal.aborted && retryOnNewConnection(failure)) {
          if (attempt === 0) continue;
          if (failure.kind === "connection_cut")
            throw new UpstreamError({ kind: "unreachable", detail: failure.detail });
        }
        throw new UpstreamError(failure);
      }
    }
  }
}

/** The probe's result from a completion: the first position's alternatives, the emitted token, the usage. */
function resultOf(response: Completion, request: ProbeRequest): ProbeResult {
  const choice = response.choices?.[0];
  if (choice === undefined) throw new UpstreamError({ kind: "malformed", detail: "the response has no choice" });
  const first = choice.logprobs?.content?.[0];
  const usage = response.usage as
    | (OpenAI.CompletionUsage & { prompt_tokens_details?: { cached_tokens?: number } })
    | undefined;
  const cached = usage?.prompt_tokens_details?.cached_tokens ?? 0;
  return {
    alternatives: first === undefined ? null : (first.top_logprobs ?? []).map(alternative),
    emitted: first === undefined ? emittedText(choice.message?.content, request) : alternative(first),
    usage: {
      input: Math.max(0, (usage?.prompt_tokens ?? 0) - cached),
      output: usage?.completion_tokens ?? 0,
      cached,
    },
    ...(first === undefined ? { raw: truncated(JSON.stringify(response)) } : {}),
  };
}

/** llama.cpp's answer when the one token it sampled is a piece of a UTF-8 character: no logprobs at all. */
function noLogprobsForAPiece(response: Completion): boolean {
  const choice = response.choices?.[0];
  return (
    choice !== undefined &&
    (choice.logprobs?.content ?? []).length === 0 &&
    choice.finish_reason === "length" &&
    response.usage?.completion_tokens === 1
  );
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
 * fetch that rewrites error bodies into OpenAI's `{ error: { message } }`, the only shape the client reads
 * (the one place error bodies are normalised): vLLM answers `{ object: "error", message, type, code }`,
 * some servers `{ error: "<text>" }` or plain text. Successful responses pass through untouched.
 */
export function openAIShapedErrors(base: typeof fetch): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => shaped(await base(input, init))) as typeof fetch;
}

async function shaped(response: Response): Promise<Response> {
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

/** The server's own message, from the body openAIShapedErrors gave the OpenAI shape (else the client's text). */
function serverMessage(err: InstanceType<typeof OpenAI.APIError>): string {
  const body: unknown = err.error;
  if (typeof body === "object" && body !== null && "message" in body && typeof body.message === "string") {
    return body.message;
  }
  return err.message;
}

/** What the `openai` client threw, as a classified failure (upstream/failure.ts). */
export function toUpstreamError(err: unknown): UpstreamError {
  if (err instanceof OpenAI.APIUserAbortError) return new UpstreamError({ kind: "aborted" });
  if (err instanceof OpenAI.APIConnectionTimeoutError) return new UpstreamError({ kind: "timeout" });
  if (err instanceof OpenAI.APIError && !(err instanceof OpenAI.APIConnectionError) && err.status !== undefined) {
    return new UpstreamError(
      classifyStatus(err.status, serverMessage(err), err.headers?.get("retry-after") ?? undefined),
    );
  }
  return new UpstreamError(classifyTransport(err instanceof OpenAI.APIConnectionError ? (err.cause ?? err) : err));
}
