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

/**
 * The code-review workload of issue 33, as a new user writes it: yes/no questions with true/false criteria,
 * scores with five named levels, choices of four labels with descriptions, in turn; each question's wording
 * its own (people ask different things), so no two prompts repeat a line; `round` (e.g. "b") words a new set
 * of the same shape, for a second request about the same state.
 */
export function reviewQuestions(n: number, round = ""): Record<string, unknown> {
  const topics = ["error handling", "input validation", "logging", "the public API", "concurrency", "caching"];
  return Object.fromEntries(
    Array.from({ length: n }, (_, i) => {
      const topic = topics[i % topics.length] as string;
      const kind = i % 3;
      if (kind === 0) {
        return [
          `tested_${i}${round}`,
          {
            type: "noul",
            instructions: `Does the change to ${topic} in hunk ${i}${round} come with a test that covers it?`,
            criteria: { true: "a new or updated test covers it", false: "no test covers it" },
          },
        ];
      }
      if (kind === 1) {
        return [
          `area_${i}${round}`,
          {
            type: "choice",
            instructions: `Which layer does hunk ${i}${round} mostly touch?`,
            criteria: {
              api: "HTTP handlers and routes",
              storage: "database queries and migrations",
              ui: "templates and styles",
              docs: "documentation only",
            },
          },
        ];
      }
      return [
        `risk_${i}${round}`,
        {
          type: "score",
          instructions: `How risky is hunk ${i}${round} for ${topic}?`,
          criteria: ["none", "low", "moderate", "high", "critical"],
        },
      ];
    }),
  );
}

/** A unified diff of `lines` changed lines (about 13 tokens each), different from the first line on for every seed. */
export function diffState(seed: number, lines = 120): { diff: string } {
  const out = [`diff --git a/src/module_${seed}.ts b/src/module_${seed}.ts`, `--- a/src/module_${seed}.ts`];
  out.push(`+++ b/src/module_${seed}.ts`, `@@ -1,${lines} +1,${lines + 4} @@ export class Service${seed} {`);
  let x = seed * 2654435761;
  const next = () => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return x;
  };
  const words = ["value", "count", "total", "user", "order", "item", "limit", "cache", "retry", "state"];
  for (let i = 0; i < lines; i++) {
    const a = words[next() % words.length];
    const b = words[next() % words.length];
    const sign = i % 7 === 0 ? "-" : i % 5 === 0 ? "+" : " ";
    out.push(`${sign}  const ${a}_${i} = ${b}.compute(${next() % 1000}, "${a}-${seed}");`);
  }
  return { diff: out.join("\n") };
}

/** The review workload's state: a diff of about 2,000 tokens (Qwen2.5 tokenizer). */
export const reviewState = (seed: number) => diffState(seed, 100);

/**
 * The floor's prompt: the same state and questions as a plain numbered list, the least text that still
 * says everything each question asks (its name, its wording, its outcomes and their descriptions), with no
 * structure or safety around it: one line per question, `N. <name>: <wording> (<outcome>: <description>; ...)`.
 */
export function floorMessages(
  state: { diff: string },
  questions: Record<string, unknown>,
): { role: "system" | "user"; content: string }[] {
  const lines = Object.entries(questions).map(([name, value], i) => {
    const q = value as { type: string; instructions: string; criteria?: unknown };
    let outcomes: string[] = [];
    if (q.type === "noul") {
      const c = (q.criteria ?? {}) as Record<string, string>;
      outcomes = Object.entries(c).map(([k, v]) => `${k}: ${v}`);
    } else if (q.type === "choice") {
      outcomes = Object.entries(q.criteria as Record<string, string | null>).map(([k, v]) =>
        v === null ? k : `${k}: ${v}`,
      );
    } else {
      outcomes = (q.criteria as string[]).map((v, level) => `${level} ${v}`);
    }
    return `${i + 1}. ${name}: ${q.instructions}${outcomes.length === 0 ? "" : ` (${outcomes.join("; ")})`}`;
  });
  return [
    { role: "system", content: "Answer the questions about the diff." },
    { role: "user", content: `${state.diff}\n\nQuestions:\n${lines.join("\n")}` },
  ];
}
