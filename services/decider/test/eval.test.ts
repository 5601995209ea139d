import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CalibrationFile } from "@localdecider/contracts/decider";
import { spawnTracked } from "@localdecider/test-env/processes";
import request from "supertest";
import { loadCalibration } from "../src/calibration/load";
import { PROMPT_VERSION } from "../src/decide/prompt";
import { ModelFileServer } from "./embedded/model-server";
import { tinyModelPath } from "./engine/tiny-model";
import { deciderFor, type Harness, harness, listen } from "./helpers";
import { startFailing } from "./shared/processes";

/**
 * `pnpm decider eval` end to end: the built CLI (tools/decider-eval/dist/cli.js, built by `pnpm test`)
 * against this service in front of the fake model server, scripted to be over-confident by a known
 * temperature. Every record states its true probability q (`truth=q`); the fake reports p ∝ q^2 for
 * "true", i.e. the true distribution at temperature 1/2, so the temperature that corrects it is 2.
 * Each record asks 10 yes/no questions of which exactly 10q are labelled true (rotated across the names),
 * so the labels hold the true frequencies exactly in every record and the fit has no sampling noise to hide in.
 */

jest.setTimeout(120_000);

const REPO = join(__dirname, "..", "..", "..");
const CLI = join(REPO, "tools", "decider-eval", "dist", "cli.js");
const MAIN = join(__dirname, "..", "dist", "main.js");
const OVERCONFIDENCE = 2;
const LEVELS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];
const QUESTIONS = 10;

function record(i: number, extra = ""): string {
  const q = LEVELS[i % LEVELS.length] as number;
  const names = Array.from({ length: QUESTIONS }, (_, k) => `finding_${k}`);
  return JSON.stringify({
    state: `Review case ${i}${extra}: truth=${q}`,
    questions: Object.fromEntries(names.map((n) => [n, { type: "noul", instructions: `Is ${n} a real defect?` }])),
    labels: Object.fromEntries(names.map((n, k) => [n, (k + i) % QUESTIONS < Math.round(q * QUESTIONS)])),
  });
}

const userText = (body: Record<string, unknown>) =>
  (body.messages as { role: string; content: string }[]).find((m) => m.role === "user")?.content ?? "";

/** The over-confident model: P(true) ∝ q^2; a state containing FAIL makes every call fail. */
function overconfident(h: Harness): void {
  h.fake.script = (_q, body) => {
    const text = userText(body);
    if (text.includes("FAIL")) throw new Error("scripted model failure");
    const q = Number(/truth=([0-9.]+)/.exec(text)?.[1]);
    return { true: q ** OVERCONFIDENCE, false: (1 - q) ** OVERCONFIDENCE };
  };
}

/** The CLI's arguments: data, decider, output directory, no progress line, and any others. */
const evalArgs = (data: string, url: string, out: string, ...more: string[]) => [
  "--data",
  data,
  "--url",
  url,
  "--out",
  out,
  "--quiet",
  ...more,
];

interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runCli(args: string[], onStart?: (child: ChildProcess, output: { stderr: string }) => void): Promise<CliRun> {
  const child = spawnTracked(process.execPath, [CLI, "eval", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  const output = { stdout: "", stderr: "" };
  child.stdout?.on("data", (c: Buffer) => {
    output.stdout += c.toString();
  });
  child.stderr?.on("data", (c: Buffer) => {
    output.stderr += c.toString();
  });
  onStart?.(child, output);
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, ...output })));
}

const lines = (path: string) => (existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean).length : 0);

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 6000; i++) {
    if (condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Width and height from a PNG's IHDR, after checking its signature (full decoding: the tool's own tests). */
function pngSize(path: string): [number, number] {
  const png = readFileSync(path);
  expect(png.subarray(0, 8)).toStrictEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  expect(png.subarray(12, 16).toString("latin1")).toBe("IHDR");
  return [png.readUInt32BE(16), png.readUInt32BE(20)];
}

/** dist/main.js as a process, with this environment; resolves with its port once it listens. */
async function startMain(env: Record<string, string>): Promise<{ url: string; stop: () => Promise<void> }> {
  const child = spawnTracked(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH, LOCALDECIDER_PORT: "0", LOG_LEVEL: "info", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let text = "";
    child.stdout?.on("data", (c: Buffer) => {
      text += c.toString();
      const line = text.split("\n").find((l) => l.includes('"decider listening"'));
      if (line !== undefined) resolve(Number((JSON.parse(line) as { port: number }).port));
    });
    child.on("exit", (code) => reject(new Error(`decider exited with ${code}`)));
  });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  return {
    url: `http://127.0.0.1:${port}`,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

let dir: string;
let h: Harness;
let served: { url: string; close: () => Promise<void> };

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run pnpm run build first`);
});

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "decider-eval-"));
  h = await harness({ maxInflight: 4 });
  overconfident(h);
  served = await listen(h);
});

afterEach(async () => {
  await served.close();
  await h.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("pnpm decider eval --fit against an over-confident model", () => {
  it("recovers the temperature within 5 %, lowers the held-out ECE, and the service started with the file answers the true probabilities", async () => {
    const data = join(dir, "synthetic.jsonl");
    writeFileSync(data, `${Array.from({ length: 108 }, (_, i) => record(i)).join("\n")}\n`);
    const out = join(dir, "out");
    const run = await runCli(
      evalArgs(data, served.url, out, "--fit", "--bootstrap", "200", "--min-per-name", "100000", "--concurrency", "4"),
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const report = JSON.parse(readFileSync(join(out, "report.json"), "utf8"));
    expect(report.records).toStrictEqual({ total: 108, bad: 0, answered: 108, failed: 0, skipped_as_answered: 0 });
    expect(report.metrics.by_type.map((g: { type: string; count: number }) => [g.type, g.count])).toStrictEqual([
      ["noul", 1080],
    ]);

    const file = CalibrationFile.parse(JSON.parse(readFileSync(join(out, "calibration.json"), "utf8")));
    const t = file.types.noul?.temperature as number;
    expect(Math.abs(t - OVERCONFIDENCE) / OVERCONFIDENCE).toBeLessThan(0.05);
    expect(file.names).toStrictEqual({});
    expect(file.data.records).toBe(report.fit.split.train_records);
    expect(report.fit.split.train_records + report.fit.split.heldout_records).toBe(108);
    const before = report.fit.heldout_before.by_type[0].ece.value;
    const after = report.fit.heldout_after.by_type[0].ece.value;
    expect(before).toBeGreaterThan(0.05);
    expect(after).toBeLessThan(before / 4);
    expect(run.stdout).toContain("Held-out, after the fit");
    expect(run.stdout).toContain(`noul: T = ${t}`);

    // The charts: decodable PNG headers of the documented sizes, beside their SVGs.
    expect(pngSize(join(out, "reliability-noul.png"))).toStrictEqual([800, 600]);
    expect(pngSize(join(out, "confidence-noul.png"))).toStrictEqual([800, 600]);
    expect(pngSize(join(out, "reliability-noul-fit.png"))).toStrictEqual([1600, 600]);
    expect(readFileSync(join(out, "reliability-noul.svg"), "utf8")).toContain("<svg");

    // In process: the app with the loaded file answers q, where the model says q^2 / (q^2 + (1-q)^2).
    const calibrated = deciderFor(h.upstream, { calibration: loadCalibration(join(out, "calibration.json")) });
    try {
      const res = await request(calibrated.app)
        .post("/v1/systemone")
        .send({
          model: "localdecider",
          state: "Review case x: truth=0.7",
          questions: { bug: { type: "noul", instructions: "Is it?" } },
        });
      expect(res.status).toBe(200);
      expect(Math.abs(res.body.answers.bug.noul - 0.7)).toBeLessThan(0.005);
      const raw = 0.49 / (0.49 + 0.09);
      expect(h.fake.reported.at(-1)?.probabilities.true).toBeCloseTo(raw, 12);
    } finally {
      await calibrated.close();
    }

    // The real boot path: LOCALDECIDER_CALIBRATION, GET /v1/models, and a second run against the corrected
    // service measures it calibrated; a fit on top of it composes with the file in force (T stays ~2).
    const service = await startMain({
      LOCALDECIDER_UPSTREAM: h.upstream,
      LOCALDECIDER_UPSTREAM_MODEL: "test-model",
      LOCALDECIDER_CALIBRATION: join(out, "calibration.json"),
    });
    try {
      const models = (await (await fetch(`${service.url}/v1/models`)).json()) as Record<string, unknown>;
      expect(models.calibration).toStrictEqual({
        active: true,
        method: "temperature",
        version: 1,
        fitted_at: file.fitted_at,
        // The fit recorded the prompt version the answers came from: the service's own, so no warning.
        prompt_version: PROMPT_VERSION,
        fitted_prompt_version: PROMPT_VERSION,
        data: file.data,
        temperatures: { types: { noul: t }, names: {} },
      });
      expect(file.prompt_version).toBe(PROMPT_VERSION);
      const again = join(dir, "again");
      const second = await runCli(
        evalArgs(data, service.url, again, "--fit", "--bootstrap", "0", "--min-per-name", "100000", "--no-charts"),
      );
      expect(second.code).toBe(0);
      const secondReport = JSON.parse(readFileSync(join(again, "report.json"), "utf8"));
      expect(secondReport.metrics.by_type[0].ece.value).toBeLessThan(report.metrics.by_type[0].ece.value / 4);
      expect(secondReport.fit.fitted.types.noul.temperature).toBeCloseTo(1, 2);
      const composed = secondReport.fit.calibration.types.noul.temperature;
      expect(Math.abs(composed - OVERCONFIDENCE) / OVERCONFIDENCE).toBeLessThan(0.05);
      // Resuming the first run's results against the calibrated service would mix two configurations: said.
      const grown = join(dir, "grown.jsonl");
      writeFileSync(grown, `${readFileSync(data, "utf8")}${record(108)}\n`);
      const mixed = await runCli(evalArgs(grown, service.url, out, "--bootstrap", "0", "--no-charts"));
      expect(mixed.code).toBe(0);
      expect(mixed.stderr).toContain(
        `warning: the results in ${join(out, "results.jsonl")} come from 2 configurations (localdecider-0.1.0/test-model, no calibration; localdecider-0.1.0/test-model, calibration fitted ${file.fitted_at}); use a new --out to measure one`,
      );
    } finally {
      await service.stop();
    }
  });
});

describe("pnpm decider eval with bad lines and a failing service", () => {
  it("reports bad lines by number and failed records, and measures the rest", async () => {
    const data = join(dir, "mixed.jsonl");
    const good = Array.from({ length: 18 }, (_, i) => record(i));
    const bad = [
      "{not json",
      JSON.stringify({ state: "s", questions: { a: { type: "noul", instructions: "Is it?" } }, labels: { a: "yes" } }),
      JSON.stringify({ state: "s", questions: { a: { type: "noul", instructions: "Is it?" } }, labels: { b: true } }),
      JSON.stringify({ questions: { a: { type: "noul", instructions: "Is it?" } }, labels: { a: true } }),
    ];
    const failing = [record(100, " FAIL"), record(101, " FAIL")];
    // Lines 1-9 good, 10-13 bad, 14-15 failing, 16 blank, 17-25 good.
    const text = [...good.slice(0, 9), ...bad, ...failing, "", ...good.slice(9)].join("\n");
    writeFileSync(data, text);
    const out = join(dir, "out");
    const run = await runCli(evalArgs(data, served.url, out, "--retries", "1", "--bootstrap", "50"));
    expect(run.code).toBe(0);
    const stderr = run.stderr.split("\n");
    expect(stderr).toContain(`${data}:10: skipped: not JSON: ${errorOf("{not json")}`);
    expect(stderr).toContain(`${data}:11: skipped: labels.a: a yes/no (noul) question's label must be true or false`);
    expect(stderr).toContain(`${data}:12: skipped: labels.b: labels a question the record does not ask`);
    expect(stderr).toContain(`${data}:13: skipped: state: state is required (null is allowed)`);
    expect(stderr).toContain(`${data}:14: failed: HTTP 502 upstream_error: inference backend returned HTTP 500`);
    expect(stderr).toContain(`${data}:15: failed: HTTP 502 upstream_error: inference backend returned HTTP 500`);
    expect(stderr).toContain("2 record(s) failed and are left out of the metrics; run again to retry them");
    const report = JSON.parse(readFileSync(join(out, "report.json"), "utf8"));
    expect(report.records).toStrictEqual({ total: 20, bad: 4, answered: 18, failed: 2, skipped_as_answered: 0 });
    expect(report.bad_lines.map((b: { line: number }) => b.line)).toStrictEqual([10, 11, 12, 13]);
    expect(report.failures.map((f: { line: number }) => f.line).sort()).toStrictEqual([14, 15]);
    expect(report.retries).toBe(2);
    expect(report.metrics.by_type[0].count).toBe(180);
    // The failed records are asked again by the next run, the answered ones are not.
    h.fake.script = (_q, body) => {
      const q = Number(/truth=([0-9.]+)/.exec(userText(body))?.[1]);
      return { true: q, false: 1 - q };
    };
    const callsBefore = h.fake.calls;
    const rerun = await runCli(evalArgs(data, served.url, out, "--bootstrap", "0"));
    expect(rerun.code).toBe(0);
    expect(rerun.stderr).toContain("resuming: 18 record(s) already answered");
    expect(h.fake.calls - callsBefore).toBe(2 * QUESTIONS);
    expect(JSON.parse(readFileSync(join(out, "report.json"), "utf8")).records.answered).toBe(20);
  });

  it("stops with exit code 1 and a clear message when the decider cannot be reached", async () => {
    const data = join(dir, "one.jsonl");
    writeFileSync(data, record(0));
    // A port that was just free: nothing listens there.
    const free = createServer();
    await new Promise<void>((resolve) => free.listen(0, "127.0.0.1", resolve));
    const port = (free.address() as AddressInfo).port;
    await new Promise((resolve) => free.close(resolve));
    const url = `http://127.0.0.1:${port}`;
    const run = await runCli(evalArgs(data, url, join(dir, "out")));
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `decider eval: the decider at ${url} did not list its models: unreachable: GET /v1/models: request failed: connect ECONNREFUSED 127.0.0.1:${port}\n`,
    );
  });
});

describe("pnpm decider eval interrupted and resumed", () => {
  it("keeps what was answered, exits 130, and the next run asks only the rest, each record once", async () => {
    const data = join(dir, "synthetic.jsonl");
    const total = 60;
    writeFileSync(data, Array.from({ length: total }, (_, i) => record(i)).join("\n"));
    const out = join(dir, "out");
    const results = join(out, "results.jsonl");
    const first = await runCli(
      evalArgs(data, served.url, out, "--concurrency", "1", "--no-charts"),
      (child, output) => {
        void (async () => {
          // Hold the model once 10 records are in, interrupt while a request waits on it, then let it finish.
          await until(() => lines(results) >= 10, "10 results");
          h.fake.holding = true;
          await until(() => h.fake.inflight > 0, "a held call");
          child.kill("SIGINT");
          await until(
            () => output.stderr.includes("stopping after the requests in flight"),
            "the CLI to stop launching",
          );
          h.fake.release();
        })();
      },
    );
    expect(first.code).toBe(130);
    const kept = lines(results);
    expect(kept).toBeGreaterThanOrEqual(10);
    expect(kept).toBeLessThan(total);
    expect(first.stderr).toContain(
      `interrupted: ${kept} of ${total} record(s) answered so far; run the same command again to resume`,
    );
    expect(existsSync(join(out, "report.json"))).toBe(false);

    const second = await runCli(evalArgs(data, served.url, out, "--no-charts"));
    expect(second.code).toBe(0);
    expect(second.stderr).toContain(
      `resuming: ${kept} record(s) already answered in ${results}, ${total - kept} to ask`,
    );
    expect(lines(results)).toBe(total);
    // Every record's state went to the model exactly once per question over both runs.
    const perState = new Map<string, number>();
    for (const body of h.fake.requests) {
      const state = /Review case \d+/.exec(userText(body))?.[0] as string;
      perState.set(state, (perState.get(state) ?? 0) + 1);
    }
    expect(perState.size).toBe(total);
    expect(new Set(perState.values())).toStrictEqual(new Set([QUESTIONS]));
    const report = JSON.parse(readFileSync(join(out, "report.json"), "utf8"));
    expect(report.records.answered).toBe(total);
    expect(report.records.skipped_as_answered).toBe(kept);
  });
});

describe("pnpm decider eval against an embedded model that is not loaded", () => {
  let files: ModelFileServer;
  beforeEach(async () => {
    files = new ModelFileServer();
    await files.start();
  });
  afterEach(async () => {
    await files.stop();
  });

  const embeddedEnv = (model: string) => ({
    LOCALDECIDER_MODEL: model,
    LOCALDECIDER_MODELS_DIR: join(dir, "models"),
    LOCALDECIDER_CONTEXT_SIZE: "2048",
    LOCALDECIDER_THREADS: "1",
  });

  it("stops after the preflight with the decider's reason when the model failed, and asks nothing", async () => {
    const uri = `${files.url}/missing.gguf`;
    const service = await startMain(embeddedEnv(uri));
    try {
      const data = join(dir, "data.jsonl");
      writeFileSync(data, `${record(0)}\n`);
      const out = join(dir, "out");
      const run = await runCli(evalArgs(data, service.url, out));
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(
        `decider eval: the decider at ${service.url} cannot answer: its model ${uri} is not loaded: model download failed: ${uri}: HTTP 404 Not Found\n`,
      );
      expect(existsSync(out)).toBe(false);
      const metrics = await (await fetch(`${service.url}/metrics`)).text();
      expect(metrics).not.toMatch(/http_requests_total\{[^}]*route="\/v1\/systemone"/);
    } finally {
      await service.stop();
    }
  });

  it("waits for a model on its way, saying so, then asks the records", async () => {
    const model = readFileSync(tinyModelPath());
    files.serve("/tiny.gguf", { bytes: model, holdAfter: Math.floor(model.length / 2) });
    const service = await startMain(embeddedEnv(`${files.url}/tiny.gguf`));
    try {
      const data = join(dir, "data.jsonl");
      writeFileSync(data, `${[record(0), record(1)].join("\n")}\n`);
      const out = join(dir, "out");
      const run = await runCli(
        evalArgs(data, service.url, out, "--bootstrap", "0", "--no-charts"),
        (_child, output) => {
          void until(
            () => output.stderr.includes("waiting for the decider's model: downloading model"),
            "the wait",
          ).then(() => files.release());
        },
      );
      expect(run.stderr).toMatch(
        /^waiting for the decider's model: (starting the engine|downloading model \(\d+ %\))\n/,
      );
      expect(run.stderr).toContain("waiting for the decider's model: downloading model (");
      expect(run.code).toBe(0);
      const report = JSON.parse(readFileSync(join(out, "report.json"), "utf8"));
      expect(report.records).toMatchObject({ total: 2, answered: 2, failed: 0 });
    } finally {
      await service.stop();
    }
  });
});

describe("pnpm decider --version", () => {
  it("prints the tool's name and version and exits 0", async () => {
    const pkg = JSON.parse(readFileSync(join(REPO, "tools", "decider-eval", "package.json"), "utf8"));
    for (const args of [["--version"], ["eval", "--version"]]) {
      const child = spawnTracked(process.execPath, [CLI, ...args], { stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      child.stdout?.on("data", (c: Buffer) => {
        stdout += c.toString();
      });
      const code = await new Promise((resolve) => child.on("close", resolve));
      expect([code, stdout]).toStrictEqual([0, `decider-eval ${pkg.version}\n`]);
    }
  });
});

describe("LOCALDECIDER_CALIBRATION at boot", () => {
  it.each([
    ["not JSON", "{", /is not JSON/],
    [
      "another format",
      JSON.stringify({ format: "x" }),
      /is not a localdecider calibration file \(version 1\): format: /,
    ],
    [
      "a temperature out of range",
      JSON.stringify({
        format: "localdecider-calibration",
        version: 1,
        method: "temperature",
        fitted_at: "2026-11-24T10:00:00.000Z",
        data: { records: 1, answers: 1 },
        types: { noul: { temperature: 0, count: 1 } },
      }),
      /types\.noul\.temperature: Too small: expected number to be >=0\.01/,
    ],
  ])("stops the start naming the file when it holds %s", async (_what, content, message) => {
    const path = join(dir, "calibration.json");
    writeFileSync(path, content);
    const run = await startFailing({ LOCALDECIDER_CALIBRATION: path });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`decider failed to start: LOCALDECIDER_CALIBRATION: calibration file ${path}`);
    expect(run.stderr).toMatch(message);
  });

  it("stops the start naming a missing file", async () => {
    const path = join(dir, "missing.json");
    const run = await startFailing({ LOCALDECIDER_CALIBRATION: path });
    expect(run.code).toBe(1);
    expect(run.stderr.trim()).toBe(
      `decider failed to start: LOCALDECIDER_CALIBRATION: calibration file ${path}: cannot be read (ENOENT: there is no such file)`,
    );
  });

  it("says where it looked for a relative path: in the directory the command was run in (INIT_CWD)", async () => {
    const run = await startFailing({ LOCALDECIDER_CALIBRATION: "eval-out/missing.json", INIT_CWD: dir });
    expect(run.code).toBe(1);
    expect(run.stderr.trim()).toBe(
      `decider failed to start: LOCALDECIDER_CALIBRATION: calibration file eval-out/missing.json (looked for at ${join(dir, "eval-out", "missing.json")}): cannot be read (ENOENT: there is no such file)`,
    );
  });
});

describe("docs/calibration.md's two commands, run from one directory", () => {
  it("pnpm decider eval --fit writes eval-out/calibration.json there and prints its absolute path, and pnpm --filter @localdecider/decider start finds it by the same relative path", async () => {
    writeFileSync(join(dir, "data.jsonl"), `${Array.from({ length: 36 }, (_, i) => record(i)).join("\n")}\n`);
    // As docs/calibration.md has them, with --dir naming the checkout: pnpm runs both scripts in their packages'
    // folders (the repository root, services/decider), and this directory is where they were run from.
    const fit = await runPnpm(
      [
        ...["--dir", REPO, "decider", "eval", "--data", "data.jsonl", "--url", served.url, "--out", "eval-out"],
        ...["--fit", "--quiet", "--bootstrap", "0", "--no-charts", "--min-per-name", "100000"],
      ],
      dir,
    );
    expect(fit.code).toBe(0);
    const file = join(dir, "eval-out", "calibration.json");
    expect(fit.stdout).toContain(`(start the decider with LOCALDECIDER_CALIBRATION=${file})`);
    const fitted = CalibrationFile.parse(JSON.parse(readFileSync(file, "utf8")));

    const service = await startWithPnpm(
      {
        LOCALDECIDER_CALIBRATION: "eval-out/calibration.json",
        LOCALDECIDER_UPSTREAM: h.upstream,
        LOCALDECIDER_UPSTREAM_MODEL: "test-model",
      },
      dir,
    );
    try {
      const models = (await (await fetch(`${service.url}/v1/models`)).json()) as { calibration: unknown };
      expect(models.calibration).toMatchObject({ active: true, fitted_at: fitted.fitted_at });
      expect(service.listening.calibration).toMatchObject({ file });
    } finally {
      await service.stop();
    }
  });
});

/** `pnpm <args>` run in `cwd`, to its end. */
function runPnpm(args: string[], cwd: string): Promise<CliRun> {
  const child = spawnTracked("pnpm", args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
  const output = { stdout: "", stderr: "" };
  child.stdout?.on("data", (c: Buffer) => {
    output.stdout += c.toString();
  });
  child.stderr?.on("data", (c: Buffer) => {
    output.stderr += c.toString();
  });
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, ...output }));
  });
}

/**
 * `pnpm --dir <repo> --filter @localdecider/decider start` run in `cwd`, in a process group of its own (pnpm
 * and the node it starts), stopped together by SIGTERM to the group; resolves once the decider listens.
 */
async function startWithPnpm(
  env: Record<string, string>,
  cwd: string,
): Promise<{ url: string; listening: Record<string, unknown>; stop: () => Promise<void> }> {
  const child = spawnTracked("pnpm", ["--dir", REPO, "--filter", "@localdecider/decider", "start"], {
    cwd,
    env: { ...process.env, LOCALDECIDER_PORT: "0", LOG_LEVEL: "info", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const stop = async () => {
    try {
      process.kill(-(child.pid as number), "SIGTERM");
    } catch {
      // already gone
    }
    await exited;
  };
  let stderr = "";
  child.stderr?.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  try {
    const listening = await new Promise<Record<string, unknown>>((resolve, reject) => {
      let text = "";
      child.stdout?.on("data", (c: Buffer) => {
        text += c.toString();
        const line = text.split("\n").find((l) => l.includes('"decider listening"'));
        if (line !== undefined) resolve(JSON.parse(line) as Record<string, unknown>);
      });
      child.on("exit", (code) => reject(new Error(`pnpm start exited with ${code}: ${stderr}`)));
    });
    return { url: `http://127.0.0.1:${listening.port as number}`, listening, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

function errorOf(text: string): string {
  try {
    JSON.parse(text);
  } catch (err) {
    return (err as Error).message;
  }
  return "";
}
