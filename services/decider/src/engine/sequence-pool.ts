/**
 * The sequences of one context, lent one call at a time. The limiter lends each request one slot of
 * MAX_INFLIGHT, and the context has that many sequences (backend.ts creates it so): a call that names its
 * slot gets the sequence of that number, which still holds what the request's previous call evaluated, so
 * a request's prompt is evaluated once. A call with no slot gets the free sequence holding the longest
 * prefix of its prompt.
 */
export class SequencePool<S extends { readonly contextTokens: readonly number[] }> {
  private readonly sequences: readonly S[];
  private readonly busy = new Set<number>();
  private readonly waiting: { slot: number | undefined; take: (index: number) => void }[] = [];
  /** The most sequences lent at once since start. */
  peak = 0;
  /** Calls that found their sequence (or every sequence) lent and waited: 0 while the limiter lends slots. */
  waits = 0;

  constructor(sequences: readonly S[]) {
    this.sequences = [...sequences];
  }

  get size(): number {
    return this.sequences.length;
  }

  get lent(): number {
    return this.busy.size;
  }

  /** The sequence of `slot` (taken modulo the pool's size), else the free one that shares most of `tokens`. */
  async acquire(tokens: readonly number[], slot?: number): Promise<S> {
    const wanted = slot === undefined || slot < 0 ? undefined : slot % this.sequences.length;
    let index = wanted === undefined ? this.bestFree(tokens) : this.busy.has(wanted) ? undefined : wanted;
    if (index === undefined) {
      this.waits += 1;
      index = await new Promise<number>((take) => this.waiting.push({ slot: wanted, take }));
    }
    this.busy.add(index);
    this.peak = Math.max(this.peak, this.busy.size);
    return this.sequences[index] as S;
  }

  release(sequence: S): void {
    const index = this.sequences.indexOf(sequence);
    this.busy.delete(index);
    const next = this.waiting.findIndex((w) => w.slot === undefined || w.slot === index);
    if (next < 0) return;
    // Handed over lent: nothing else takes it before the waiter resumes.
    this.busy.add(index);
    this.waiting.splice(next, 1)[0]?.take(index);
  }

  private bestFree(tokens: readonly number[]): number | undefined {
    let best: number | undefined;
    let bestShared = -1;
    for (const [i, candidate] of this.sequences.entries()) {
      if (this.busy.has(i)) continue;
      const shared = sharedPrefix(candidate.contextTokens, tokens);
      if (shared > bestShared) [best, bestShared] = [i, shared];
    }
    return best;
  }
}

export function sharedPrefix(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}
