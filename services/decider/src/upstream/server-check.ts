import type { Logger } from "@localdecider/service-kit";
import type { PromptSeam } from "./llama-packed";
import type { ChatBody, Completion, OpenAIUpstream } from "./openai-upstream";
import { decisionsLastResort, type FoundProtocol, findProtocol, type ProtocolSetting } from "./protocol";
import type { Readiness, ReadinessProbe } from "./readiness";
import { detectServer, type ServerProfile } from "./server-profile";
import {
  type Alternative,
  type ChatMessage,
  type Protocol,
  type Reading,
  rootCauseMessage,
  UpstreamError,
} from "./types";

export interface ServerCheckOptions {
  baseURL: string;
  authorization: string | undefined;
  timeoutMs: number;
  /** The least time between two rechecks a 501 asks for (default RECHECK_MIN_GAP_MS; tests lengthen it). */
  recheckGapMs?: number;
  /** LOCALDECIDER_UPSTREAM_MAX_BODY: the most any check reads of an answer. */
  maxBodyBytes?: number;
  /** LOCALDECIDER_UPSTREAM_MODEL. */
  model: string;
  /** LOCALDECIDER_UPSTREAM_PROTOCOL. */
  protocol: ProtocolSetting;
  /** LOCALDECIDER_MAX_INFLIGHT: compared with a llama.cpp server's slots. */
  maxInflight: number;
  /** LOCALDECIDER_ALLOW_NO_LOGPROBS: a server without logprobs is then usable. */
  allowNoLogprobs: boolean;
  /** LOCALDECIDER_PACK_PROMPTS: look for a llama.cpp template's seam (else every probe is a chat call). */
  packPrompts: boolean;
  logger: Logger;
  /** Told the server's kind and slots each time they are read (the native adapter sends images by kind). */
  onProfile?: (profile: ServerProfile) => void;
}

/** The inspection's own prompt: small, and the same every time. */
const MESSAGES: ChatMessage[] = [
  { role: "system", content: "You answer with one JSON object." },
  { role: "user", content: 'Is the sky blue? Answer {"ok": true} or {"ok": false}.' },
];
const PREFILL = "{";
const READING: Reading = { literals: ['"'], whitespaceFirst: true };
/**
 * How far the logprobs two calls report for the same position may be apart and still be one distribution:
 * 0.1 nats (10 % in probability). Two calls of one prompt are evaluated in batches of other shapes (the
 * prompt whole or from a cached prefix, alone or beside other slots' tokens), and on a GPU the shape picks
 * the kernel: llama.cpp's CUDA build sums F16 weights' products in F16 through cuBLAS for batches over 16
 * tokens and in F32 for smaller ones, which can move a logprob by hundredths (a random-weight model of
 * Qwen2.5 1.5B's shape on an H100 moved one by more than 0.01, the bound before, so its prompts were not
 * packed; vLLM's own half-precision tests allow 0.01 + 1 % of the value). On a CPU they differ by less (4e-6
 * on the tests' tiny model, 3e-4 on the 1.5B-shaped one). What the checks are there to catch moves them by
 * far more: a prompt read otherwise (a token more or less, another position, a template's other rendering)
 * changes what the model conditions on, and a distribution reported after sampling changes with the
 * temperature (a factor on every logit).
 */
const SAME_LOGPROB = 0.1;
/** The reported probabilities of a raw distribution's top tokens sum to at most 1, up to rounding. */
const MASS_SLACK = 0.01;

/**
 * A model server's readiness: its model list (`list`), then, once each time it becomes ready, what the
 * decider needs of it, asked of the server itself:
 *
 * - its kind and slots (server-profile.ts), given to the chat adapter, which sends what that server takes
 *   (`id_slot`, `chat_template_kwargs`);
 * - which protocol it speaks (protocol.ts, LOCALDECIDER_UPSTREAM_PROTOCOL): a server that answers System One
 *   itself is asked nothing more;
 * - on the chat path, with a few one-token calls: that it continues a prefilled assistant message rather than
 *   closing it and opening a new turn (the prompt's tokens with a one-character prefill are the generation
 *   prompt's plus at most two), and that its `top_logprobs` are the model's raw distribution (they sum to at
 *   most 1 and do not change with the temperature; a server that reports them after sampling reports another
 *   distribution);
 * - on llama.cpp's chat path, where its template's prompts can be cut into token ids and text (llama-packed.ts),
 *   and that a prompt sent that way through `/completion` is answered with the chat call's alternatives: then
 *   a prompt's probes go in one call. Otherwise (an older server without `/apply-template`, a template that
 *   rewrites the prefill) each probe stays a chat call, with a warning.
 *
 * A server that fails is not ready, in plain words, and decisions get 503 (the gate refuses them like a
 * missing model): answers read from it would be wrong. The protocol found stays until a new check finds
 * another, so a server that blips is not asked the other way meanwhile.
 */
/**
 * The least time between two checks a native server's 501 asks for (review four, item 5): 50 requests refused
 * 501 at once made 125 model-list calls and 37 more, each 501 starting a check and dropping the one in flight.
 */
export const RECHECK_MIN_GAP_MS = 2000;

export class ServerCheck implements ReadinessProbe {
  private inspection: Promise<Readiness> | undefined;
  private found: FoundProtocol | undefined;
  /** The recheck in flight, which every 501 meanwhile shares. */
  private rechecking: Promise<unknown> | undefined;
  /** When the last recheck began (Date.now()), and the one waiting for the gap to pass. */
  private lastRecheckAt = Number.NEGATIVE_INFINITY;
  private recheckTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly list: ReadinessProbe,
    private readonly upstream: OpenAIUpstream,
    private readonly options: ServerCheckOptions,
  ) {}

  get maxAgeMs(): number | undefined {
    return this.list.maxAgeMs;
  }

  /** The protocol the last check found; undefined before any check succeeded. */
  get protocol(): Protocol | undefined {
    return this.found?.protocol;
  }

  /** The decision models the server lists (native only): what a client may name besides our own names. */
  get decisionModels(): readonly string[] {
    return this.found?.decisionModels ?? [];
  }

  /**
   * The server said its model is not a decision model (a 501 on a native call): it is checked again now, and
   * takes its chat path if that works (the protocol found stays until then).
   */
  recheck(): void {
    // One at a time, shared by every 501 that arrives meanwhile, and at most one per RECHECK_MIN_GAP_MS: a
    // 501 within the gap schedules one for its end (once), so the last word of the server is still heard.
    if (this.rechecking !== undefined || this.recheckTimer !== undefined) return;
    const wait = this.lastRecheckAt + (this.options.recheckGapMs ?? RECHECK_MIN_GAP_MS) - Date.now();
    if (wait > 0) {
      this.recheckTimer = setTimeout(() => {
        this.recheckTimer = undefined;
        this.recheck();
      }, wait);
      this.recheckTimer.unref();
      return;
    }
    this.lastRecheckAt = Date.now();
    this.inspection = undefined;
    this.rechecking = this.check()
      .catch(() => undefined)
      .finally(() => {
        this.rechecking = undefined;
      });
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
    this.options.onProfile?.(profile);
    this.logProfile(profile);
    const found = await findProtocol({ ...this.options, setting: this.options.protocol, kind: profile.kind });
    if ("ready" in found) return found;
    if (found.protocol !== "chat") return this.use(found);
    const why = found.notDecisionModel;
    // `auto`'s last resort when the chat path fails too: OpenAI's Decisions dialect (protocol.ts).
    const lastResort = async () => {
      if (this.options.protocol !== "auto") return undefined;
      const decisions = await decisionsLastResort({ ...this.options, setting: "auto", kind: profile.kind });
      return decisions === undefined || "ready" in decisions ? decisions : this.use(decisions);
    };
    let chat: Readiness;
    try {
      chat = await this.inspectChat(profile);
    } catch (err) {
      const last = await lastResort();
      if (last !== undefined) return last;
      if (why === undefined) throw err;
      chat = {
        ready: false,
        message: "its chat completions failed",
        modelMissing: true,
        detail: rootCauseMessage(err),
      };
    }
    if (chat.ready) return this.use(found);
    const last = await lastResort();
    if (last !== undefined) return last;
    if (why === undefined) return chat;
    // Neither way works: say both, the decision model first (the likelier thing the operator meant to run).
    return {
      ...chat,
      message: `the model server's model is not a decision model (${why}), and its chat path cannot be used either: ${chat.message}`,
    };
  }

  private use(found: FoundProtocol): Readiness {
    if (found.protocol !== this.found?.protocol) {
      this.options.logger.info("model server protocol", {
        server: this.options.baseURL,
        protocol: found.protocol,
        how: found.how,
        ...(found.protocol !== "chat" ? { decisionModels: found.decisionModels.slice(0, 20) } : {}),
      });
    }
    this.found = found;
    return { ready: true };
  }

  /**
   * The chat path's checks: the prefill is continued, the reported logprobs are the raw distribution, and on
   * llama.cpp whether a prompt's probes can go in one call.
   */
  private async inspectChat(profile: ServerProfile): Promise<Readiness> {
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
          // How far /completion's logprobs were from the chat call's (0 on a CPU; float noise on a GPU).
          largestDifference: packing.largestDifference,
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
  ): Promise<{ seam: PromptSeam; largestDifference: number } | { reason: string }> {
    try {
      const found = await this.upstream.findSeam(MESSAGES, signal);
      if (!("seam" in found)) return found;
      const probe = { messages: prefilled, reading: READING, continuations: [] };
      const results = await this.upstream.packedWith(found.seam).probeMany([probe, probe], { signal, slot: undefined });
      let largestDifference = 0;
      for (const result of results ?? [undefined]) {
        const packed = result?.scores === undefined ? (result?.alternatives ?? []) : [];
        const { differs, largest } = compareReports(topOf(cold), packed);
        if (differs !== undefined) return { reason: `/completion answered otherwise than the chat call: ${differs}` };
        largestDifference = Math.max(largestDifference, largest);
      }
      return { seam: found.seam, largestDifference };
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

/**
 * Two reports of the same position over the chat call's five most likely tokens: the largest difference of
 * their logprobs, and why they are not one distribution (a token missing, or a difference over SAME_LOGPROB).
 */
function compareReports(chat: Reported[], packed: readonly Alternative[]): { largest: number; differs?: string } {
  if (chat.length === 0 || packed.length === 0)
    return { largest: Number.POSITIVE_INFINITY, differs: "no alternatives reported" };
  const byToken = new Map(packed.map((a) => [keyOf(a), a.logprob]));
  let largest = 0;
  for (const alt of chat.slice(0, 5)) {
    const other = byToken.get(keyOf(alt));
    const difference = other === undefined ? Number.POSITIVE_INFINITY : Math.abs(other - alt.logprob);
    if (difference > SAME_LOGPROB) {
      return {
        largest: difference,
        differs: `${JSON.stringify(alt.token)} has logprob ${alt.logprob} there and ${other ?? "is not reported"} here (more than ${SAME_LOGPROB} apart)`,
      };
    }
    largest = Math.max(largest, difference);
  }
  return { largest };
}

/** Why two reports of the same position are not one raw distribution, or undefined when they are. */
function rawDistribution(cold: Reported[], hot: Reported[]): string | undefined {
  const mass = cold.reduce((sum, a) => sum + Math.exp(a.logprob), 0);
  if (mass > 1 + MASS_SLACK) return `the reported probabilities sum to ${mass.toFixed(3)}`;
  const hotByToken = new Map(hot.map((a) => [keyOf(a), a.logprob]));
  for (const alt of cold.slice(0, 5)) {
    const other = hotByToken.get(keyOf(alt));
    if (other === undefined || Math.abs(other - alt.logprob) > SAME_LOGPROB) {
      return `at temperature 0, ${JSON.stringify(alt.token)} has logprob ${alt.logprob}; at temperature 1, ${other ?? "not reported"}`;
    }
  }
  return undefined;
}
