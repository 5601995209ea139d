import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { tokenizerVersion } from "../src/engine/demo/tiny-model";
import { type Shape, writeShapedModel } from "./gpu/shaped-model";

/**
 * A random-weight qwen2 GGUF of a chosen shape for the in-process benchmarks (bench/gpu/shaped-model.ts writes
 * it: the real Qwen2.5 tokenizer, F16 matrices, every outcome of the workload in the top 20), cached under the
 * OS temp folder: it costs per token what a real model of that shape costs, and its answers mean nothing.
 */
export type ModelShape = Omit<Shape, "vocabRows"> & { contextLength: number };

/** Bump when the construction changes, so that cached files are not reused. */
const FORMAT_VERSION = 2;
const VOCAB_ROWS = 151936;

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
    writeShapedModel(temp, { ...shape, vocabRows: VOCAB_ROWS });
    fs.renameSync(temp, file);
  } finally {
    fs.rmSync(temp, { force: true });
  }
  return file;
}
