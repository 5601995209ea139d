/**
 * The sequences of one context, lent one call at a time. The limiter already caps calls at the number of
 * sequences, so a caller rarely waits; a free sequence that already holds the longest prefix of the new
 * prompt is lent first, so the questions of one request reuse their shared prompt's evaluation.
 */
export class SequencePool<S extends { readonly contextTokens: readonly number[] }> {
  private readonly free: S[];
  private readonly waiting: ((sequence: S) => void)[] = [];
  private lent = 0;
  /** The most sequences lent at once since start. */
  peak = 0;
  /** Calls that found no free sequence and waited: 0 while the limiter keeps calls to the sequences' number. */
  waits = 0;

  constructor(sequences: readonly S[]) {
    this.free = [...sequences];
  }

  get busy(): number {
    return this.lent;
  }

  async acquire(tokens: readonly number[]): Promise<S> {
    let sequence: S;
    if (this.free.length > 0) {
      let best = 0;
      let bestShared = -1;
      for (const [i, candidate] of this.free.entries()) {
        const shared = sharedPrefix(candidate.contextTokens, tokens);
        if (shared > bestShared) [best, bestShared] = [i, shared];
      }
      sequence = this.free.splice(best, 1)[0] as S;
    } else {
      this.waits += 1;
      sequence = await new Promise<S>((resolve) => this.waiting.push(resolve));
    }
    this.lent += 1;
    this.peak = Math.max(this.peak, this.lent);
    return sequence;
  }

  release(sequence: S): void {
    this.lent -= 1;
    const next = this.waiting.shift();
    if (next !== undefined) next(sequence);
    else this.free.push(sequence);
  }
}

export function sharedPrefix(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}
