import type { Logger } from "@localdecider/service-kit";
import type { PromptSeam } from "./llama-packed";
import type { ChatBody, Completion, OpenAIUpstream } from "./openai-upstream";
import type { Readiness, ReadinessProbe } from "./readiness";
import { detectServer, type ServerProfile } from "./server-profile";
import { type Alternative, type ChatMessage, type Reading, rootCauseMessage, UpstreamError } from "./types";

export interface ServerCheckOptions {
  baseURL: string;
  authorization: string | undefined;
  timeoutMs: number;
  /** LOCALDECIDER_MAX_INFLIGHT: compared with a llama.cpp server's slots. */
  maxInflight: number;
  /** LOCALDECIDER_ALLOW_NO_LOGPROBS: a server without logprobs is then usable. */
  allowNoLogprobs: boolean;
  /** LOCALDECIDER_PACK_PROMPTS: look for a llama.cpp template's seam (else every probe is a chat call). */
  packPrompts: boolean;
  logger: Logger;
}

/** The inspection's own prompt: small, and the same every time. */
const MESSAGES: ChatMessage[] = [
  { role: "system", content: "You answer with one JSON object." },
  { role: "user", content: 'Is the sky blue? Answer {"ok": true} or {"ok": false}.' },
];
const PREFILL = "{";
const READING: Reading = { literals: ['"'], whitespaceFirst: true };
/** Reported logprobs of one position may differ this much between two calls (other batch shapes). */
const SAME_LOGPROB = 0.01;

/**
 * A model server's readiness: its model list (`list`), then, once each time it becomes ready, what the
 * decider needs of it, asked of the server itself with a few one-token calls:
 *
 * - its kind and slots (server-profile.ts), given to the upstream adapter, which sends what that server
 *   takes (`id_slot`, `chat_template_kwargs`);
 * - that it continues a prefilled assistant message rather than closing it and opening a new turn (the
 *   prompt's tokens with a one-character prefill are the generation prompt's plus at most two);
 * - that its `top_logprobs` are the model's raw distribution: they sum to at most 1 and do not change with
 *   the temperature (a server that reports them after sampling reports another distribution);
 * - on llama.cpp, where its template's prompts can be cut into token ids and text (llama-packed.ts), and
 *   that a prompt sent that way through `/completion` is answered with the chat call's alternatives: then
 *   a prompt's probes go in one call. Otherwise (an older server without `/apply-template`, a template that
 *   rewrites the prefill) each probe stays a chat call, with a warning.
 *
 * A server that fails either is not ready, in plain words, and decisions get 503 (the gate refuses them
 * like a missing model): answers read from it would be wrong.
 */
export class ServerCheck implements ReadinessProbe {
  private inspection: Promise<Readiness> | undefined;

  constructor(
    private readonly list: ReadinessProbe,
    private readonly upstream: OpenAIUpstream,
    private readonly options: ServerCheckOptions,
  ) {}

  get maxAgeMs(): number | undefined {
    return this.list.maxAgeMs;
  }

  async check(): Promise<Readiness> {
    const listed = await this.list.check();
    if (!listed.ready) {
      // A server that went away may come back as another build or with other flags: asked again then.
      this.inspection = undefined;
      return listed;
    }
    this.inspection ??= this.inspect().catch((err: unknown): Readiness => {
      this.inspection = undefined;
      return {
        ready: false,
        message: "inference backend did not answer the decider's start-up checks",
        modelMissing: false,
        detail: rootCauseMessage(err),
      };
    });
    return this.inspection;
  }

  private async inspect(): Promise<Readiness> {
    const profile = await detectServer(this.options);
    this.upstream.profile = profile;
    this.logProfile(profile);
    const signal = AbortSignal.timeout(this.options.timeoutMs);
    const prefilled = [...MESSAGES, { role: "assistant" as const, content: PREFILL }];
    // A plain chat call (a new assistant turn), and the same with the prefill, then again hotter.
    const opened = await this.upstream.complete(this.plainBody(), signal);
    const cold = await this.upstream.ask(this.upstream.body(prefilled), READING, signal);
    const hot = await this.upstream.ask(this.upstream.body(prefilled, { temperature: 1 }), READING, signal);
    const continues = continuesPrefill(opened, cold);
    if (continues === false) {
      return unusable(
        "the model server does not continue a prefilled assistant message (it closes it and starts a new turn), so answers cannot be read at the right position; use llama.cpp, vLLM or SGLang, or an Ollama model whose template leaves the last message open",
        `prompt tokens: ${opened.usage?.prompt_tokens} without the prefill, ${cold.usage?.prompt_tokens} with "${PREFILL}"`,
      );
    }
    const coldTop = topOf(cold);
    if (coldTop.length === 0) {
      if (this.options.allowNoLogprobs) return { ready: true };
      return unusable(
        "the model server reports no token probabilities (top_logprobs), so no probabilities can be read; use a server that reports them, or set LOCALDECIDER_ALLOW_NO_LOGPROBS=true to accept answers from the emitted token alone",
        JSON.stringify(cold).slice(0, 1000),
      );
    }
    const raw = rawDistribution(coldTop, topOf(hot));
    if (raw !== undefined) {
      return unusable(
        "the model server's top_logprobs are not the model's raw distribution (they change with the temperature, or sum to more than 1), so probabilities read from them would be wrong; on vLLM, start it with --logprobs-mode raw_logprobs",
        raw,
      );
    }
    if (profile.kind === "llama.cpp" && this.options.packPrompts) {
      const packing = await this.packing(prefilled, cold, signal);
      if ("seam" in packing) {
        this.upstream.profile = { ...profile, packing: packing.seam };
        this.options.logger.info("llama.cpp prompts packed: each prompt's questions in one /completion call", {
          server: this.options.baseURL,
          cutAfter: packing.seam.special,
          tail: packing.seam.tail,
        });
      } else {
        this.options.logger.warn("llama.cpp prompts not packed: each question is a chat call", {
          server: this.options.baseURL,
          reason: packing.reason,
        });
      }
    }
    return { ready: true };
  }

  /**
   * The seam of a llama.cpp server's template, once the packed path answered the check's prefilled prompt
   * (twice in one call) with the alternatives its chat call reported; or why prompts are not packed.
   */
  private async packing(
    prefilled: ChatMessage[],
    cold: Completion,
    signal: AbortSignal,
  ): Promise<{ seam: PromptSeam } | { reason: string }> {
    try {
      const found = await this.upstream.findSeam(MESSAGES, signal);
      if (!("seam" in found)) return found;
      const probe = { messages: prefilled, reading: READING, continuations: [] };
      const results = await this.upstream.packedWith(found.seam).probeMany([probe, probe], { signal, slot: undefined });
      for (const result of results ?? [undefined]) {
        const packed = result?.scores === undefined ? (result?.alternatives ?? []) : [];
        const differs = sameReport(topOf(cold), packed);
        if (differs !== undefined) return { reason: `/completion answered otherwise than the chat call: ${differs}` };
      }
      return found;
    } catch (err) {
      if (err instanceof UpstreamError && err.failure.kind === "model_missing") {
        return {
          reason:
            "it answers HTTP 404 to llama.cpp's own endpoints (/apply-template, /tokenize, /completion): an older llama-server, or a proxy that passes /v1 only",
        };
      }
      return { reason: rootCauseMessage(err) };
    }
  }

  /** A plain chat call: no prefill, so the server opens the assistant's turn itself. */
  private plainBody(): ChatBody {
    const { continue_final_message, add_generation_prompt, id_slot, ...plain } = this.upstream.body(MESSAGES);
    return plain as ChatBody;
  }

  private logProfile(profile: ServerProfile): void {
    const { logger, maxInflight, baseURL } = this.options;
    logger.info("model server inspected", { server: baseURL, ...profile });
    if (profile.slots !== undefined && profile.slots !== maxInflight) {
      logger.warn(
        "LOCALDECIDER_MAX_INFLIGHT differs from the llama.cpp server's slots: set it to the server's --parallel",
        {
          maxInflight,
          serverSlots: profile.slots,
          why: "each request runs in one slot of its own; more requests than slots share slots and wait, fewer leave slots idle",
        },
      );
    }
  }
}

function unusable(message: string, detail: string): Readiness {
  return { ready: false, message, modelMissing: true, detail };
}

/**
 * Whether the prefilled call's prompt is the plain call's plus the prefill (at most two tokens more) rather
 * than the plain prompt, the prefill and a closed turn with a new assistant header. Undefined when the
 * server reports no prompt tokens.
 */
function continuesPrefill(opened: Completion, prefilled: Completion): boolean | undefined {
  const a = opened.usage?.prompt_tokens;
  const b = prefilled.usage?.prompt_tokens;
  if (a === undefined || b === undefined || a === 0) return undefined;
  return b - a <= 2;
}

type Reported = { token: string; logprob: number; bytes?: number[] | null };

function topOf(response: Completion): Reported[] {
  return response.choices?.[0]?.logprobs?.content?.[0]?.top_logprobs ?? [];
}

/** A reported token's identity: its text, and its bytes (partial UTF-8 pieces all have the text ""). */
const keyOf = (a: Reported) => `${a.token}\u0000${(a.bytes ?? []).join(",")}`;

/** Why two reports of the same position differ (their five most likely tokens), or undefined when they do not. */
function sameReport(chat: Reported[], packed: readonly Alternative[]): string | undefined {
  if (chat.length === 0 || packed.length === 0) return "no alternatives reported";
  const byToken = new Map(packed.map((a) => [keyOf(a), a.logprob]));
  for (const alt of chat.slice(0, 5)) {
    const other = byToken.get(keyOf(alt));
    if (other === undefined || Math.abs(other - alt.logprob) > SAME_LOGPROB) {
      return `${JSON.stringify(alt.token)} has logprob ${alt.logprob} there and ${other ?? "is not reported"} here`;
    }
  }
  return undefined;
}

/** Why two reports of the same position are not one raw distribution, or undefined when they are. */
function rawDistribution(cold: Reported[], hot: Reported[]): string | undefined {
  const mass = cold.reduce((sum, a) => sum + Math.exp(a.logprob), 0);
  if (mass > 1 + SAME_LOGPROB) return `the reported probabilities sum to ${mass.toFixed(3)}`;
  const hotByToken = new Map(hot.map((a) => [keyOf(a), a.logprob]));
  for (const alt of cold.slice(0, 5)) {
    const other = hotByToken.get(keyOf(alt));
    if (other === undefined || Math.abs(other - alt.logprob) > SAME_LOGPROB) {
      return `at temperature 0, ${JSON.stringify(alt.token)} has logprob ${alt.logprob}; at temperature 1, ${other ?? "not reported"}`;
    }
  }
  return undefined;
}
