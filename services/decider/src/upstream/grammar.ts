import type { Reading } from "./types";

/**
 * A GBNF grammar whose first token can only begin one of the reading's outcome texts (after JSON
 * whitespace where allowed): the sampled token is then whole text, and llama-server reports its logprobs.
 */
export function outcomesGrammar(reading: Reading): string {
  const literals = reading.literals.map((l) => JSON.stringify(l)).join(" | ");
  return `root ::= ${reading.whitespaceFirst ? "[ \\t\\n\\r]* " : ""}(${literals}) [^\\x00]*`;
}
