/**
 * What a model server reported at a probed position, in the port's types: shared by the chat path
 * (openai-upstream.ts) and llama.cpp's completion path (llama-packed.ts).
 */
import type { Alternative } from "./types";

/** `top_logprobs` asked for: the most OpenAI, vLLM (default max_logprobs) and Ollama accept. */
export const TOP_LOGPROBS = 20;

/** A server's answer cut for the log. */
export function truncated(text: string, max = 2000): string {
  return text.length <= max ? text : `${text.slice(0, max)}... (${text.length} characters)`;
}

/** A reported token as an Alternative: its bytes kept when the server sent them (partial UTF-8 pieces). */
export function alternative(t: { token: string; logprob: number; bytes?: number[] | null }): Alternative {
  return t.bytes === undefined || t.bytes === null
    ? { token: t.token, logprob: t.logprob }
    : { token: t.token, logprob: t.logprob, bytes: t.bytes };
}
