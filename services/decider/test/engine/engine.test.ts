import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { openEngine, serverTokenText, type TinyEngine } from "./engine";
import { DEFAULT_BIAS, DEFAULT_TINY_MODEL, QWEN_TOKENS, tinyModelPath, writeTinyModel } from "./tiny-model";

const { imStart, imEnd } = QWEN_TOKENS;

function chat(user: string): string {
  return (
    "<|im_start|>system\nReply with one JSON object.<|im_end|>\n" +
    `<|im_start|>user\n${user}<|im_end|>\n<|im_start|>assistant\n`
  );
}

function maxAbsDiff(a: Float64Array, b: Float64Array): number {
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs((a[i] ?? 0) - (b[i] ?? 0)));
  return max;
}

let engine: TinyEngine;
/** Token id -> designed offset, for the default bias table. */
const biased = new Map<number, number>();

beforeAll(async () => {
  engine = await openEngine(tinyModelPath(DEFAULT_TINY_MODEL));
  for (const [text, offset] of Object.entries(DEFAULT_BIAS)) {
    const [id, ...rest] = engine.tokenize(text);
    if (id === undefined || rest.length > 0) throw new Error(`${JSON.stringify(text)} is not one token`);
    biased.set(id, offset);
  }
}, 60_000);

afterAll(async () => {
  await engine?.close();
});

describe("the tiny model file", () => {
  test("when asked twice for the same options, the cached file is reused", () => {
    const file = tinyModelPath(DEFAULT_TINY_MODEL);
    expect(tinyModelPath({ seed: 1, bias: { ...DEFAULT_BIAS } })).toBe(file);
    expect(fs.statSync(file).size).toBeGreaterThan(50_000_000);
  });

  test("when a bias text is not a single token, writing the model fails and names it", () => {
    const file = path.join(os.tmpdir(), `tiny-model-test-${process.pid}.gguf`);
    expect(() => writeTinyModel(file, { seed: 1, bias: { " not one token": 5 } })).toThrow(
      'bias text " not one token" is not a single token of the vocabulary',
    );
    expect(fs.existsSync(file)).toBe(false);
  });
});

describe("tokens", () => {
  test("a rendered ChatML prompt keeps its special tokens as single ids", () => {
    const [assistant] = engine.tokenize("assistant");
    const tokens = engine.tokenize(chat("Is it a bug fix?"));
    expect(tokens[0]).toBe(imStart);
    expect(tokens.filter((t) => t === imStart)).toHaveLength(3);
    expect(tokens.filter((t) => t === imEnd)).toHaveLength(2);
    expect(tokens.slice(-3)).toEqual([imStart, assistant, 198]);
    expect(engine.tokenize("<|im_start|><|im_end|><|endoftext|>")).toEqual([151644, 151645, 151643]);
    expect(engine.tokenize(' true false"A')).toEqual([830, 895, 29133]);
  });

  test("pieces are what llama-server reports: bytes, and text without a trailing partial character", () => {
    expect(engine.vocabSize).toBe(151936);
    expect(engine.piece(830)).toEqual({ text: " true", bytes: [32, 116, 114, 117, 101] });
    expect(engine.piece(198)).toEqual({ text: "\n", bytes: [10] });
    // control and padding tokens print nothing (llama-server's default, special = false)
    expect(engine.piece(imEnd)).toEqual({ text: "", bytes: [] });
    expect(engine.piece(151674)).toEqual({ text: "", bytes: [] });
    // partial UTF-8, as recorded from llama-server b10573 (shared fixtures, probes/b_tiny.json)
    expect(engine.piece(27209)).toEqual({ text: "", bytes: [229, 149] });
    expect(engine.piece(148827)).toEqual({ text: "", bytes: [240, 147, 136] });
  });

  test("a piece's text drops only a trailing incomplete character and replaces other invalid bytes", () => {
    expect(serverTokenText([0x20, 0xe4, 0xb8])).toBe(" ");
    expect(serverTokenText([0xe4, 0xb8, 0xad])).toBe("中");
    expect(serverTokenText([0xb8, 0xad])).toBe("\uFFFD\uFFFD");
    expect(serverTokenText([0xad, 0x41, 0xe4])).toBe("\uFFFDA");
  });
});

describe("next-token distributions", () => {
  test("cover the whole vocabulary and sum to 1", async () => {
    const logprobs = await engine.nextLogprobs(engine.tokenize(chat("Is it a bug fix? (true/false)")));
    expect(logprobs).toHaveLength(engine.vocabSize);
    let sum = 0;
    for (const lp of logprobs) {
      if (!Number.isFinite(lp)) throw new Error(`non-finite logprob ${lp}`);
      sum += Math.exp(lp);
    }
    expect(Math.abs(sum - 1)).toBeLessThan(1e-6);
  });

  test("the biased tokens lead, each raised by about its offset", async () => {
    const logprobs = await engine.nextLogprobs(engine.tokenize(chat("Which area? A=api, B=db, C=docs")));
    const order = [...logprobs.keys()].sort((a, b) => (logprobs[b] ?? 0) - (logprobs[a] ?? 0));
    expect(order.slice(0, 20).every((id) => biased.has(id))).toBe(true);

    let mass = 0;
    for (const id of biased.keys()) mass += Math.exp(logprobs[id] ?? 0);
    expect(mass).toBeGreaterThan(0.8);

    // Relative to the mean unbiased logprob, a biased token sits at its offset plus the random part.
    let mean = 0;
    let n = 0;
    for (let id = 0; id < logprobs.length; id++) {
      if (biased.has(id)) continue;
      mean += logprobs[id] ?? 0;
      n++;
    }
    mean /= n;
    let residual = 0;
    for (const [id, offset] of biased) residual += (logprobs[id] ?? 0) - mean - offset;
    expect(Math.abs(residual / biased.size)).toBeLessThan(0.75);
  });

  test("two prompts that end alike still rank the biased tokens differently", async () => {
    const centred = async (prompt: string) => {
      const logprobs = await engine.nextLogprobs(engine.tokenize(chat(prompt)));
      const values = [...biased.keys()].map((id) => logprobs[id] ?? 0);
      const mean = values.reduce((a, b) => a + b, 0) / values.length;
      return values.map((v) => v - mean);
    };
    const a = await centred("Is it a bug fix? (true/false)");
    const b = await centred("How risky is this change? 0=trivial 1=low 2=medium 3=high");
    const largest = Math.max(...a.map((v, i) => Math.abs(v - (b[i] ?? 0))));
    expect(largest).toBeGreaterThan(0.5);
  });

  test("reusing an evaluated prefix gives exactly what a fresh evaluation gives", async () => {
    const prompt = engine.tokenize(chat(`Diff:\n${"- old line\n+ new line\n".repeat(20)}Is it a bug fix?`));
    const yes = engine.tokenize('{"q1": true');
    const no = engine.tokenize('{"q1": false');

    await engine.nextLogprobs([QWEN_TOKENS.endOfText]); // nothing in common with what follows
    const fresh = await engine.nextLogprobs([...prompt, ...yes]);
    await engine.nextLogprobs(prompt);
    await engine.nextLogprobs([...prompt, ...no]);
    const reused = await engine.nextLogprobs([...prompt, ...yes]); // keeps the prompt, drops `no`
    const again = await engine.nextLogprobs([...prompt, ...yes]); // everything already evaluated

    expect(maxAbsDiff(fresh, reused)).toBeLessThanOrEqual(1e-9);
    expect(maxAbsDiff(fresh, again)).toBeLessThanOrEqual(1e-9);
  });

  test("calls made at once are served one after another, each with its own answer", async () => {
    const prompt = engine.tokenize(chat("Is it a bug fix?"));
    const yes = [...prompt, ...engine.tokenize('{"q1": true')];
    const no = [...prompt, ...engine.tokenize('{"q1": false')];
    const [first, other, second] = await Promise.all([
      engine.nextLogprobs(yes),
      engine.nextLogprobs(no),
      engine.nextLogprobs(yes),
    ]);
    if (first === undefined || other === undefined || second === undefined) throw new Error("missing result");
    expect(maxAbsDiff(first, second)).toBeLessThanOrEqual(1e-9);
    expect(maxAbsDiff(first, other)).toBeGreaterThan(0.1);
  });
});
