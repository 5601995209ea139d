import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { GgufWriter } from "../src/engine/demo/gguf-writer";
import { CHATML_TEMPLATE, loadQwen25Vocab, QWEN_TOKENS, tokenizerVersion } from "../src/engine/demo/tiny-model";

/**
 * A random-weight qwen2 GGUF of a chosen shape, with the real Qwen2.5 tokenizer and ChatML: it costs per
 * token what a real model of that shape costs, and its answers mean nothing. For benchmarks only (the tests'
 * tiny model, test/engine/tiny-model.ts, is built to give designed answers; this one only to take time).
 * Every tensor is a slice of one pool of random values (at an offset drawn from its name), so even large
 * shapes write in seconds; the output layer is tied to the embeddings, as in Qwen2.5 up to 3B.
 */
export interface ModelShape {
  embedding: number;
  layers: number;
  heads: number;
  kvHeads: number;
  feedForward: number;
  contextLength: number;
}

/** Bump when the construction changes, so that cached files are not reused. */
const FORMAT_VERSION = 1;
const POOL_SIZE = 1 << 22;
const VOCAB_ROWS = 151936;

function pool(): Float32Array {
  // Uniform in [-1, 1): mulberry32, as the tiny model's weights.
  let state = 0x2545f491;
  const out = new Float32Array(POOL_SIZE);
  const imul = Math.imul;
  for (let i = 0; i < POOL_SIZE; i++) {
    state = (state + 0x6d2b79f5) | 0;
    let t = imul(state ^ (state >>> 15), state | 1);
    t ^= t + imul(t ^ (t >>> 7), t | 61);
    out[i] = (((t ^ (t >>> 14)) >>> 0) - 2147483648) / 2147483648;
  }
  return out;
}

/** `length` values from the pool, starting at an offset drawn from `name`, scaled to a standard deviation of `std`. */
function slice(values: Float32Array, name: string, length: number, std: number): Float32Array {
  const start = crypto.createHash("sha256").update(name).digest().readUInt32LE(0) % POOL_SIZE;
  const out = new Float32Array(length);
  const scale = std * Math.sqrt(3); // uniform [-1, 1) has std 1/sqrt(3)
  for (let i = 0; i < length; ) {
    const from = (start + i) % POOL_SIZE;
    const n = Math.min(length - i, POOL_SIZE - from);
    out.set(values.subarray(from, from + n), i);
    i += n;
  }
  for (let i = 0; i < length; i++) out[i] = (out[i] as number) * scale;
  return out;
}

export function writeShapedModel(file: string, shape: ModelShape): number {
  const { embedding: D, layers, heads, kvHeads, feedForward: FF } = shape;
  const kvDim = kvHeads * (D / heads);
  const vocab = loadQwen25Vocab();
  const values = pool();
  const gguf = new GgufWriter()
    .string("general.architecture", "qwen2")
    .string("general.name", `random-qwen2-${D}x${layers}`)
    .uint32("general.file_type", 1)
    .uint32("general.alignment", 32)
    .uint32("qwen2.context_length", shape.contextLength)
    .uint32("qwen2.embedding_length", D)
    .uint32("qwen2.block_count", layers)
    .uint32("qwen2.feed_forward_length", FF)
    .uint32("qwen2.attention.head_count", heads)
    .uint32("qwen2.attention.head_count_kv", kvHeads)
    .float32("qwen2.rope.freq_base", 1e6)
    .float32("qwen2.attention.layer_norm_rms_epsilon", 1e-6)
    .string("tokenizer.ggml.model", "gpt2")
    .string("tokenizer.ggml.pre", "qwen2")
    .stringArray("tokenizer.ggml.tokens", vocab.tokens)
    .int32Array("tokenizer.ggml.token_type", vocab.types)
    .stringArray("tokenizer.ggml.merges", vocab.merges)
    .uint32("tokenizer.ggml.eos_token_id", QWEN_TOKENS.imEnd)
    .uint32("tokenizer.ggml.padding_token_id", QWEN_TOKENS.endOfText)
    .uint32("tokenizer.ggml.bos_token_id", QWEN_TOKENS.endOfText)
    .bool("tokenizer.ggml.add_bos_token", false)
    .string("tokenizer.chat_template", CHATML_TEMPLATE);
  const ones = (n: number) => new Float32Array(n).fill(1);
  gguf.tensor("token_embd.weight", [D, VOCAB_ROWS], "f16", () => slice(values, "token_embd", D * VOCAB_ROWS, 1));
  for (let l = 0; l < layers; l++) {
    const t = (name: string, dims: number[], std: number) =>
      gguf.tensor(`blk.${l}.${name}`, dims, dims.length === 1 ? "f32" : "f16", () =>
        slice(
          values,
          `blk.${l}.${name}`,
          dims.reduce((a, b) => a * b, 1),
          std,
        ),
      );
    gguf.tensor(`blk.${l}.attn_norm.weight`, [D], "f32", () => ones(D));
    t("attn_q.weight", [D, D], 1 / Math.sqrt(D));
    t("attn_q.bias", [D], 0.1);
    t("attn_k.weight", [D, kvDim], 1 / Math.sqrt(D));
    t("attn_k.bias", [kvDim], 0.1);
    t("attn_v.weight", [D, kvDim], 1 / Math.sqrt(D));
    t("attn_v.bias", [kvDim], 0.1);
    t("attn_output.weight", [D, D], 1 / Math.sqrt(D));
    gguf.tensor(`blk.${l}.ffn_norm.weight`, [D], "f32", () => ones(D));
    t("ffn_gate.weight", [D, FF], 1 / Math.sqrt(D));
    t("ffn_up.weight", [D, FF], 1 / Math.sqrt(D));
    t("ffn_down.weight", [FF, D], 1 / Math.sqrt(FF));
  }
  gguf.tensor("output_norm.weight", [D], "f32", () => ones(D));
  return gguf.writeFile(file);
}

/** The model of this shape under the OS temp folder, written only if absent. */
export function shapedModelPath(shape: ModelShape): string {
  const key = crypto
    .createHash("sha256")
    .update(JSON.stringify({ format: FORMAT_VERSION, tokenizer: tokenizerVersion(), shape }))
    .digest("hex")
    .slice(0, 16);
  const dir = path.join(os.tmpdir(), "localdecider-bench-models");
  const file = path.join(dir, `random-qwen2-${shape.embedding}x${shape.layers}-${key}.gguf`);
  if (fs.existsSync(file)) return file;
  fs.mkdirSync(dir, { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  try {
    writeShapedModel(temp, shape);
    fs.renameSync(temp, file);
  } finally {
    fs.rmSync(temp, { force: true });
  }
  return file;
}
