import { classifyStatus, classifyTransport, retryOnNewConnection } from "./failure";
import type { HttpRequest, RawResponse } from "./http-fetch";
import { type ChatMessage, UpstreamError, type UpstreamFailure } from "./types";

/** One token as llama.cpp's `/completion` reports it (`completion_probabilities`, raw logprobs). */
export interface NativeToken {
  id?: number;
  token: string;
  logprob: number;
  bytes?: number[] | null;
}

/** One prompt's answer from `/completion`, reduced by `response_fields` to what a probe reads. */
export interface NativeResult {
  completion_probabilities?: (NativeToken & { top_logprobs?: NativeToken[] })[];
  /** Prompt tokens the server evaluated for this prompt (not taken from the slot's cache). */
  "timings/prompt_n"?: number;
  /** Prompt tokens the server took from the slot's cache. */
  "timings/cache_n"?: number;
  tokens_predicted?: number;
  /** The text decoded (not the prompt). */
  content?: string;
  /** `limit` when it stopped at n_predict, `eos` at an end-of-generation token. */
  stop_type?: string;
}

/** The fields a probe reads of each answer: the server leaves out the rest (the prompt, the settings). */
export const RESPONSE_FIELDS = [
  "completion_probabilities",
  "timings/prompt_n",
  "timings/cache_n",
  "tokens_predicted",
  "content",
  "stop_type",
];

export interface LlamaNativeOptions {
  /** The server's root (its OpenAI base URL without `/v1`). */
  root: string;
  authorization: string | undefined;
  timeoutMs: number;
  /** Calls over the kept-alive connections the chat calls use (http-fetch.ts). */
  request: HttpRequest;
}

/**
 * llama.cpp's own endpoints beside its OpenAI ones (llama-server b10573, `tools/server/README.md`):
 * `/apply-template` renders chat messages with the server's template exactly as its chat endpoint does
 * (the same code: `oaicompat_chat_params_parse`), `/tokenize` tokenizes as its prompts are tokenized,
 * `/completion` takes prompts as token ids and answers several prompts in one call. Failures are classified
 * by failure.ts like a chat call's, and a kept-alive connection cut as a call went out is tried once more.
 */
export class LlamaNative {
  constructor(private readonly options: LlamaNativeOptions) {}

  /** The prompt text the server's template renders for these messages (a final assistant message continued). */
  async applyTemplate(messages: readonly ChatMessage[], templateKwargs: boolean, signal: AbortSignal): Promise<string> {
    const body = JSON.stringify({
      messages,
      ...(templateKwargs ? { chat_template_kwargs: { enable_thinking: false } } : {}),
    });
    const answer = (await this.post("/apply-template", body, signal)) as { prompt?: unknown };
    if (typeof answer.prompt !== "string") throw malformed("/apply-template answered without a prompt");
    return answer.prompt;
  }

  /**
   * The server's tokens for `content`, special tokens parsed (as in a prompt) unless `parseSpecial` is false;
   * `addSpecial` adds what the model adds at a prompt's start (BOS), as a string prompt gets.
   */
  async tokenize(
    content: string,
    options: { addSpecial: boolean; parseSpecial?: boolean },
    signal: AbortSignal,
  ): Promise<number[]> {
    const body = JSON.stringify({
      content,
      add_special: options.addSpecial,
      parse_special: options.parseSpecial ?? true,
    });
    const answer = (await this.post("/tokenize", body, signal)) as { tokens?: unknown };
    const tokens = answer.tokens;
    if (!Array.isArray(tokens) || !tokens.every((t) => Number.isInteger(t))) {
      throw malformed("/tokenize answered without token ids");
    }
    return tokens as number[];
  }

  /** The same with each token's text (`piece`: a string, or its bytes when they are not whole UTF-8). */
  async pieces(content: string, signal: AbortSignal): Promise<{ id: number; piece: string | number[] }[]> {
    const body = JSON.stringify({ content, add_special: true, parse_special: true, with_pieces: true });
    const answer = (await this.post("/tokenize", body, signal)) as { tokens?: unknown };
    if (!Array.isArray(answer.tokens)) throw malformed("/tokenize answered without tokens");
    return answer.tokens as { id: number; piece: string | number[] }[];
  }

  /**
   * One `/completion` call (its JSON body given whole, see llama-packed.ts): one answer per prompt, in the
   * prompts' order (the server answers one prompt with an object, several with an array).
   */
  async completion(body: string | Uint8Array, prompts: number, signal: AbortSignal): Promise<NativeResult[]> {
    const answer = await this.post("/completion", body, signal);
    const results = Array.isArray(answer) ? answer : [answer];
    if (results.length !== prompts || !results.every((r) => typeof r === "object" && r !== null)) {
      throw malformed(`/completion answered ${results.length} result(s) for ${prompts} prompt(s)`);
    }
    return results as NativeResult[];
  }

  private async post(path: string, body: string | Uint8Array, signal: AbortSignal): Promise<unknown> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once(path, body, signal);
      } catch (err) {
        const failure = err instanceof UpstreamError ? err.failure : undefined;
        // Only reads: one cut as it went out is sent once more on a new connection (as a chat call is).
        if (failure !== undefined && !signal.aborted && retryOnNewConnection(failure)) {
          if (attempt === 0) continue;
          throw new UpstreamError({ kind: "unreachable", detail: "detail" in failure ? failure.detail : "" });
        }
        throw err;
      }
    }
  }

  private async once(path: string, body: string | Uint8Array, signal: AbortSignal): Promise<unknown> {
    const { root, authorization, timeoutMs } = this.options;
    // The call ends with the decision (`signal`: its deadline or its client gone), or at a backstop a second
    // after the configured timeout, as the chat client's; its timer and listener go with the call.
    const call = new AbortController();
    const onAbort = () => call.abort();
    let timedOut = false;
    const backstop = setTimeout(() => {
      timedOut = true;
      call.abort();
    }, timeoutMs + 1000);
    signal.addEventListener("abort", onAbort, { once: true });
    if (signal.aborted) call.abort();
    let response: RawResponse;
    try {
      response = await this.options.request(`${root}${path}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(authorization === undefined ? {} : { authorization }),
        },
        body,
        signal: call.signal,
      });
    } catch (err) {
      if (signal.aborted) throw new UpstreamError({ kind: "aborted" });
      if (timedOut) throw new UpstreamError({ kind: "timeout" });
      throw new UpstreamError(classifyTransport(err));
    } finally {
      clearTimeout(backstop);
      signal.removeEventListener("abort", onAbort);
    }
    const text = response.body.toString("utf8");
    if (response.status < 200 || response.status > 299) {
      const retryAfter = response.headers["retry-after"];
      throw new UpstreamError(classifyStatus(response.status, errorMessage(text), retryAfter));
    }
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw malformed(`${path} answered with a body that is not JSON: ${text.slice(0, 200)}`);
    }
  }
}

/** The server's message from an error body: llama.cpp's `{ error: { message } }`, a bare string, or the text. */
function errorMessage(text: string): string {
  try {
    const body = JSON.parse(text) as { error?: unknown; message?: unknown };
    if (typeof body.error === "string") return body.error;
    if (typeof body.error === "object" && body.error !== null && "message" in body.error) {
      return String(body.error.message);
    }
    if (typeof body.message === "string") return body.message;
  } catch {
    // Not JSON: the text is the message.
  }
  return text;
}

function malformed(detail: string): UpstreamError {
  const failure: UpstreamFailure = { kind: "malformed", detail };
  return new UpstreamError(failure);
}
