import type { TextQuestion } from "@localdecider/contracts/decider";
import type { ProbeOptions, ProbeRequest, ProbeResult, Reading, Upstream } from "../../src/upstream/types";
import { FakeUpstream } from "../fake-upstream/server";
import { sum } from "../helpers";
import type { TinyEngine } from "./engine";
import { topTokens } from "./engine-upstream";

/**
 * What the decider must answer, computed from the engine itself: the engine suites compare every answer
 * with these.
 */
const TOP = 20;

/** What can follow a complete value in the one-key object: how far the expectation looks past it. */
const AFTER = ["}", ",", " ", "\n"];
const WHITESPACE = ["", " ", "  ", "\n", "\t"];

/**
 * Independent of the read-out's own code: a token counts for an outcome when it is a prefix of one of the
 * outcome's valid continuations (or holds one whole and goes on), and of no other outcome's.
 */
export function outcomeOf(text: string, reading: Reading): number | undefined {
  if (text === "") return undefined;
  const matches = reading.literals.flatMap((literal, i) => {
    const starts = reading.whitespaceFirst ? WHITESPACE : [""];
    const continuations = starts.flatMap((w) => AFTER.map((after) => `${w}${literal}${after}`));
    return continuations.some((c) => c.startsWith(text) || text.startsWith(c)) ? [i] : [];
  });
  return matches.length === 1 ? matches[0] : undefined;
}

export interface Expected {
  /** The engine's distribution over every vocabulary token, summed per outcome and renormalised. */
  exact: number[];
  /** The same over the top 20 only, an absent outcome at half the 20th's probability (the documented rule). */
  reported: number[];
  absent: number;
}

/** Every vocabulary token that can begin exactly one outcome of a reading, with that outcome: [id, i]. */
const counting = new Map<string, [number, number][]>();
export function countingTokens(engine: TinyEngine, reading: Reading): [number, number][] {
  const key = JSON.stringify(reading);
  let list = counting.get(key);
  if (list === undefined) {
    list = [];
    for (let id = 0; id < engine.vocabSize; id++) {
      const i = outcomeOf(engine.piece(id).text, reading);
      if (i !== undefined) list.push([id, i]);
    }
    counting.set(key, list);
  }
  return list;
}

export async function expected(engine: TinyEngine, prompt: string, reading: Reading): Promise<Expected> {
  const logprobs = await engine.nextLogprobs(engine.tokenize(prompt));
  const exact = reading.literals.map(() => 0);
  for (const [id, i] of countingTokens(engine, reading))
    exact[i] = (exact[i] as number) + Math.exp(logprobs[id] as number);
  const top = topTokens(logprobs, TOP);
  const reported = reading.literals.map(() => 0);
  for (const id of top) {
    const i = outcomeOf(engine.piece(id).text, reading);
    if (i !== undefined) reported[i] = (reported[i] as number) + Math.exp(logprobs[id] as number);
  }
  const floor = Math.exp(logprobs[top[TOP - 1] as number] as number) / 2;
  const absent = reported.filter((w) => w === 0).length;
  const filled = reported.map((w) => (w === 0 ? floor : w));
  const norm = (ws: number[]) => ws.map((w) => w / sum(ws));
  return { exact: norm(exact), reported: norm(filled), absent };
}

/** Records every probe the decider sends and what came back, around the real upstream adapter. */
export class RecordingUpstream implements Upstream {
  probes: ProbeRequest[] = [];
  /** The token each probe's server emitted (greedy), by probe. */
  emitted = new Map<ProbeRequest, string | undefined>();
  constructor(private readonly inner: Upstream) {}
  /** The slot each probe named, by probe. */
  slots = new Map<ProbeRequest, number | undefined>();
  get outcomesPerPart(): number | undefined {
    return this.inner.outcomesPerPart;
  }
  get prefixCache(): Upstream["prefixCache"] {
    return this.inner.prefixCache;
  }
  async probe(req: ProbeRequest, options: ProbeOptions): Promise<ProbeResult> {
    this.probes.push(req);
    this.slots.set(req, options.slot);
    const result = await this.inner.probe(req, options);
    this.emitted.set(req, result.scores === undefined ? result.emitted?.token : undefined);
    return result;
  }
  /** Calls that carried several probes (probeMany), each with its probes' count. */
  packed: number[] = [];
  /** The inner upstream's probeMany, recorded probe by probe, when it has one. */
  get probeMany(): Upstream["probeMany"] {
    const many = this.inner.probeMany?.bind(this.inner);
    if (many === undefined) return undefined;
    return async (requests, options) => {
      this.packed.push(requests.length);
      for (const req of requests) {
        this.probes.push(req);
        this.slots.set(req, options.slot);
      }
      const results = await many(requests, options);
      for (const [i, result] of results.entries()) {
        const req = requests[i] as ProbeRequest;
        this.emitted.set(req, result.scores === undefined ? result.emitted?.token : undefined);
      }
      return results;
    };
  }
}

/** The question name a probe asks about (from its prefill and the prompt's headers). */
export const probedName = (probe: ProbeRequest) =>
  FakeUpstream.probed(probe as unknown as Record<string, unknown>).question.name;

export const chooser = (labels: string[]): TextQuestion => ({
  type: "choice",
  instructions: "Which one fits best?",
  criteria: Object.fromEntries(labels.map((l) => [l, `the ${l} option`])),
});

export const QUESTIONS: Record<string, TextQuestion> = {
  bug: {
    type: "noul",
    instructions: "Is this a bug fix?",
    criteria: { true: "it fixes a defect", false: "anything else" },
  },
  breaking: { type: "noul", instructions: "Does it break the API?" },
  risk: { type: "score", instructions: "How risky?", criteria: ["none", "low", "medium", "high"] },
  size: {
    type: "score",
    instructions: "How large, 0 to 9?",
    criteria: Array.from({ length: 10 }, (_, i) => `size ${i}`),
  },
  area: chooser(["api", "db", "docs"]),
};

export const STATE = { diff: "--- a/src/handler.ts\n+++ b/src/handler.ts\n-  if (user) {\n+  if (user !== null) {" };
