import { argmax } from "./math";

/**
 * One distribution over all labels of a choice that was split into chunks.
 *
 * Each chunk call gives p(label | chunk). The final call, among the chunks' leaders (each chunk's most
 * probable label), gives p_final(leader). A label's probability is scaled from its chunk's leader:
 * p(label) ∝ p(label | chunk) * p_final(leader) / p(leader | chunk), i.e. the chunk's leader gets exactly
 * its final-round weight and the others keep their ratio to it. The result sums to 1, and its argmax is
 * the leader the final round preferred (a leader is the argmax of its chunk, so nothing in a chunk
 * outweighs it). `chunks[c]` is indexed like the chunk's labels; `final[c]` is chunk c's leader's weight.
 */
export function recombineChunks(chunks: readonly number[][], final: readonly number[]): number[][] {
  const scaled = chunks.map((chunk, c) => {
    const leader = chunk[argmax(chunk)] as number;
    const factor = (final[c] as number) / leader;
    return chunk.map((p) => p * factor);
  });
  const total = scaled.flat().reduce((a, b) => a + b, 0);
  return scaled.map((chunk) => chunk.map((p) => p / total));
}
