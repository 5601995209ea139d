import type { JsonValue } from "@localdecider/contracts";
import type { Entry, ImageAsset } from "@localdecider/contracts/decider";

/**
 * The upstream port: what the decider asks of a model (a model server, or the embedded engine) and what it
 * gets back. decide/ and upstream/ both import these; nothing here imports either. Two protocols stand
 * behind it: the chat probe (Upstream: one token after a prefilled answer, read from its logprobs) and the
 * native System One call (NativeUpstream: the server answers a prompt's questions itself).
 */

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/**
 * How to read the next token after a probe's prefill: the JSON text each outcome code continues as
 * (`true`, `7`, or `B"` for a choice, whose opening quote is in the prefill) and whether JSON whitespace
 * may come first there (not inside a string).
 */
export interface Reading {
  literals: readonly string[];
  whitespaceFirst: boolean;
}

/** One upstream call: the prompt's shared messages, then an assistant message prefilled up to one value. */
export interface ProbeRequest {
  messages: ChatMessage[];
  /** How a server's reported alternatives are read (see decide/readout.ts). */
  reading: Reading;
  /**
   * Each outcome's text right after the prefill, as the model would write it (` true`, `7`, `B`): what an
   * engine that scores outcomes exactly scores. Codes are prefix-free (one width), so no closing text is needed.
   */
  continuations: string[];
}

/** One token a server reported at the probed position, with its natural-log probability. */
export interface Alternative {
  token: string;
  logprob: number;
  /** The token's UTF-8 bytes when the server reports them (llama.cpp sends `token: ""` for partial UTF-8). */
  bytes?: number[];
}

/** Where a call runs: the request's signal, and the slot of the server it holds (see limits/types.ts). */
export interface ProbeOptions {
  signal: AbortSignal;
  /** The slot's number, to keep every call of a request on one slot; undefined: the server chooses. */
  slot: number | undefined;
  /**
   * The client's `prompt_cache_key`, when it gave one: a backend that keeps recent states (the embedded
   * engine's state store) then reuses only states kept under the same key. It only narrows: without it, or
   * with it, a state is reused only for a prompt that begins with the very same tokens.
   */
  cacheKey?: string | undefined;
}

/** Tokens the backend evaluated (prompt tokens it did not take from its cache) and decoded. */
export interface ProbeUsage {
  input: number;
  output: number;
  /**
   * Prompt tokens the backend took from its cache instead of evaluating them (a server's `cached_tokens` or
   * `cache_n`, the embedded engine's kept states), when it says: `input` plus `cached` is the whole prompt.
   */
  cached?: number;
}

/** What a model server brought back for one probe: the top alternatives at the probed position. */
export interface AlternativesResult {
  /** The alternatives reported at the probed position; null when the backend sent no logprobs. */
  alternatives: Alternative[] | null;
  /** The one token the backend emitted there (at temperature 0, its most likely), if it sent one. */
  emitted: Alternative | null;
  usage: ProbeUsage;
  /** The server's whole answer (truncated) when it sent no logprobs: for the log. */
  raw?: string;
  scores?: undefined;
}

/** What an engine that sees the whole distribution brought back: every outcome scored exactly. */
export interface ScoredResult {
  /**
   * Natural-log probability of each of the probe's `continuations`, in order (a sum over its tokens), up to
   * one constant common to all of them (renormalising over the outcomes cancels it).
   */
  scores: number[];
  usage: ProbeUsage;
}

export type ProbeResult = AlternativesResult | ScoredResult;

/** What the decider needs from a model: what follows a prefilled answer. */
export interface Upstream {
  /**
   * Most outcomes one probe can tell apart (Limits.outcomesPerPart): a server's top-20 alternatives allow
   * 20; an engine that scores each outcome has no limit. Unset means 20.
   */
  readonly outcomesPerPart?: number;
  /**
   * How a request's calls should run in its slot: `slot` (a prompt cache per slot: one call at a time, so
   * each reuses what the one before evaluated) or `shared` (a prefix cache shared by every sequence, as
   * vLLM's and SGLang's: the first call of each prompt alone, then the rest of that prompt at once).
   */
  readonly prefixCache: "slot" | "shared";
  probe(request: ProbeRequest, options: ProbeOptions): Promise<ProbeResult>;
  /**
   * Probes of one prompt in one call, when the backend can (llama.cpp's multi-prompt `/completion` in the
   * request's slot, the embedded engine's batch): the results in the requests' order. The requests share
   * everything but their last (assistant) message. Without it, each probe is its own call.
   */
  probeMany?(requests: readonly ProbeRequest[], options: ProbeOptions): Promise<ProbeResult[]>;
}

/** What a model server speaks, as its start-up check found (LOCALDECIDER_UPSTREAM_PROTOCOL). */
export type Protocol = "systemone" | "chat";

/**
 * One question of a native call: a part of the plan (a whole question, a chunk of a big choice, or the final
 * round among the chunks' leaders), sent under the client's own question name.
 */
export interface NativeQuestion {
  key: string;
  /** `box`: Jev 1.14's question, where in an image a thing is (no options; its answer is four edges). */
  type: "noul" | "choice" | "score" | "box";
  instructions: Entry | undefined;
  /** choice: the labels shown, in order; score: the levels ("0".."N-1"); noul: "true" and "false"; box: none. */
  options: readonly { label: string; description: Entry | undefined }[];
}

/** One `POST /v1/systemone` call: one prompt of the plan, at most QUESTIONS_PER_CALL questions. */
export interface NativeCall {
  /** The model asked for upstream: LOCALDECIDER_UPSTREAM_MODEL, or a decision model the client named. */
  model: string;
  /** The client's state, as it sent it: the server renders it. */
  state: JsonValue;
  questions: readonly NativeQuestion[];
  /** Jev 1.14's images (`assets`), by the names the state and questions reference them by; every call of the request carries them. */
  assets?: Readonly<Record<string, ImageAsset>>;
}

/** What a native call brought back: each answer as the server sent it (checked by decide/), and the usage. */
export interface NativeResult {
  /** By question key. Unknown to the decider until checked against its call; never passed on as is. */
  answers: Readonly<Record<string, unknown>>;
  usage: ProbeUsage;
}

/**
 * A model server that speaks System One itself: one call answers a prompt's questions, each with the server's
 * own distribution (llama.cpp's decision models, Ollama, LiteLLM, a hosted Jev).
 */
export interface NativeUpstream {
  readonly protocol: "systemone";
  /**
   * Most options one question may have for `model` on this server: learned from its 422 (or 413), else the
   * documented value for the model's type (openjev and nimble 52, the others 255).
   */
  optionLimit(model: string): number;
  decide(call: NativeCall, options: ProbeOptions): Promise<NativeResult>;
}

/** Either protocol's adapter, as a model server's current one (the chat probe unless it speaks System One). */
export type ModelPort = Upstream | NativeUpstream;

export function isNative(port: ModelPort): port is NativeUpstream {
  return "protocol" in port && port.protocol === "systemone";
}

/**
 * How an upstream call failed, classified once where it failed (upstream/failure.ts classifies a server's
 * answer; the embedded engine reports its kinds directly). `detail` is for the log only: it may hold the
 * server's own text or an address.
 */
export type UpstreamFailure =
  | { kind: "timeout" }
  | { kind: "aborted" }
  /** No answer: refused, unreachable, or cut again after one more try. */
  | { kind: "unreachable"; detail: string }
  /** A kept-alive connection closed by the other side as the call went out (before any answer). */
  | { kind: "connection_cut"; detail: string }
  /** The server does not hold the model (HTTP 404). */
  | { kind: "model_missing"; detail: string }
  /** The prompt does not fit the context: alone (`together` false), or only beside other calls (llama.cpp's shared-context 500). */
  | { kind: "context_overflow"; together: boolean; detail: string }
  /** A 429: too many requests for now; the server stays in rotation. */
  | { kind: "busy"; status: number; retryAfter?: string; detail: string }
  /** A 503: the server cannot serve now (loading, overloaded). */
  | { kind: "not_ready"; status: number; retryAfter?: string; detail: string }
  /** A 200 whose body lacks what every answer needs (no choice). */
  | { kind: "malformed"; detail: string }
  /** A native server's 413 for the size of a call (its prompt-token budget): smaller calls may pass. */
  | { kind: "too_large"; detail: string }
  /** A native server's refusal of what the client asked (422, or images a model cannot take): the client's to fix. */
  | { kind: "refused"; status: number; reason: string; detail: string }
  /** A native server's 422 (or 413) naming the most options one question may have for this model. */
  | { kind: "option_limit"; limit: number; detail: string }
  /** A native server's 501: the model it holds is not a decision model. */
  | { kind: "not_decision_model"; detail: string }
  /** Any other error status. */
  | { kind: "server_error"; status: number; detail: string };

export class UpstreamError extends Error {
  constructor(readonly failure: UpstreamFailure) {
    super("detail" in failure ? `upstream ${failure.kind}: ${failure.detail}` : `upstream ${failure.kind}`);
    this.name = "UpstreamError";
  }
}

/**
 * The most specific message in an error's cause chain (fetch says "fetch failed" and keeps the real reason,
 * e.g. `connect ECONNREFUSED 127.0.0.1:8081`, in `cause`). Duck-typed: errors from another realm (undici's
 * under Jest) are not `instanceof Error` here.
 */
export function rootCauseMessage(err: unknown): string {
  let current: unknown = err;
  let message = String(err);
  for (let depth = 0; depth < 5 && typeof current === "object" && current !== null; depth++) {
    const { message: m, cause } = current as { message?: unknown; cause?: unknown };
    if (typeof m === "string" && m !== "") message = m;
    current = cause;
  }
  return message;
}
