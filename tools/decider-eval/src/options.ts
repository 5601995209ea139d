import path from "node:path";
import { parseArgs } from "node:util";
import { z } from "zod";
import type { EvalOptions } from "./evaluate";

export const USAGE = `Usage: pnpm decider eval --data <file.jsonl> [options]

Runs a labelled data set through a running decider (POST /v1/systemone), reports accuracy and calibration
per question type and name, draws reliability diagrams, and with --fit writes a calibration file.

  --data <file>          labelled records, JSON Lines (required; README "Data format")
  --url <url>            the decider (default http://127.0.0.1:8080)
  --api-key <key>        its LOCALDECIDER_API_KEY (default: the LOCALDECIDER_API_KEY environment variable)
  --model <name>         model sent in each request (default localdecider)
  --out <dir>            results, report.json and charts (default eval-out); re-running resumes from it
  --concurrency <n>      requests in flight at once, 1-64 (default 4)
  --timeout <seconds>    per request, 1-3600 (default 300)
  --retries <n>          further tries after 429/502/503/504 or no answer, 0-10 (default 2)
  --bootstrap <n>        bootstrap resamples for the 95 % intervals, 0-100000 (default 1000)
  --seed <n>             seed of the bootstrap and the split (default 1)
  --fit                  fit temperatures on a training split and write a calibration file
  --holdout <share>      share of records held out from the fit, 0.05-0.95 (default 0.3)
  --min-per-name <n>     training answers a question name needs for its own temperature (default 50)
  --calibration-out <f>  where --fit writes the file (default <out>/calibration.json)
  --no-charts            skip the PNG/SVG charts
  --quiet                no progress line
  --version              the tool's version
  -h, --help             this text`;

const int = (min: number, max: number, fallback: number) => z.coerce.number().int().min(min).max(max).default(fallback);

const Schema = z.object({
  data: z.string({ error: "--data <file.jsonl> is required" }).min(1),
  url: z
    .url({ protocol: /^https?$/, error: "--url must be an http:// or https:// URL" })
    .default("http://127.0.0.1:8080"),
  "api-key": z.string().min(1).optional(),
  model: z.string().min(1).default("localdecider"),
  out: z.string().min(1).default("eval-out"),
  concurrency: int(1, 64, 4),
  timeout: z.coerce.number().positive().max(3600).default(300),
  retries: int(0, 10, 2),
  bootstrap: int(0, 100_000, 1000),
  seed: int(0, 2 ** 32 - 1, 1),
  fit: z.boolean().default(false),
  holdout: z.coerce.number().min(0.05).max(0.95).default(0.3),
  "min-per-name": int(1, 1_000_000, 50),
  "calibration-out": z.string().min(1).optional(),
  "no-charts": z.boolean().default(false),
  quiet: z.boolean().default(false),
});

/** What the arguments ask for: the usage text, the version, or a run. */
export type Parsed =
  | { help: true }
  | { help: false; version: true }
  | { help: false; options: EvalOptions; quiet: boolean };

export function parseEvalArgs(args: string[], env: NodeJS.ProcessEnv): Parsed {
  const string = { type: "string" } as const;
  const { values } = parseArgs({
    args,
    strict: true,
    allowPositionals: false,
    options: {
      data: string,
      url: string,
      "api-key": string,
      model: string,
      out: string,
      concurrency: string,
      timeout: string,
      retries: string,
      bootstrap: string,
      seed: string,
      fit: { type: "boolean" },
      holdout: string,
      "min-per-name": string,
      "calibration-out": string,
      "no-charts": { type: "boolean" },
      quiet: { type: "boolean" },
      help: { type: "boolean", short: "h" },
      version: { type: "boolean" },
    },
  });
  if (values.help === true) return { help: true };
  if (values.version === true) return { help: false, version: true };
  const parsed = Schema.safeParse(values);
  if (!parsed.success) {
    throw new Error(
      parsed.error.issues
        .map((i) => (i.path.length > 0 ? `--${i.path.join(".")}: ${i.message}` : i.message))
        .join("; "),
    );
  }
  const v = parsed.data;
  // Relative paths are read from where the user ran the command: the root script `pnpm decider` runs in the
  // repository root, and pnpm says where it was run in INIT_CWD. Absolute from here on, so that what the tool
  // prints (the calibration file for LOCALDECIDER_CALIBRATION above all) can be used from any directory.
  const init = env.INIT_CWD;
  const base = init !== undefined && path.isAbsolute(init) ? init : process.cwd();
  const absolute = (p: string) => path.resolve(base, p);
  return {
    help: false,
    quiet: v.quiet,
    options: {
      data: absolute(v.data),
      url: v.url,
      apiKey: v["api-key"] ?? (env.LOCALDECIDER_API_KEY === "" ? undefined : env.LOCALDECIDER_API_KEY),
      model: v.model,
      out: absolute(v.out),
      concurrency: v.concurrency,
      timeoutSeconds: v.timeout,
      retries: v.retries,
      bootstrap: v.bootstrap,
      seed: v.seed,
      fit: v.fit,
      holdout: v.holdout,
      minPerName: v["min-per-name"],
      calibrationOut: v["calibration-out"] === undefined ? undefined : absolute(v["calibration-out"]),
      charts: !v["no-charts"],
    },
  };
}
