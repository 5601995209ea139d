import fs from "node:fs";
import os from "node:os";

/**
 * A minimal GGUF v3 writer: enough to hand llama.cpp a model that this project generates itself.
 *
 * File layout (all little-endian):
 *   magic "GGUF", version u32 = 3, tensor count u64, metadata count u64,
 *   metadata: key (string), value type u32, value,
 *   tensor infos: name (string), n_dims u32, dims u64[] (innermost first), ggml type u32, offset u64,
 *   padding up to the alignment, then the tensor data, each tensor starting at a multiple of the alignment
 *   (its `offset` counts from the start of the data section).
 * A GGUF string is a u64 byte length followed by UTF-8 bytes, without a terminator.
 */

/** GGUF metadata value types (gguf_type in ggml's gguf.h). */
const ValueType = { UINT32: 4, INT32: 5, FLOAT32: 6, BOOL: 7, STRING: 8, ARRAY: 9 } as const;
type ValueType = (typeof ValueType)[keyof typeof ValueType];

/** Tensor element types (ggml_type); only the two unquantised ones are needed here. */
export type TensorType = "f32" | "f16";
const GGML_TYPE: Record<TensorType, number> = { f32: 0, f16: 1 };
const BYTES_PER_ELEMENT: Record<TensorType, number> = { f32: 4, f16: 2 };

/** The GGUF default, which llama.cpp assumes when `general.alignment` is absent. */
export const GGUF_ALIGNMENT = 32;

interface TensorEntry {
  name: string;
  /** GGUF order: innermost (contiguous) dimension first, e.g. [n_embd, n_vocab] for an embedding table. */
  dims: number[];
  type: TensorType;
  /** Called once, while writing, so that large tensors need not all be in memory at the same time. */
  data: () => Float32Array | Iterable<Uint8Array>;
  offset: number;
  byteLength: number;
}

/** A growable byte buffer; the metadata of a real tokenizer runs to a few MB of small values. */
class ByteSink {
  private buffer = Buffer.alloc(1 << 16);
  length = 0;

  private reserve(n: number): void {
    if (this.length + n <= this.buffer.length) return;
    const bigger = Buffer.alloc(Math.max(this.buffer.length * 2, this.length + n));
    this.buffer.copy(bigger, 0, 0, this.length);
    this.buffer = bigger;
  }

  bytes(): Buffer {
    return this.buffer.subarray(0, this.length);
  }

  push(chunk: Uint8Array): void {
    this.reserve(chunk.length);
    this.buffer.set(chunk, this.length);
    this.length += chunk.length;
  }

  u32(value: number): void {
    this.reserve(4);
    this.length = this.buffer.writeUInt32LE(value, this.length);
  }

  i32(value: number): void {
    this.reserve(4);
    this.length = this.buffer.writeInt32LE(value, this.length);
  }

  f32(value: number): void {
    this.reserve(4);
    this.length = this.buffer.writeFloatLE(value, this.length);
  }

  /**
   * Lengths, counts, dimensions and tensor offsets are u64: a 7B model's offsets pass 2^32 (its data is
   * 15 GB), so both words are written (any safe integer: files up to 8 PiB).
   */
  u64(value: number): void {
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`not a u64 this writer can encode: ${value}`);
    this.reserve(8);
    this.length = this.buffer.writeBigUInt64LE(BigInt(value), this.length);
  }

  string(value: string): void {
    const n = Buffer.byteLength(value, "utf8");
    this.u64(n);
    this.reserve(n);
    this.length += this.buffer.write(value, this.length, "utf8");
  }
}

export class GgufWriter {
  private readonly metadata = new ByteSink();
  private metadataCount = 0;
  private readonly tensors: TensorEntry[] = [];
  private dataLength = 0;

  private key(key: string, type: ValueType): ByteSink {
    this.metadataCount++;
    this.metadata.string(key);
    this.metadata.u32(type);
    return this.metadata;
  }

  uint32(key: string, value: number): this {
    this.key(key, ValueType.UINT32).u32(value);
    return this;
  }

  int32(key: string, value: number): this {
    this.key(key, ValueType.INT32).i32(value);
    return this;
  }

  float32(key: string, value: number): this {
    this.key(key, ValueType.FLOAT32).f32(value);
    return this;
  }

  bool(key: string, value: boolean): this {
    this.key(key, ValueType.BOOL).push(Buffer.from([value ? 1 : 0]));
    return this;
  }

  string(key: string, value: string): this {
    this.key(key, ValueType.STRING).string(value);
    return this;
  }

  /** An array is its element type u32, its length u64, then the elements without their own type tags. */
  private array(key: string, elementType: ValueType, length: number): ByteSink {
    const sink = this.key(key, ValueType.ARRAY);
    sink.u32(elementType);
    sink.u64(length);
    return sink;
  }

  stringArray(key: string, values: readonly string[]): this {
    const sink = this.array(key, ValueType.STRING, values.length);
    for (const value of values) sink.string(value);
    return this;
  }

  int32Array(key: string, values: ArrayLike<number>): this {
    const sink = this.array(key, ValueType.INT32, values.length);
    for (let i = 0; i < values.length; i++) sink.i32(values[i] ?? 0);
    return this;
  }

  float32Array(key: string, values: ArrayLike<number>): this {
    const sink = this.array(key, ValueType.FLOAT32, values.length);
    for (let i = 0; i < values.length; i++) sink.f32(values[i] ?? 0);
    return this;
  }

  /**
   * Adds a tensor. `dims` are in GGUF order (innermost first): a PyTorch [rows, cols] weight is [cols, rows].
   * `data` is row-major in that sense: element (i0, i1) sits at i1 * dims[0] + i0.
   */
  tensor(name: string, dims: number[], type: TensorType, data: () => Float32Array | Iterable<Uint8Array>): this {
    const elements = dims.reduce((a, b) => a * b, 1);
    const byteLength = elements * BYTES_PER_ELEMENT[type];
    const offset = alignUp(this.dataLength, GGUF_ALIGNMENT);
    this.tensors.push({ name, dims, type, data, offset, byteLength });
    this.dataLength = offset + byteLength;
    return this;
  }

  /**
   * Adds a tensor whose bytes are already encoded in `type`, written as `chunks` yields them (a tensor of a
   * real model's size need never be in memory whole: bench/gpu/shaped-model.ts).
   */
  encodedTensor(name: string, dims: number[], type: TensorType, chunks: () => Iterable<Uint8Array>): this {
    return this.tensor(name, dims, type, chunks);
  }

  /**
   * The file's header: magic, counts, metadata and tensor infos, padded to where the tensor data starts
   * (no tensor's data is asked for).
   */
  header(): Buffer {
    const header = new ByteSink();
    header.push(Buffer.from("GGUF", "ascii"));
    header.u32(3);
    header.u64(this.tensors.length);
    header.u64(this.metadataCount);
    header.push(this.metadata.bytes());
    for (const t of this.tensors) {
      header.string(t.name);
      header.u32(t.dims.length);
      for (const d of t.dims) header.u64(d);
      header.u32(GGML_TYPE[t.type]);
      header.u64(t.offset);
    }
    header.push(Buffer.alloc(alignUp(header.length, GGUF_ALIGNMENT) - header.length));
    return header.bytes();
  }

  /** Writes the whole file; returns its size in bytes. */
  writeFile(path: string): number {
    // Tensor data is written straight from typed arrays, which use the machine's byte order.
    if (os.endianness() !== "LE")
      throw new Error("GgufWriter writes little-endian files from a little-endian host only");
    const header = this.header();
    const dataStart = header.length;
    const fd = fs.openSync(path, "w");
    try {
      fs.writeSync(fd, header);
      let written = 0;
      for (const t of this.tensors) {
        if (t.offset > written) fs.writeSync(fd, Buffer.alloc(t.offset - written));
        const values = t.data();
        let bytes = 0;
        if (values instanceof Float32Array) {
          bytes = values.length * BYTES_PER_ELEMENT[t.type];
          fs.writeSync(fd, t.type === "f32" ? values : toF16(values));
        } else {
          for (const chunk of values) bytes += fs.writeSync(fd, chunk);
        }
        if (bytes !== t.byteLength) {
          throw new Error(`tensor ${t.name}: got ${bytes} bytes for dims [${t.dims.join(", ")}] (${t.byteLength})`);
        }
        written = t.offset + t.byteLength;
      }
      // Pad the last tensor too, as gguf-py does; llama.cpp checks only that each tensor fits in the file.
      const end = alignUp(written, GGUF_ALIGNMENT);
      if (end > written) fs.writeSync(fd, Buffer.alloc(end - written));
      return dataStart + end;
    } finally {
      fs.closeSync(fd);
    }
  }
}

function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}

/** IEEE half precision, round to nearest even (Node 20 has no Float16Array). */
export function toF16(values: Float32Array): Uint16Array {
  const out = new Uint16Array(values.length);
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  for (let i = 0; i < bits.length; i++) {
    const x = bits[i] ?? 0;
    const sign = (x >>> 16) & 0x8000;
    const exponent = (x >>> 23) & 0xff;
    let mantissa = x & 0x7fffff;
    let h: number;
    if (exponent === 0xff) {
      h = sign | 0x7c00 | (mantissa ? 0x200 : 0); // inf or NaN
    } else {
      const e = exponent - 127 + 15;
      if (e >= 0x1f) {
        h = sign | 0x7c00; // overflow to infinity
      } else if (e <= 0) {
        if (e < -10) {
          h = sign; // underflow to zero
        } else {
          // subnormal: shift the mantissa (with its implicit leading 1) into place, rounding to nearest even
          mantissa |= 0x800000;
          const shift = 14 - e;
          const half = 1 << (shift - 1);
          const rest = mantissa & ((1 << shift) - 1);
          h = sign | (mantissa >>> shift);
          if (rest > half || (rest === half && (h & 1) === 1)) h++;
        }
      } else {
        h = sign | (e << 10) | (mantissa >>> 13);
        const rest = mantissa & 0x1fff;
        // a carry out of the mantissa correctly bumps the exponent (and can reach infinity)
        if (rest > 0x1000 || (rest === 0x1000 && (h & 1) === 1)) h++;
      }
    }
    out[i] = h;
  }
  return out;
}
