/** Seeded randomness, so that bootstrap intervals and the train/held-out split repeat run after run. */

/** FNV-1a, 32 bits: a stable hash of a text. */
export function fnv1a(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619) >>> 0;
  return h;
}

/**
 * A 32-bit hash whose every bit depends on every input bit: FNV-1a, then MurmurHash3's finaliser. FNV-1a
 * alone leaves its high bits nearly equal for keys that differ in their last characters (cr-001, cr-002…).
 */
export function mixedHash(text: string): number {
  let h = fnv1a(text);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

/** Mulberry32: a small, fast generator of numbers in [0, 1) from a 32-bit seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
