import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import {
  type CalibrationFile,
  MAX_TEMPERATURE,
  MIN_TEMPERATURE,
  type QuestionType,
} from "@localdecider/contracts/decider";
import { confidenceHistogramSvg, type ReliabilityPanel, reliabilitySvg, toPng } from "./charts";
import { DeciderClient } from "./client";
import { type BadLine, parseDataset } from "./dataset";
import { calibrated, composeWithActive, fitCalibration, isHeldOut } from "./fit";
import { type LabelledAnswer, labelledAnswers } from "./predictions";
import { PreflightStop, preflight } from "./preflight";
import { Progress } from "./progress";
import { formatTable, type GroupReport, type MetricsReport, metricsReport } from "./report";
import { readResults } from "./results";
import { type RunSummary, runRecords } from "./runner";

export interface EvalOptions {
  data: string;
  url: string;
  apiKey: string | undefined;
  model: string;
  out: string;
  concurrency: number;
  timeoutSeconds: number;
  retries: number;
  bootstrap: number;
  seed: number;
  fit: boolean;
  holdout: number;
  minPerName: number;
  /** Where --fit writes the calibration file (default: <out>/calibration.json). */
  calibrationOut: string | undefined;
  charts: boolean;
}

/** A problem that ends the run (unreadable data, unreachable decider): the CLI prints it and exits 1. */
export class EvalStop extends Error {}

export interface FitReport {
  file: string;
  calibration: CalibrationFile;
  /** The temperatures fitted on these answers (what the file holds when no calibration was in force). */
  fitted: CalibrationFile;
  split: { holdout: number; seed: number; train_records: number; heldout_records: number };
  heldout_before: MetricsReport;
  heldout_after: MetricsReport;
}

export interface EvalReport {
  data: string;
  url: string;
  model: string;
  /** The decider's calibration when measured (GET /v1/models). */
  decider_calibration: unknown;
  records: { total: number; bad: number; answered: number; failed: number; skipped_as_answered: number };
  bad_lines: BadLine[];
  failures: RunSummary["failed"];
  retries: number;
  /** Answers whose type did not match their question: a broken server. */
  unusable_answers: number;
  bootstrap: { samples: number; seed: number };
  metrics: MetricsReport;
  fit?: FitReport;
  files: string[];
}

export interface EvalIo {
  /** Tables and results. */
  out: (text: string) => void;
  /** Warnings and notes. */
  err: (text: string) => void;
  /** Where the progress line goes (undefined: none). */
  progress: NodeJS.WriteStream | undefined;
  signal?: AbortSignal;
}

export async function runEval(options: EvalOptions, io: EvalIo): Promise<EvalReport | "interrupted"> {
  let text: string;
  try {
    text = readFileSync(options.data, "utf8");
  } catch (err) {
    throw new EvalStop(
      `cannot read the data set ${options.data}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
    );
  }
  const dataset = parseDataset(text);
  for (const b of dataset.bad) io.err(`${options.data}:${b.line}: skipped: ${b.error}`);
  if (dataset.bad.length > 0)
    io.err(`${dataset.bad.length} bad line(s) skipped; ${dataset.records.length} record(s) read`);
  if (dataset.records.length === 0) throw new EvalStop(`${options.data} holds no valid record`);

  const client = new DeciderClient({
    url: options.url,
    apiKey: options.apiKey,
    timeoutSeconds: options.timeoutSeconds,
  });
  let models: Awaited<ReturnType<DeciderClient["models"]>> | "interrupted";
  try {
    models = await preflight(client, { url: options.url, note: io.err, signal: io.signal });
  } catch (err) {
    if (err instanceof PreflightStop) throw new EvalStop(err.message);
    throw err;
  }
  if (models === "interrupted") {
    io.err("interrupted while waiting for the decider's model; nothing was asked");
    return "interrupted";
  }

  mkdirSync(options.out, { recursive: true });
  const resultsPath = join(options.out, "results.jsonl");
  const stored = readResults(resultsPath);
  if (stored.unreadable.length > 0) {
    io.err(
      `${resultsPath}: ignored unreadable line(s) ${stored.unreadable.join(", ")} (a run stopped mid-write); those records are asked again`,
    );
  }
  const todo = dataset.records.filter((r) => !stored.answered.has(r.key));
  const skipped = dataset.records.length - todo.length;
  if (skipped > 0) io.err(`resuming: ${skipped} record(s) already answered in ${resultsPath}, ${todo.length} to ask`);
  const progress = new Progress(todo.length, io.progress);
  const run = await runRecords(todo, {
    client,
    model: options.model,
    calibration: models.calibration?.active === true ? models.calibration.fitted_at : null,
    resultsPath,
    concurrency: options.concurrency,
    retries: options.retries,
    progress,
    signal: io.signal,
  });
  progress.finish();
  if (run.interrupted) {
    const answered = readResults(resultsPath).answered.size;
    io.err(
      `interrupted: ${answered} of ${dataset.records.length} record(s) answered so far; run the same command again to resume`,
    );
    return "interrupted";
  }
  for (const f of run.failed.slice(0, 20)) {
    io.err(
      `${options.data}:${f.line}: failed: ${f.error.status === 0 ? "" : `HTTP ${f.error.status} `}${f.error.code}: ${f.error.message}`,
    );
  }
  if (run.failed.length > 20) io.err(`... and ${run.failed.length - 20} more failures (all in ${resultsPath})`);
  if (run.failed.length > 0) {
    io.err(`${run.failed.length} record(s) failed and are left out of the metrics; run again to retry them`);
  }

  const results = readResults(resultsPath).answered;
  const answers: LabelledAnswer[] = [];
  let unusable = 0;
  for (const { key, record } of dataset.records) {
    const result = results.get(key);
    if (result === undefined) continue;
    const list = labelledAnswers(key, record, result.answers);
    unusable += Object.keys(record.labels).length - list.length;
    answers.push(...list);
  }
  const sources = new Set(
    dataset.records.flatMap(({ key }) => {
      const r = results.get(key);
      return r === undefined
        ? []
        : [`${r.model}, ${r.calibration == null ? "no calibration" : `calibration fitted ${r.calibration}`}`];
    }),
  );
  if (sources.size > 1) {
    io.err(
      `warning: the results in ${resultsPath} come from ${sources.size} configurations (${[...sources].join("; ")}); use a new --out to measure one`,
    );
  }
  if (answers.length === 0) throw new EvalStop("no labelled answer to measure: every record failed or has no labels");
  const bootstrap = { samples: options.bootstrap, seed: options.seed };
  const metrics = metricsReport(answers, bootstrap);
  io.out(formatTable("Per question type (95 % bootstrap intervals in brackets)", metrics.by_type));
  io.out("");
  io.out(formatTable("Per question name", metrics.by_name));

  const files: string[] = [];
  const write = (name: string, content: string | Buffer) => {
    const path = join(options.out, name);
    writeFileSync(path, content);
    files.push(path);
  };
  if (options.charts) {
    for (const g of metrics.by_type) {
      const panel = panelOf(`Reliability: ${typeTitle(g.type)} questions`, g);
      chart(write, `reliability-${g.type}`, reliabilitySvg([panel]));
      chart(
        write,
        `confidence-${g.type}`,
        confidenceHistogramSvg({
          ...panel,
          title: `Confidences: ${typeTitle(g.type)} questions`,
          accuracy: g.accuracy?.value ?? null,
        }),
      );
    }
  }

  const report: EvalReport = {
    data: options.data,
    url: options.url,
    model: options.model,
    decider_calibration: models.calibration ?? null,
    records: {
      total: dataset.records.length,
      bad: dataset.bad.length,
      answered: dataset.records.filter((r) => results.has(r.key)).length,
      failed: run.failed.length,
      skipped_as_answered: skipped,
    },
    bad_lines: dataset.bad,
    failures: run.failed,
    retries: run.retries,
    unusable_answers: unusable,
    bootstrap,
    metrics,
    files,
  };
  if (options.fit) report.fit = fitAndReport(options, answers, models.calibration, write, io);
  const reportPath = join(options.out, "report.json");
  files.push(reportPath);
  writeFileSync(reportPath, `${JSON.stringify(report, null, 2)}\n`);
  io.out("");
  io.out(`Wrote ${files.join(", ")}`);
  return report;
}

function fitAndReport(
  options: EvalOptions,
  answers: LabelledAnswer[],
  active: Awaited<ReturnType<DeciderClient["models"]>>["calibration"],
  write: (name: string, content: string | Buffer) => void,
  io: EvalIo,
): FitReport {
  const heldOut = (a: LabelledAnswer) => isHeldOut(a.record, options.holdout, options.seed);
  const train = answers.filter((a) => !heldOut(a));
  const test = answers.filter(heldOut);
  if (train.length === 0 || test.length === 0) {
    throw new EvalStop(
      `--fit needs answers on both sides of the split (training ${train.length}, held-out ${test.length}); use more records or change --holdout`,
    );
  }
  const trainRecords = new Set(train.map((a) => a.record)).size;
  const fitted = fitCalibration(train, {
    minPerName: options.minPerName,
    records: trainRecords,
    source: basename(options.data),
    promptVersion: active?.prompt_version,
  });
  const calibration = active?.active === true ? composeWithActive(active, fitted) : fitted;
  const bootstrap = { samples: options.bootstrap, seed: options.seed };
  const before = metricsReport(test, bootstrap);
  const after = metricsReport(calibrated(test, fitted), bootstrap);

  const temperatures = [
    ...Object.entries(calibration.types).map(
      ([type, t]) => `  ${type}: T = ${t?.temperature} (${t?.count} training answers)`,
    ),
    ...Object.entries(calibration.names).map(
      ([name, t]) => `  ${name} (${t.type}): T = ${t.temperature} (${t.count} training answers)`,
    ),
  ];
  io.out("");
  io.out(`Fit: ${train.length} training answers (${trainRecords} records), ${test.length} held-out answers`);
  if (active?.active === true)
    io.out("The decider already applies a calibration: the file's temperatures include it (products).");
  io.out(`Temperatures (T > 1 softens over-confident answers, T < 1 sharpens):\n${temperatures.join("\n")}`);
  for (const [type, t] of Object.entries(fitted.types)) {
    if (t === undefined) continue;
    if (t.temperature >= MAX_TEMPERATURE * 0.999) {
      io.out(
        `  note: ${type} is at the largest temperature (${MAX_TEMPERATURE}): its answers barely beat a uniform guess on these labels`,
      );
    } else if (t.temperature <= MIN_TEMPERATURE * 1.001) {
      io.out(`  note: ${type} is at the smallest temperature (${MIN_TEMPERATURE}): check the labels`);
    }
    if (t.count < options.minPerName) {
      io.out(
        `  note: ${type} has only ${t.count} training answers (fewer than --min-per-name ${options.minPerName}): its temperature is uncertain`,
      );
    }
  }
  io.out("");
  io.out(formatTable("Held-out, before the fit", before.by_type));
  io.out("");
  io.out(formatTable("Held-out, after the fit", after.by_type));

  const file = options.calibrationOut ?? join(options.out, "calibration.json");
  writeFileSync(file, `${JSON.stringify(calibration, null, 2)}\n`);
  io.out("");
  io.out(`Calibration file: ${file} (start the decider with LOCALDECIDER_CALIBRATION=${file})`);
  if (options.charts) {
    for (const g of before.by_type) {
      const a = after.by_type.find((x) => x.type === g.type) as GroupReport;
      const t = calibration.types[g.type]?.temperature;
      chart(
        write,
        `reliability-${g.type}-fit`,
        reliabilitySvg([
          panelOf(`Held-out ${typeTitle(g.type)}: before`, g),
          panelOf(`Held-out ${typeTitle(g.type)}: after (T = ${t ?? 1})`, a),
        ]),
      );
    }
  }
  return {
    file,
    calibration,
    fitted,
    split: {
      holdout: options.holdout,
      seed: options.seed,
      train_records: trainRecords,
      heldout_records: new Set(test.map((a) => a.record)).size,
    },
    heldout_before: before,
    heldout_after: after,
  };
}

function chart(write: (name: string, content: string | Buffer) => void, name: string, svg: string): void {
  write(`${name}.svg`, svg);
  write(`${name}.png`, toPng(svg));
}

function panelOf(title: string, g: GroupReport): ReliabilityPanel {
  return { title, bins: g.bins, count: g.count, ece: g.ece?.value ?? null, mce: g.mce?.value ?? null };
}

const typeTitle = (type: QuestionType) => (type === "noul" ? "yes/no" : type);
