import type { TextQuestion } from "@localdecider/contracts/decider";
import type { ProbeRequest } from "../../src/upstream/types";
import type { TinyEngine } from "../engine/engine";
import { renderChatML } from "../engine/engine-upstream";
import { sum } from "../helpers";

/**
 * What the embedded engine must answer for one probe, computed independently of its code: the prompt
 * rendered as llama-server renders it, each outcome's tokens after the part all outcomes share, and each
 * token's probability from the engine's full distribution (float64 log-softmax over the whole vocabulary),
 * multiplied along the outcome and renormalised over the outcomes.
 */
export async function exactDistribution(engine: TinyEngine, probe: ProbeRequest): Promise<number[]> {
  const prompt = renderChatML(probe.messages);
  const full = probe.continuations.map((c) => engine.tokenize(prompt + c));
  let shared = Math.min(...full.map((t) => t.length)) - 1;
  const first = full[0] as number[];
  for (const tokens of full) {
    let i = 0;
    while (i < shared && tokens[i] === first[i]) i++;
    shared = i;
  }
  const at = new Map<string, Float64Array>();
  const logprobsAfter = async (prefix: number[]) => {
    const key = prefix.slice(shared).join(",");
    let lp = at.get(key);
    if (lp === undefined) {
      lp = await engine.nextLogprobs(prefix);
      at.set(key, lp);
    }
    return lp;
  };
  const logs: number[] = [];
  for (const tokens of full) {
    let total = 0;
    for (let k = shared; k < tokens.length; k++)
      total += (await logprobsAfter(tokens.slice(0, k)))[tokens[k] as number] as number;
    logs.push(total);
  }
  const max = Math.max(...logs);
  const weights = logs.map((l) => Math.exp(l - max));
  return weights.map((w) => w / sum(weights));
}

/** An answer's distribution in its question's outcome order (noul: true, false). */
export function distributionOf(question: TextQuestion, answer: Record<string, unknown>): number[] {
  if (question.type === "noul") return [answer.noul as number, 1 - (answer.noul as number)];
  const probabilities = answer.probabilities as Record<string, number>;
  const keys = question.type === "choice" ? Object.keys(question.criteria) : question.criteria.map((_, i) => String(i));
  return keys.map((k) => probabilities[k] as number);
}
