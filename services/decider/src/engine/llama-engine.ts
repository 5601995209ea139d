import path from "node:path";
import type { ChatMessage } from "../upstream/types";
import { evaluateAfter, logNormaliser } from "./evaluate";
import { importNodeLlamaCpp, type NodeLlamaCpp } from "./node-llama-cpp";
import { PIECE_CHARS, PromptTokenizer, type PromptTokens } from "./prompt-tokens";
import { SequencePool, sharedPrefix } from "./sequence-pool";

export interface EngineOptions {
  modelPath: string;
  /** LOCALDECIDER_GPU: `auto` lets node-llama-cpp pick CUDA, Vulkan or Metal when present; `cpu` never. */
  gpu: "auto" | "cpu";
  /** Sequences of the one context: LOCALDECIDER_MAX_INFLIGHT, so every slot the limiter lends has one. */
  sequences: number;
  /**
   * LOCALDECIDER_STATE_CACHE_MIB: memory for states kept beyond those sequences (more sequences of the same
   * context, each holding what it evaluated last: see SequencePool). Each kept state takes a whole sequence's
   * KV cache (context size x the model's KV bytes per token), so the cap buys floor(cap / that) states, at
   * most MAX_KEPT_STATES. 0 or absent: none kept beyond the slots' own.
   */
  stateCacheMiB?: number;
  /**
   * Tokens each sequence holds (LOCALDECIDER_CONTEXT_SIZE): the longest prompt one call can have; `auto`:
   * the model's training context, at most AUTO_CONTEXT_TOKENS.
   */
  contextSize: number | "auto";
  /** CPU threads for evaluation; 0 means one per math core the machine has (node-llama-cpp's cpuMathCores). */
  threads: number;
  /** Told the share of the model's weights loaded so far, 0 (exclusive) to 1 (node-llama-cpp's onLoadProgress). */
  onLoadProgress?: (loaded: number) => void;
}

/**
 * The most tokens per sequence `auto` gives: enough for the API's largest prompt in practice (a 255-label
 * choice with a short description per label is about 4,500 tokens with the Qwen2.5 tokenizer, and leaves
 * room for a state of ~3,000), while the KV cache of the default model stays under 0.5 GB for the default
 * two sequences (Qwen2.5-1.5B: 28 KiB per token in F16).
 */
export const AUTO_CONTEXT_TOKENS = 8192;

/**
 * The most states kept beyond the slots' own, whatever the cap: "the last few distinct states" a client asks
 * about again (a review's diff, a ticket). Not more: each is a sequence of the context, and a context of 18
 * sequences (2 slots, 16 kept) answered a one-question request about 1.5x slower than one of 2 in two
 * runs side by side on the benchmarks' shaped model, where 6 (4 kept) was not slower.
 */
export const MAX_KEPT_STATES = 4;

/**
 * Bytes of KV cache one token takes in one sequence: K and V (F16, node-llama-cpp's default cache type) of
 * every layer's KV heads, from the GGUF's metadata; undefined when the file does not say.
 */
export function kvBytesPerToken(
  metadata: Record<string, unknown>,
  architecture: string | undefined,
): number | undefined {
  const arch = architecture === undefined ? undefined : (metadata[architecture] as Record<string, unknown> | undefined);
  if (arch === undefined) return undefined;
  const attention = (arch.attention ?? {}) as Record<string, unknown>;
  const layers = arch.block_count;
  const width = arch.embedding_length;
  const heads = attention.head_count;
  const kvHeadsField = attention.head_count_kv ?? heads;
  const kvHeads = Array.isArray(kvHeadsField) ? Math.max(...(kvHeadsField as number[])) : kvHeadsField;
  if (typeof layers !== "number" || typeof width !== "number" || typeof heads !== "number") return undefined;
  if (typeof kvHeads !== "number") return undefined;
  const keyLength = typeof attention.key_length === "number" ? attention.key_length : width / heads;
  const valueLength = typeof attention.value_length === "number" ? attention.value_length : width / heads;
  return layers * kvHeads * (keyLength + valueLength) * 2;
}

/** How many states a cap of `mib` keeps for sequences of `contextSize` tokens (0 when unknown or too small). */
export function keptStatesFor(mib: number, contextSize: number, bytesPerToken: number | undefined): number {
  if (mib <= 0 || bytesPerToken === undefined || bytesPerToken <= 0) return 0;
  return Math.min(MAX_KEPT_STATES, Math.floor((mib * 1024 * 1024) / (contextSize * bytesPerToken)));
}

/** What GET /v1/models and the start-up log say of the loaded model. */
export interface EngineInfo {
  /** The GGUF file's name. */
  file: string;
  architecture: string | undefined;
  /** The weights' type as llama.cpp names it, e.g. `Q4_K_M` or `F16`. */
  quantization: string;
  sizeBytes: number;
  /** Tokens per sequence, as created (llama.cpp may round up). */
  contextSize: number;
  sequences: number;
  /** States kept beyond the slots' sequences (LOCALDECIDER_STATE_CACHE_MIB), each a sequence of its own. */
  keptStates: number;
  /** Memory the kept states take (their KV cache), in bytes; 0 when none are kept. */
  keptStatesBytes: number;
  trainContextSize: number;
  /** What evaluates: `cpu`, or the GPU backend node-llama-cpp chose (`cuda`, `vulkan`, `metal`). */
  backend: string;
  /** CPU threads per evaluation. */
  threads: number;
}

/** A probe's scores, the tokens it evaluated, and the tokens of its prompt taken from the sequence instead. */
export interface Scored {
  scores: number[];
  evaluated: number;
  cached: number;
}

/** Token ids of one outcome after the part of the prompt all outcomes share, and where its score goes. */
interface Pending {
  index: number;
  tail: number[];
}

/** One probe to score: its messages (the last an open assistant message) and its outcomes' texts after them. */
export interface ScoreRequest {
  messages: readonly ChatMessage[];
  continuations: readonly string[];
}

/**
 * A probe's evaluation: the context all its outcomes share (the prompt, and its outcomes' common first
 * tokens, but never an outcome's last token) and each outcome's tokens after it.
 */
function planProbe(
  prefix: readonly number[],
  outcomes: readonly number[][],
): { context: number[]; pending: Pending[] } {
  const first = outcomes[0] ?? [];
  let shared = first.length;
  for (const tokens of outcomes) shared = Math.min(shared, sharedPrefix(first, tokens), tokens.length - 1);
  const context = [...prefix, ...first.slice(0, shared)];
  return { context, pending: outcomes.map((tokens, index) => ({ index, tail: tokens.slice(shared) })) };
}

/**
 * A GGUF model run in-process by node-llama-cpp, reduced to what the decider asks of a model: the exact
 * probability of each outcome's text after a prefilled answer. The prompt is rendered with the model's own
 * chat template (as llama-server does), so an answer means the same here and behind a server.
 */
export class LlamaEngine {
  private readonly pool: SequencePool<NodeLlamaCpp.LlamaContextSequence>;
  private readonly tokenizer = new PromptTokenizer();

  private constructor(
    private readonly lib: typeof NodeLlamaCpp,
    private readonly llama: NodeLlamaCpp.Llama,
    private readonly model: NodeLlamaCpp.LlamaModel,
    private readonly chatWrapper: NodeLlamaCpp.ChatWrapper,
    context: NodeLlamaCpp.LlamaContext,
    readonly info: EngineInfo,
  ) {
    this.pool = new SequencePool(Array.from({ length: context.totalSequences }, () => context.getSequence()));
  }

  static async open(options: EngineOptions): Promise<LlamaEngine> {
    const lib = await importNodeLlamaCpp();
    // build: "never": a prebuilt binary from npm or nothing; never a source build or a download.
    const llama = await lib.getLlama({
      gpu: options.gpu === "cpu" ? false : "auto",
      build: "never",
      logLevel: lib.LlamaLogLevel.error,
      progressLogs: false,
    });
    try {
      const model = await llama.loadModel({
        modelPath: options.modelPath,
        ...(options.onLoadProgress === undefined ? {} : { onLoadProgress: options.onLoadProgress }),
      });
      // No flash attention: its CPU kernel takes other paths for other batch shapes, so the same tokens in
      // other batches differ by up to 0.02 in a logprob; answers must not depend on what ran beside them.
      // Never node-llama-cpp's own default (its maxThreads, twice the cores on a 2-core machine): more
      // threads than cores spin against each other, and an evaluation measured 250x slower that way.
      const threads = options.threads > 0 ? options.threads : Math.max(1, llama.cpuMathCores);
      const contextSize =
        options.contextSize === "auto" ? Math.min(model.trainContextSize, AUTO_CONTEXT_TOKENS) : options.contextSize;
      const metadata = model.fileInfo.metadata as unknown as Record<string, unknown>;
      const perToken = kvBytesPerToken(metadata, model.fileInfo.metadata.general.architecture);
      const keptStates = keptStatesFor(options.stateCacheMiB ?? 0, contextSize, perToken);
      const context = await model.createContext({
        contextSize,
        sequences: options.sequences + keptStates,
        flashAttention: false,
        threads,
      });
      const fileType = model.fileInfo.metadata.general.file_type;
      const info: EngineInfo = {
        file: path.basename(options.modelPath),
        architecture: model.fileInfo.metadata.general.architecture,
        quantization:
          fileType === undefined ? "unknown" : String(lib.GgufFileType[fileType] ?? fileType).replace(/^MOSTLY_/, ""),
        sizeBytes: model.size,
        contextSize: context.contextSize,
        sequences: context.totalSequences - keptStates,
        keptStates,
        keptStatesBytes: keptStates * context.contextSize * (perToken ?? 0),
        trainContextSize: model.trainContextSize,
        backend: llama.gpu === false ? "cpu" : llama.gpu,
        threads,
      };
      return new LlamaEngine(lib, llama, model, chatWrapperOf(lib, model), context, info);
    } catch (error) {
      await llama.dispose();
      throw error;
    }
  }

  /** Sequences lent now, the most lent at once since start, and how many calls had to wait for one. */
  get sequencesBusy(): { now: number; peak: number; waits: number } {
    return { now: this.pool.lent, peak: this.pool.peak, waits: this.pool.waits };
  }

  /** The tokens the model evaluates for these messages, the last one an open (prefilled) assistant message. */
  tokenize(messages: readonly ChatMessage[], continuation = ""): number[] {
    const tokens: number[] = [
      ...this.lib.LlamaText([this.render(messages), continuation]).tokenize(this.model.tokenizer),
    ];
    const bos = this.bos;
    // As llama-server tokenizes: BOS first when the model asks for one and the template did not write it.
    if (bos !== undefined && tokens[0] !== bos) tokens.unshift(bos);
    return tokens;
  }

  /** BOS when the model asks for it first (and the template may not write it), else undefined. */
  private get bos(): number | undefined {
    const bos = this.model.tokens.bos;
    return this.model.tokens.shouldPrependBosToken && bos !== null ? bos : undefined;
  }

  /** The messages through the model's chat template (once per probe: it is the same for every outcome). */
  private render(messages: readonly ChatMessage[]): NodeLlamaCpp.LlamaText {
    const history: NodeLlamaCpp.ChatHistoryItem[] = messages.map((m) =>
      m.role === "assistant" ? { type: "model", response: [m.content] } : { type: m.role, text: m.content },
    );
    return this.chatWrapper.generateContextState({ chatHistory: history }).contextText;
  }

  /**
   * The prompts' tokens: rendered with the chat template, the part all probes share tokenized once (and
   * refused before anything else when it alone does not fit), each probe's own part with each of its
   * continuations (see PromptTokenizer).
   */
  async prepare(probes: readonly ScoreRequest[], signal: AbortSignal): Promise<PromptTokens> {
    const rendered: (readonly NodeLlamaCpp.LlamaTextValue[])[] = [];
    for (const probe of probes) {
      // Rendering copies the whole text (about 5 ms for a 1 MB state): a long prompt's probes one per turn.
      if (rendered.length > 0 && probe.messages.reduce((n, m) => n + m.content.length, 0) > 2 * PIECE_CHARS) {
        await new Promise((resolve) => setImmediate(resolve));
        signal.throwIfAborted();
      }
      rendered.push(this.render(probe.messages).values);
    }
    return this.tokenizer.tokenize(
      rendered,
      probes.map((p) => p.continuations),
      { tokenizer: this.model.tokenizer, bos: this.bos, contextSize: this.info.contextSize, signal },
    );
  }

  /** One probe: see scoreMany. */
  async score(
    messages: readonly ChatMessage[],
    continuations: readonly string[],
    signal: AbortSignal,
    cacheKey?: string,
  ): Promise<Scored> {
    const [only] = await this.scoreMany([{ messages, continuations }], signal, cacheKey);
    return only as Scored;
  }

  /**
   * For each probe, the natural-log probability of each continuation after its messages: the sum of its
   * tokens' log probabilities, each from the full distribution at its position. The probes share all but
   * their last message: their common prompt is tokenized once and evaluated once, in one sequence (the slot's),
   * then each probe's own tokens after it; within a probe, the outcomes' shared prefix is evaluated once, and
   * each further position once for all outcomes that pass through it. At an outcome's first position the
   * normaliser is left out (it is common to every outcome of the probe, so renormalising over them cancels
   * it); past it, each position's normaliser is summed in float64 over the whole vocabulary. `evaluated`:
   * the tokens each probe evaluated; `cached`: the tokens of its prompt taken from the sequence instead.
   * The sequence is the free one holding the longest prefix of the prompt under the same `cacheKey` (see
   * SequencePool): a state asked about lately is found evaluated.
   */
  async scoreMany(probes: readonly ScoreRequest[], signal: AbortSignal, cacheKey?: string): Promise<Scored[]> {
    const { prefix, tails } = await this.prepare(probes, signal);
    const plans = tails.map((outcomes) => planProbe(prefix, outcomes));
    signal.throwIfAborted();
    const { sequence, reuse } = await this.pool.acquire(plans[0]?.context ?? prefix, cacheKey);
    try {
      // Kept under another key: nothing of it is reused, not even a prefix the prompts share.
      if (!reuse && sequence.nextTokenIndex > 0) await sequence.clearHistory();
      const results: Scored[] = [];
      for (const plan of plans) {
        const scores = plan.pending.map(() => 0);
        const { total, head } = await this.scoreAt(sequence, plan.context, plan.pending, scores, signal, true);
        // The probe's prompt (and its outcomes' shared start) was read from the sequence but for what was
        // evaluated of it; its outcomes' deeper positions are evaluated beyond it.
        results.push({ scores, evaluated: total, cached: plan.context.length - head });
      }
      return results;
    } finally {
      this.pool.release(sequence);
    }
  }

  /**
   * Adds, for every pending outcome, its next token's log probability after `context`, then goes deeper.
   * Returns the tokens evaluated in all, and of `context` itself (the rest of it came from the sequence).
   */
  private async scoreAt(
    sequence: NodeLlamaCpp.LlamaContextSequence,
    context: number[],
    pending: Pending[],
    scores: number[],
    signal: AbortSignal,
    first: boolean,
  ): Promise<{ total: number; head: number }> {
    signal.throwIfAborted();
    const nextTokens = [...new Set(pending.map((p) => p.tail[0] as number))];
    const { next, evaluated } = await evaluateAfter(
      sequence,
      context,
      first
        ? { logits: { filter: { tokens: nextTokens as NodeLlamaCpp.Token[], includeMax: true } } }
        : { logits: true },
    );
    const logits = next.logits;
    if (logits === undefined) throw new Error("the engine returned no logits");
    const normaliser = first ? 0 : logNormaliser(logits);
    let total = evaluated;
    for (const token of nextTokens) {
      const logit = logits.get(token as NodeLlamaCpp.Token);
      if (logit === undefined) throw new Error(`the engine returned no logit for token ${token}`);
      const deeper: Pending[] = [];
      for (const p of pending) {
        if (p.tail[0] !== token) continue;
        scores[p.index] = (scores[p.index] as number) + logit - normaliser;
        if (p.tail.length > 1) deeper.push({ index: p.index, tail: p.tail.slice(1) });
      }
      if (deeper.length > 0) {
        total += (await this.scoreAt(sequence, [...context, token], deeper, scores, signal, false)).total;
      }
    }
    return { total, head: evaluated };
  }

  async close(): Promise<void> {
    await this.llama.dispose(); // disposes the model, its context and its sequences too
  }
}

/**
 * The model's own chat template (GGUF `tokenizer.chat_template`, run as Jinja, as llama-server runs it),
 * else node-llama-cpp's best guess for the model. node-llama-cpp's specialised wrappers may write a BOS
 * token the model does not ask for; the Jinja template writes exactly what the server would.
 */
function chatWrapperOf(lib: typeof NodeLlamaCpp, model: NodeLlamaCpp.LlamaModel): NodeLlamaCpp.ChatWrapper {
  const template = model.fileInfo.metadata.tokenizer.chat_template;
  if (template !== undefined && template !== "") {
    try {
      // A template that thinks (Qwen3 and others) is told not to (`reasoning: false` renders it with
      // enable_thinking false, as the decider's chat_template_kwargs tell a server): the answer then follows
      // a closed think block, where llama-server puts it.
      return new lib.JinjaTemplateChatWrapper({ template, tokenizer: model.tokenizer, reasoning: false });
    } catch {
      // A template node-llama-cpp's Jinja cannot run: fall back to its resolver.
    }
  }
  return lib.resolveChatWrapper(model) ?? new lib.GeneralChatWrapper();
}
