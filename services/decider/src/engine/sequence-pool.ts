/**
 * The sequences of one context, lent one call at a time, and kept between calls as a store of recent states:
 * each sequence still holds what it evaluated last (the system message, a state, a prompt's questions).
 * A call gets the free sequence holding the longest prefix of its prompt (see bestFree), so a request's calls
 * find their own prompt, and a request about a state asked lately finds it evaluated; a prompt about a new
 * state takes the least recently used one (and what it held is forgotten): an LRU over states.
 * The context has a sequence per slot the limiter lends, plus the states kept beyond them (backend.ts and
 * LlamaEngine size it: LOCALDECIDER_STATE_CACHE_MIB), so a free sequence is always there for a call.
 *
 * A call may carry a cache key (the client's `prompt_cache_key`): a sequence is then reused only for a call
 * with the same key (or, without one, only by calls without one), so the key can only narrow a match: two
 * calls share evaluated tokens only when their prompts begin with the very same tokens and their keys agree.
 */
export class SequencePool<S extends { readonly contextTokens: readonly number[] }> {
  private readonly sequences: readonly S[];
  private readonly busy = new Set<number>();
  /** Per sequence: when it was last lent (a counter) and the cache key of the call it was lent to. */
  private readonly used: { at: number; key: string | undefined }[];
  private clock = 0;
  private readonly waiting: ((index: number) => void)[] = [];
  /** The most sequences lent at once since start. */
  peak = 0;
  /** Calls that found every sequence lent and waited: 0 while the limiter lends slots. */
  waits = 0;

  constructor(sequences: readonly S[]) {
    this.sequences = [...sequences];
    this.used = this.sequences.map(() => ({ at: 0, key: undefined }));
  }

  get size(): number {
    return this.sequences.length;
  }

  get lent(): number {
    return this.busy.size;
  }

  /**
   * The free sequence that shares most of `tokens` under the same key (the least recently used among equals),
   * and whether what it holds may be reused: false when it was last lent under another key (the caller then
   * evaluates the prompt from its start).
   */
  async acquire(tokens: readonly number[], key?: string): Promise<{ sequence: S; reuse: boolean }> {
    let index = this.bestFree(tokens, key);
    if (index === undefined) {
      this.waits += 1;
      index = await new Promise<number>((take) => this.waiting.push(take));
    }
    this.busy.add(index);
    this.peak = Math.max(this.peak, this.busy.size);
    const used = this.used[index] as { at: number; key: string | undefined };
    const reuse = used.key === key;
    this.clock += 1;
    this.used[index] = { at: this.clock, key };
    return { sequence: this.sequences[index] as S, reuse };
  }

  release(sequence: S): void {
    const index = this.sequences.indexOf(sequence);
    this.busy.delete(index);
    const next = this.waiting.shift();
    if (next === undefined) return;
    // Handed over lent: nothing else takes it before the waiter resumes.
    this.busy.add(index);
    next(index);
  }

  /**
   * A hit: the free sequence sharing the longest prefix of `tokens` under the same key, among those whose
   * shared part is at least half of what they hold (taking it reuses at least as much as it forgets: a
   * request's next prompt, or a state asked again with other questions). Prompts about different states share
   * only the system message, never half of a kept state, so they are no hit: the least recently used free
   * sequence is taken instead, and the oldest state forgotten.
   */
  private bestFree(tokens: readonly number[], key: string | undefined): number | undefined {
    let hit: number | undefined;
    let hitShared = 0;
    let oldest: number | undefined;
    let oldestAt = Number.POSITIVE_INFINITY;
    for (const [i, candidate] of this.sequences.entries()) {
      if (this.busy.has(i)) continue;
      const used = this.used[i] as { at: number; key: string | undefined };
      if (used.at < oldestAt) [oldest, oldestAt] = [i, used.at];
      if (used.key !== key) continue;
      const held = candidate.contextTokens;
      const shared = sharedPrefix(held, tokens);
      if (shared > hitShared && 2 * shared >= held.length) [hit, hitShared] = [i, shared];
    }
    return hit ?? oldest;
  }
}

export function sharedPrefix(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}
