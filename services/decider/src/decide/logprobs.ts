import type { OutcomeCode } from "./plan";

export interface TopLogprob {
  token: string;
  logprob: number;
}

/** One emitted token with the alternatives the backend reported at its position. */
export interface TokenLogprob extends TopLogprob {
  top: TopLogprob[];
}

/**
 * Where each answer's value starts in the emitted JSON text: the first character of the value itself
 * (after the opening quote for a string). The last occurrence of a key wins, as in JSON.parse.
 */
export function valueOffset(text: string, key: string): number | undefined {
  const pattern = new RegExp(`"${key}"\\s*:\\s*`, "g");
  let offset: number | undefined;
  for (const match of text.matchAll(pattern)) offset = match.index + match[0].length;
  if (offset === undefined || offset >= text.length) return undefined;
  return text[offset] === '"' ? offset + 1 : offset;
}

const WORD_CHAR = /[A-Za-z0-9_.]/;

/**
 * The code a token stands for at an answer's position, if any. `rest` is the token with whatever it
 * shares with the emitted token before the value (a leading space, the opening quote) removed. A token
 * matches a code it is a prefix of (a long code spans tokens) or that it starts with, followed by a
 * delimiter (`A"`, `true,`); codes have distinct first characters, so at most one code matches.
 */
export function codeOfToken(rest: string, codes: readonly string[]): string | undefined {
  if (rest === "") return undefined;
  return codes.find((code) => {
    if (code.startsWith(rest)) return true;
    if (!rest.startsWith(code)) return false;
    const next = rest[code.length];
    return next === undefined || !WORD_CHAR.test(next);
  });
}

/**
 * The distribution over `codes` at the value that starts at `offset` in the text the tokens spell:
 * the probabilities of the alternatives at that token, summed per code and renormalised over the codes
 * only (junk tokens drop out). Undefined when the position is not found or no code appears at all.
 */
export function codeDistribution(
  tokens: readonly TokenLogprob[],
  offset: number,
  codes: readonly OutcomeCode[],
): number[] | undefined {
  let start = 0;
  const found = tokens.find((t) => {
    const end = start + t.token.length;
    if (offset < end) return true;
    start = end;
    return false;
  });
  if (found === undefined) return undefined;
  const prefix = found.token.slice(0, offset - start);
  const strip = (token: string) =>
    token.startsWith(prefix) && prefix !== "" ? token.slice(prefix.length) : token.replace(/^\s*"?\s*/, "");
  const names = codes.map(String);
  const weights = names.map(() => 0);
  const seen = new Set<string>();
  for (const alt of [...found.top, { token: found.token, logprob: found.logprob }]) {
    if (seen.has(alt.token)) continue;
    seen.add(alt.token);
    const code = codeOfToken(strip(alt.token), names);
    if (code === undefined) continue;
    const i = names.indexOf(code);
    weights[i] = (weights[i] as number) + Math.exp(alt.logprob);
  }
  const total = weights.reduce((a, b) => a + b, 0);
  if (!(total > 0)) return undefined;
  return weights.map((w) => w / total);
}
