/** The requests the benchmarks send: n mixed questions (noul, a choice of 3, a score of 4), in turn. */
export function questions(n: number): Record<string, unknown> {
  return Object.fromEntries(
    Array.from({ length: n }, (_, i) => {
      const kind = i % 3;
      if (kind === 0) return [`noul_${i}`, { type: "noul", instructions: `Is statement ${i} true of the diff?` }];
      if (kind === 1) {
        return [
          `choice_${i}`,
          { type: "choice", instructions: "Which area?", criteria: { api: "HTTP layer", db: "storage", docs: null } },
        ];
      }
      return [`score_${i}`, { type: "score", instructions: "Risk?", criteria: ["none", "low", "medium", "high"] }];
    }),
  );
}

export function decisionBody(n: number): string {
  return JSON.stringify({
    model: "localdecider",
    state: { diff: "--- a/x\n+++ b/x\n-a\n+b\n" },
    questions: questions(n),
  });
}

/** The value below which a share `q` of the values lie (the nearest rank). */
export const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
};

export const median = (values: number[]) => quantile(values, 0.5);

/** The straight line through (calls, added): the part per request and the part per upstream call. */
export function lineThrough(points: { calls: number; added: number }[]): { perRequest: number; perCall: number } {
  const n = points.length;
  const mx = points.reduce((s, p) => s + p.calls, 0) / n;
  const my = points.reduce((s, p) => s + p.added, 0) / n;
  const sxy = points.reduce((s, p) => s + (p.calls - mx) * (p.added - my), 0);
  const sxx = points.reduce((s, p) => s + (p.calls - mx) ** 2, 0);
  const perCall = sxy / sxx;
  return { perRequest: my - perCall * mx, perCall };
}
