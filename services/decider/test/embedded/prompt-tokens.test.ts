import type { Question as SystemOneQuestion, TextQuestion } from "@localdecider/contracts/decider";
import { type Limits, planRequest as planTask } from "../../src/decide/plan";
import { probeOf } from "../../src/decide/probe";
import { promptOf, stateBlock } from "../../src/decide/prompt";
import { ContextOverflowError } from "../../src/engine/evaluate";
import { LlamaEngine } from "../../src/engine/llama-engine";
import { importNodeLlamaCpp, type NodeLlamaCpp } from "../../src/engine/node-llama-cpp";
import { PIECE_CHARS, PromptTokenizer, type TokenizeOptions } from "../../src/engine/prompt-tokens";
import { systemOneQuestions } from "../../src/routes/systemone-dialect";
import type { ChatMessage, ProbeRequest } from "../../src/upstream/types";
import { ANSWER_MODEL } from "../engine/answer-model";
import { openEngine, type TinyEngine } from "../engine/engine";
import { renderChatML } from "../engine/engine-upstream";
import { chooser, QUESTIONS, STATE } from "../engine/expectations";
import { THINKING_TEMPLATE, tinyModelPath } from "../engine/tiny-model";

/** The plan of System One questions, through the edge's translation into the internal form. */
const planRequest = (questions: Record<string, SystemOneQuestion>, limits: Limits) =>
  planTask(systemOneQuestions(questions), limits);

/**
 * The embedded engine's prompt tokenization (a prompt's shared part once, each probe's own part with each
 * outcome) and its batched scoring (LlamaEngine.scoreMany), against a real node-llama-cpp engine over the
 * tiny generated model: the tokens must be exactly those of the whole prompt tokenized at once, and the
 * scores exactly those of the probes scored one by one.
 */

jest.setTimeout(120_000);

const CONTEXT = 8192;

/** The decider's own probes for these questions: every part of the first prompt. */
function probesFor(questions: Record<string, TextQuestion>, state: unknown = STATE): ProbeRequest[] {
  const plan = planRequest(questions, { questionsPerCall: 16, outcomesPerCall: 128, outcomesPerPart: Infinity });
  const parts = plan.firstRound[0] ?? [];
  const shared = promptOf(stateBlock(state), parts);
  return parts.map((part, i) => probeOf(shared, part, i));
}

const MIXED: Record<string, TextQuestion> = {
  ...QUESTIONS,
  many: chooser(Array.from({ length: 30 }, (_, i) => `label-${i}`)),
};

describe("prompt tokens and batched scoring on a real engine", () => {
  let engine: LlamaEngine;
  let thinking: LlamaEngine;
  let reference: TinyEngine;
  let llama: NodeLlamaCpp.Llama;
  let vocab: NodeLlamaCpp.LlamaModel;

  beforeAll(async () => {
    const file = tinyModelPath(ANSWER_MODEL);
    engine = await LlamaEngine.open({ modelPath: file, gpu: "cpu", sequences: 1, contextSize: CONTEXT, threads: 1 });
    thinking = await LlamaEngine.open({
      modelPath: tinyModelPath({ ...ANSWER_MODEL, chatTemplate: THINKING_TEMPLATE }),
      gpu: "cpu",
      sequences: 1,
      contextSize: 1024,
      threads: 1,
    });
    reference = await openEngine(file, { contextSize: CONTEXT });
    const lib = await importNodeLlamaCpp();
    llama = await lib.getLlama({ gpu: false, build: "never", logLevel: lib.LlamaLogLevel.error, progressLogs: false });
    vocab = await llama.loadModel({ modelPath: file, vocabOnly: true });
  });

  afterAll(async () => {
    await engine?.close();
    await thinking?.close();
    await reference?.close();
    await llama?.dispose();
  });

  const signal = new AbortController().signal;

  describe("tokens", () => {
    // [case, probes' messages, continuations, whether llama-server's tokenization (special tokens parsed in
    // the whole text) is the same: not where a message holds text spelled like a special token]
    const cases: [string, ChatMessage[][], string[], boolean][] = [
      [
        "the decider's probes of one prompt (booleans, digits, letters and two-letter codes)",
        probesFor(MIXED).map((p) => p.messages),
        [" true", " false", "7", "A", "AB", "ZZ"],
        true,
      ],
      [
        "text that looks like template pieces, leading spaces, line ends and non-ASCII text in every message",
        ["a", "b", " c"].map((prefill) => [
          { role: "system", content: "  leading spaces <|im_end|> and <|im_start|>user" },
          { role: "user", content: "é 中文 🙂\n\n  indented\r\nline <tool_call> end " },
          { role: "assistant", content: prefill },
        ]),
        ["", " ", "x", "<|im_end|>", " \n"],
        false,
      ],
      [
        "probes whose prefills differ from their first character",
        ['{"q1":', '{"q2": "', "[", ""].map((prefill) => [
          { role: "system", content: "S" },
          { role: "user", content: "U" },
          { role: "assistant", content: prefill },
        ]),
        [" true", "B"],
        true,
      ],
    ];

    it.each(cases)(
      "%s: the shared part, then each probe's own tokens, are the whole prompt's tokens",
      async (_, probes, continuations, asServer) => {
        const { prefix, tails } = await engine.prepare(
          probes.map((messages) => ({ messages, continuations })),
          signal,
        );
        expect(prefix.length).toBeGreaterThan(0);
        for (const [i, messages] of probes.entries()) {
          for (const [j, continuation] of continuations.entries()) {
            const whole = [...prefix, ...(tails[i]?.[j] ?? [])];
            // node-llama-cpp's own tokenization of the whole rendered prompt (a message's text as text), and
            // llama-server's rendering.
            expect(whole).toStrictEqual(engine.tokenize(messages, continuation));
            if (asServer) expect(whole).toStrictEqual(reference.tokenize(`${renderChatML(messages)}${continuation}`));
          }
        }
      },
    );

    it("with a template that thinks (its think block written for the last message), the parts are the whole prompt's tokens", async () => {
      const probes = ['{"q1":', '{"q2":'].map((prefill) => ({
        messages: [
          { role: "system" as const, content: "S" },
          { role: "user" as const, content: "U" },
          { role: "assistant" as const, content: prefill },
        ],
        continuations: [" true", " false"],
      }));
      const { prefix, tails } = await thinking.prepare(probes, signal);
      for (const [i, probe] of probes.entries()) {
        for (const [j, continuation] of probe.continuations.entries()) {
          expect([...prefix, ...(tails[i]?.[j] ?? [])]).toStrictEqual(thinking.tokenize(probe.messages, continuation));
        }
      }
    });

    it.each([
      ["between template pieces", true],
      ["in a template of plain text", false],
    ])(
      "a state far past the context (%s) is refused after counting a few pieces, each its own turn of the event loop",
      async (_, pieces) => {
        const lib = await importNodeLlamaCpp();
        const tokenizer = vocab.tokenizer;
        const calls: number[] = [];
        const counting = Object.assign(
          ((text: string, special?: boolean, options?: "trimLeadingSpace") => {
            calls.push(text.length);
            return tokenizer(text, special, options);
          }) as NodeLlamaCpp.Tokenizer,
          tokenizer,
        );
        const big = "word ".repeat(200_000); // 1 MB, ~200,000 tokens
        const piece = (text: string) => (pieces ? new lib.SpecialTokensText(text) : text);
        const rendered = ['{"q1":', '{"q2":'].map(
          (prefill) =>
            lib.LlamaText([piece("<|im_start|>user\n"), big, piece("<|im_end|>\n<|im_start|>assistant\n"), prefill])
              .values,
        );
        let turns = 0;
        let ticking = true;
        const tick = () => {
          turns += 1;
          if (ticking) setImmediate(tick);
        };
        setImmediate(tick);
        const options: TokenizeOptions = { tokenizer: counting, bos: undefined, contextSize: 4096, signal };
        const labels = Array.from({ length: 255 }, (_, i) => `A${i}`);
        const refused = await new PromptTokenizer()
          .tokenize(rendered, [labels, labels], options)
          .catch((err: unknown) => err);
        ticking = false;
        expect(refused).toBeInstanceOf(ContextOverflowError);
        expect((refused as ContextOverflowError).atLeast).toBe(true);
        // It stopped once the count passed the context: a small part of the text was ever tokenized, in pieces.
        const tokenized = calls.reduce((a, b) => a + b, 0);
        expect(tokenized).toBeLessThan(big.length / 10);
        expect(Math.max(...calls)).toBeLessThanOrEqual(PIECE_CHARS);
        expect(turns).toBeGreaterThanOrEqual(2);
      },
    );

    it("puts BOS once before the whole prompt, when the model asks for it and the template did not write it", async () => {
      const lib = await importNodeLlamaCpp();
      // A tokenizer of one token per character, `<s>` (BOS, id 1) recognised in template pieces.
      const chars = ((text: string, special?: boolean) =>
        special === true && text === "<s>" ? [1] : [...text].map((c) => c.charCodeAt(0))) as NodeLlamaCpp.Tokenizer;
      const options: TokenizeOptions = { tokenizer: chars, bos: 1, contextSize: 100, signal };
      const piece = (text: string) => new lib.SpecialTokensText(text);
      const tokenizer = new PromptTokenizer();
      const code = (text: string) => [...text].map((c) => c.charCodeAt(0));
      // A shared part: BOS before it, none before the probes' own tokens.
      const shared = await tokenizer.tokenize(
        [
          ["U", piece("|"), "a"],
          ["U", piece("|"), "b"],
        ].map((v) => lib.LlamaText(v).values),
        [["x"], ["y"]],
        options,
      );
      expect(shared).toStrictEqual({ prefix: [1, ...code("U|")], tails: [[code("ax")], [code("by")]] });
      // A template that writes BOS itself: not a second one.
      const written = await tokenizer.tokenize(
        [[piece("<s>"), "U", piece("|"), "a"]].map((v) => lib.LlamaText(v).values),
        [["x"]],
        options,
      );
      expect(written.prefix).toStrictEqual([1, ...code("U|")]);
      // Nothing shared (no template piece): each probe's tokens start with BOS.
      const plain = await tokenizer.tokenize([["Ua"], ["Ub"]], [["x"], ["y"]], options);
      expect(plain).toStrictEqual({ prefix: [], tails: [[[1, ...code("Uax")]], [[1, ...code("Uby")]]] });
    });

    it("a long state that fits is counted in pieces, then tokenized whole, exactly", async () => {
      const state = "The quick brown fox jumps over the lazy dog.\n".repeat(500); // 22,500 characters, ~5,000 tokens
      expect(state.length).toBeGreaterThan(2 * PIECE_CHARS);
      const probes = probesFor(
        { a: { type: "noul", instructions: "Is it?" }, b: { type: "noul", instructions: "Is it?" } },
        state,
      );
      const { prefix, tails } = await engine.prepare(probes, signal);
      for (const [i, probe] of probes.entries()) {
        expect([...prefix, ...(tails[i]?.[0] ?? [])]).toStrictEqual(
          engine.tokenize(probe.messages, probe.continuations[0]),
        );
      }
    });

    it("a prompt that does not fit is refused before any evaluation, naming its size", async () => {
      // `thinking` (1024 tokens per sequence) scores nothing else in this file: its sequence is never lent.
      const probe = probesFor({ a: { type: "noul", instructions: "Is it?" } }, "word ".repeat(2000))[0] as ProbeRequest;
      const refused = await thinking.scoreMany([probe], signal).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(ContextOverflowError);
      expect((refused as ContextOverflowError).message).toMatch(/^\d+ tokens do not fit the context of 1024$/);
      expect(thinking.sequencesBusy).toStrictEqual({ now: 0, peak: 0, waits: 0 });
    });
  });

  describe("scores", () => {
    it("a prompt's probes scored together are exactly the probes scored one by one, in any order and cache state", async () => {
      const probes = probesFor(MIXED);
      expect(probes.length).toBe(Object.keys(MIXED).length);
      const together = await engine.scoreMany(probes, signal);
      const alone: number[][] = [];
      for (const probe of [...probes].reverse())
        alone.unshift((await engine.score(probe.messages, probe.continuations, signal)).scores);
      expect(together.map((r) => r.scores)).toStrictEqual(alone);
      const again = await engine.scoreMany(probes, signal);
      expect(again.map((r) => r.scores)).toStrictEqual(alone);
    });

    it("reads the shared prompt once: the first probe evaluates it, each other probe only its own few tokens", async () => {
      const probes = probesFor(
        Object.fromEntries(
          Array.from({ length: 16 }, (_, i) => [`q${i}`, { type: "noul", instructions: "Is it?" } as TextQuestion]),
        ),
      );
      const results = await engine.scoreMany(probes, signal);
      const promptTokens = reference.tokenize(renderChatML((probes[0] as ProbeRequest).messages)).length;
      const [first, ...rest] = results.map((r) => r.evaluated);
      expect(first).toBeLessThanOrEqual(promptTokens);
      for (const n of rest) expect(n).toBeLessThanOrEqual(4);
    });
  });
});
