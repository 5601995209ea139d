import type { QuestionType } from "@localdecider/contracts/decider";
import {
  type BootstrapOptions,
  type Estimate,
  type MetricName,
  reliabilityBins,
  type Summary,
  summarize,
} from "./metrics";
import type { LabelledAnswer } from "./predictions";

/** Metrics of one group of labelled answers (a question type, or a question name), with its bins. */
export type GroupReport = Summary & { type: QuestionType; name?: string; bins: ReturnType<typeof reliabilityBins> };

export interface MetricsReport {
  by_type: GroupReport[];
  by_name: GroupReport[];
}

const TYPE_ORDER: QuestionType[] = ["noul", "choice", "score"];

/** Groups answers per question type and per (type, question name), and summarises each group. */
export function metricsReport(answers: readonly LabelledAnswer[], bootstrap: BootstrapOptions): MetricsReport {
  const byType = new Map<QuestionType, LabelledAnswer[]>();
  const byName = new Map<string, LabelledAnswer[]>();
  for (const a of answers) {
    byType.set(a.type, [...(byType.get(a.type) ?? []), a]);
    const key = JSON.stringify([a.type, a.name]);
    byName.set(key, [...(byName.get(key) ?? []), a]);
  }
  const group = (list: LabelledAnswer[], type: QuestionType, name?: string): GroupReport => ({
    type,
    ...(name === undefined ? {} : { name }),
    ...summarize(list, bootstrap),
    bins: reliabilityBins(list),
  });
  return {
    by_type: TYPE_ORDER.filter((t) => byType.has(t)).map((t) => group(byType.get(t) as LabelledAnswer[], t)),
    by_name: [...byName.entries()]
      .map(([key, list]) => {
        const [type, name] = JSON.parse(key) as [QuestionType, string];
        return group(list, type, name);
      })
      .sort(
        (a, b) => TYPE_ORDER.indexOf(a.type) - TYPE_ORDER.indexOf(b.type) || (a.name ?? "").localeCompare(b.name ?? ""),
      ),
  };
}

const COLUMNS: [MetricName, string][] = [
  ["accuracy", "accuracy"],
  ["log_loss", "log loss"],
  ["brier", "Brier"],
  ["ece", "ECE"],
  ["mce", "MCE"],
];

const cell = (e: Estimate | null) =>
  e === null ? "-" : `${e.value.toFixed(3)} [${e.ci95[0].toFixed(3)}, ${e.ci95[1].toFixed(3)}]`;

/** The terminal table: one row per group, each metric with its 95 % interval in brackets. */
export function formatTable(title: string, groups: readonly GroupReport[]): string {
  const rows = groups.map((g) => [
    g.name === undefined ? g.type : `${g.name} (${g.type})`,
    String(g.count),
    ...COLUMNS.map(([m]) => cell(g[m])),
  ]);
  const header = ["", "n", ...COLUMNS.map(([, label]) => label)];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
  const format = (r: string[]) =>
    r.map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join("  ");
  return [title, format(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(format)].join("\n");
}
