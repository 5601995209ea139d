#!/usr/bin/env node
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { EvalStop, runEval } from "./evaluate";
import { parseEvalArgs, USAGE } from "./options";

/**
 * `pnpm decider eval ...` (the root script forwards its arguments here). Exit codes: 0 done (failed records
 * are reported, not fatal), 1 nothing to measure or a bad option, 2 bad usage, 130 interrupted (resumable).
 */
/** `decider-eval <version>`, from this package's package.json (one directory above dist/). */
function versionLine(): string {
  const pkg = JSON.parse(readFileSync(join(__dirname, "..", "package.json"), "utf8")) as { version: string };
  return `decider-eval ${pkg.version}`;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === "--version" || command === "-v") {
    process.stdout.write(`${versionLine()}\n`);
    return 0;
  }
  if (command === undefined || command === "-h" || command === "--help") {
    process.stdout.write(`${USAGE}\n`);
    return command === undefined ? 2 : 0;
  }
  if (command !== "eval") {
    process.stderr.write(`unknown command ${JSON.stringify(command)}: the one command is eval\n\n${USAGE}\n`);
    return 2;
  }
  let parsed: ReturnType<typeof parseEvalArgs>;
  try {
    parsed = parseEvalArgs(rest, process.env);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  if ("version" in parsed) {
    process.stdout.write(`${versionLine()}\n`);
    return 0;
  }
  if (parsed.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const { options, quiet } = parsed;
  // First Ctrl-C: launch nothing more, keep the calls in flight, then stop (the results file resumes it).
  // A second one stops at once.
  const controller = new AbortController();
  process.on("SIGINT", () => {
    if (controller.signal.aborted) process.exit(130);
    process.stderr.write("\nstopping after the requests in flight (Ctrl-C again to stop now)\n");
    controller.abort();
  });
  try {
    const report = await runEval(options, {
      out: (text) => process.stdout.write(`${text}\n`),
      err: (text) => process.stderr.write(`${text}\n`),
      progress: quiet ? undefined : process.stderr,
      signal: controller.signal,
    });
    return report === "interrupted" ? 130 : 0;
  } catch (err) {
    if (err instanceof EvalStop) {
      process.stderr.write(`decider eval: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`decider eval failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
