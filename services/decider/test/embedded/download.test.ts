import fs from "node:fs";
import path from "node:path";
import request from "supertest";
import { embeddedBackend } from "../../src/backend";
import { DownloadError, type DownloadProgress, downloadFile } from "../../src/engine/download";
import { EmbeddedUpstream } from "../../src/engine/embedded-upstream";
import { parseModelSource } from "../../src/engine/model-source";
import { PercentGate } from "../../src/engine/progress";
import { tinyModelPath } from "../engine/tiny-model";
import { capturingLogger, deciderOver, waitFor } from "../helpers";
import { freePort } from "../shared/processes";
import { type ModelFileServer, readModel, sha256 } from "./model-server";
import { serverAndDirPerTest } from "./per-test-server";

/**
 * The model download against a real HTTP server on loopback that serves the tiny GGUF the tests write:
 * progress, resuming after a cut connection (within a run and across runs), a corrupt file refused, a
 * missing one reported, and what /ready and decisions say meanwhile.
 */

jest.setTimeout(120_000);

const model = readModel(tinyModelPath());
const HASH = sha256(model);
const fast = { attempts: 3, backoffMs: 10 };

let server: ModelFileServer;
let dir: string;
serverAndDirPerTest("decider-models-", (s, d) => {
  server = s;
  dir = d;
});

describe("downloadFile", () => {
  it("downloads with progress up to the whole size, checks it, renames it into place and records its SHA-256", async () => {
    server.serve("/m.gguf", { bytes: model });
    const seen: DownloadProgress[] = [];
    const dest = path.join(dir, "m.gguf");
    await downloadFile({ url: `${server.url}/m.gguf`, dest, sha256: HASH, onProgress: (p) => seen.push(p), ...fast });
    expect(sha256(fs.readFileSync(dest))).toBe(HASH);
    expect(fs.readdirSync(dir).sort()).toStrictEqual(["m.gguf", "m.gguf.verified.json"]);
    const stat = fs.statSync(dest);
    expect(JSON.parse(fs.readFileSync(`${dest}.verified.json`, "utf8"))).toStrictEqual({
      url: `${server.url}/m.gguf`,
      sha256: HASH,
      size: model.length,
      ino: stat.ino,
      mtimeMs: stat.mtimeMs,
      ctimeMs: stat.ctimeMs,
    });
    expect(seen.length).toBeGreaterThan(1);
    expect(seen.every((p) => p.total === model.length)).toBe(true);
    expect(seen.map((p) => p.received)).toStrictEqual([...seen.map((p) => p.received)].sort((a, b) => a - b));
    expect(seen[seen.length - 1]?.received).toBe(model.length);
  });

  it("resumes with a Range request where a cut connection stopped, sending each byte once", async () => {
    const cut = 5_000_000;
    server.serve("/m.gguf", { bytes: model, cutAfter: cut, cuts: 1 });
    const dest = path.join(dir, "m.gguf");
    await downloadFile({ url: `${server.url}/m.gguf`, dest, sha256: HASH, ...fast });
    expect(sha256(fs.readFileSync(dest))).toBe(HASH);
    const ranges = server.requests.map((r) => r.range);
    expect(ranges[0]).toBeUndefined();
    // The cut may fall anywhere in the last chunk the socket flushed; the retry asks for exactly what is on disk.
    expect(ranges).toHaveLength(2);
    const resumedAt = Number(/^bytes=(\d+)-$/.exec(ranges[1] ?? "")?.[1]);
    expect(resumedAt).toBeGreaterThan(0);
    expect(resumedAt).toBeLessThanOrEqual(cut);
  });

  it("resumes across runs: a run that gave up leaves its part, and the next one continues it", async () => {
    server.serve("/m.gguf", { bytes: model, cutAfter: 3_000_000, cuts: 1 });
    const dest = path.join(dir, "m.gguf");
    const first = await downloadFile({ url: `${server.url}/m.gguf`, dest, attempts: 1 }).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(DownloadError);
    expect(fs.existsSync(dest)).toBe(false);
    const part = fs.statSync(`${dest}.part`).size;
    expect(part).toBeGreaterThan(0);
    await downloadFile({ url: `${server.url}/m.gguf`, dest, sha256: HASH, attempts: 1 });
    expect(server.requests[1]?.range).toBe(`bytes=${part}-`);
    expect(sha256(fs.readFileSync(dest))).toBe(HASH);
  });

  it("refuses a file whose SHA-256 is not the one the hub states, and deletes it", async () => {
    const corrupt = Buffer.from(model);
    corrupt[corrupt.length - 1] = (corrupt[corrupt.length - 1] as number) ^ 0xff;
    server.serve("/m.gguf", { bytes: corrupt, linkedSha256: HASH });
    const dest = path.join(dir, "m.gguf");
    const err = await downloadFile({ url: `${server.url}/resolve/m.gguf`, dest, ...fast }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DownloadError);
    expect((err as DownloadError).final).toBe(true);
    expect((err as Error).message).toBe(
      `the downloaded file failed its check (SHA-256 ${sha256(corrupt)}, expected ${HASH}); it was deleted`,
    );
    expect(fs.readdirSync(dir)).toStrictEqual([]);
    // A final failure is not retried.
    expect(server.requests.filter((r) => r.path === "/m.gguf")).toHaveLength(1);
  });

  it("refuses a file that is not GGUF", async () => {
    server.serve("/m.gguf", { bytes: Buffer.from("<html>a login page</html>") });
    const err = await downloadFile({ url: `${server.url}/m.gguf`, dest: path.join(dir, "m.gguf"), ...fast }).catch(
      (e: unknown) => e,
    );
    expect((err as Error).message).toBe("the downloaded file failed its check (not a GGUF file); it was deleted");
  });

  it("gives up at once on a 404, naming the status", async () => {
    const err = await downloadFile({
      url: `${server.url}/missing.gguf`,
      dest: path.join(dir, "x.gguf"),
      ...fast,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DownloadError);
    expect((err as Error).message).toBe("HTTP 404 Not Found");
    expect(server.requests).toHaveLength(1);
  });
});

describe("the embedded engine while its model downloads", () => {
  const embeddedFor = (uri: string, logger = capturingLogger("info").logger) =>
    new EmbeddedUpstream({
      source: parseModelSource(uri),
      modelsDir: dir,
      sha256: undefined,
      engine: { gpu: "cpu", sequences: 1, contextSize: 1024, threads: 1 },
      logger,
      download: fast,
      progressBar: false,
    });

  it("answers /ready and decisions 503 with the download's progress, then loads the model and answers 200", async () => {
    server.serve("/tiny.gguf", { bytes: model, holdAfter: model.length / 4 });
    const { logger, lines } = capturingLogger("silly");
    const embedded = embeddedFor(`${server.url}/resolve/tiny.gguf`, logger);
    // The app's own log at the default level: what an operator sees while health checks poll.
    const app = capturingLogger("info");
    const d = deciderOver(embeddedBackend(embedded, `${dir}/tiny.gguf`, app.logger), { logger: app.logger });
    try {
      // Not "loading model" before anything was downloaded.
      expect((await request(d.app).get("/ready")).body).toStrictEqual({
        error: "starting the engine",
        code: "backend_not_ready",
      });
      const started = embedded.start();
      await waitFor(() => embedded.stateText === "downloading model (25 %)", "a quarter downloaded");
      const ready = await request(d.app).get("/ready");
      expect(ready.status).toBe(503);
      expect(ready.body).toStrictEqual({ error: "downloading model (25 %)", code: "backend_not_ready" });
      const decision = await request(d.app)
        .post("/v1/systemone")
        .send({ model: "localdecider", state: "s", questions: { a: { type: "noul", instructions: "Is it?" } } });
      expect(decision.status).toBe(503);
      expect(decision.body).toStrictEqual({ error: "downloading model (25 %)", code: "model_unavailable" });
      server.release();
      await started;
      expect((await request(d.app).get("/ready")).status).toBe(200);
      // The polls of /ready while the model was on its way are expected: logged at debug, none at info or above.
      // (The decision refused meanwhile is a client's failure: still at info.)
      const shown = app.lines.filter((l) => ["error", "warn", "info"].includes(l.level));
      expect(shown.map((l) => [l.message, l.code])).toStrictEqual([
        ["request failed", "model_unavailable"],
        ["model server ready", undefined],
      ]);
      expect(app.lines).toContainEqual(
        expect.objectContaining({ level: "debug", message: "request failed", error: "downloading model (25 %)" }),
      );
      // The load's progress, in a few lines, up to 100 %.
      const loading = lines.filter((l) => l.message === "loading model" && l.percent !== undefined);
      const percents = loading.map((l) => l.percent as number);
      expect(percents.at(-1)).toBe(100);
      expect(percents).toStrictEqual([...percents].sort((a, b) => a - b));
      expect(percents.length).toBeLessThanOrEqual(6);
      // Each state /ready went through, in order: the download, then the load, once each.
      const states = lines.filter((l) => l.message === "embedded engine state").map((l) => l.state);
      expect(states).toStrictEqual(["downloading model (0 %)", "loading model", "ready"]);
      const messages = lines.map((l) => l.message);
      expect(messages).toEqual(
        expect.arrayContaining(["downloading model", "model downloaded", "loading model", "model loaded"]),
      );
      const progress = lines.filter((l) => l.message === "downloading model" && l.percent !== undefined);
      expect(progress.length).toBeGreaterThan(1);
      expect(progress[0]).toMatchObject({ total: model.length, rate: expect.stringMatching(/\/s$/) });
      // Downloaded where LOCALDECIDER_MODELS_DIR says, under the source's host and path.
      expect(fs.existsSync(path.join(dir, new URL(server.url).host.replace(":", "_"), "resolve", "tiny.gguf"))).toBe(
        true,
      );
    } finally {
      await d.close();
      await embedded.close();
    }
  });

  it("a download whose tries fail says why and when it tries again: on /ready and in one warning per retry", async () => {
    const port = await freePort();
    const uri = `http://127.0.0.1:${port}/m.gguf`;
    const { logger, lines } = capturingLogger("info");
    // The wait before the last try is long: the test looks at it, then closes the engine, which ends it.
    const embedded = new EmbeddedUpstream({
      source: parseModelSource(uri),
      modelsDir: dir,
      sha256: undefined,
      engine: { gpu: "cpu", sequences: 1, contextSize: 1024, threads: 1 },
      logger,
      download: { attempts: 3, backoffMs: 10 },
      progressBar: false,
    });
    const d = deciderOver(embeddedBackend(embedded, "m.gguf", capturingLogger().logger));
    try {
      await embedded.start();
      const retries = lines.filter((l) => l.message === "model download failed; trying again");
      expect(retries.map(({ attempt, attempts, waitMs }) => ({ attempt, attempts, waitMs }))).toStrictEqual([
        { attempt: 2, attempts: 3, waitMs: 10 },
        { attempt: 3, attempts: 3, waitMs: 20 },
      ]);
      for (const r of retries)
        expect(r).toMatchObject({ level: "warn", uri, reason: expect.stringContaining("ECONNREFUSED") });
      const failed = (await request(d.app).get("/ready")).body.error as string;
      expect(failed).toMatch(new RegExp(`^model download failed: ${uri}: connect ECONNREFUSED`));
    } finally {
      await d.close();
      await embedded.close();
    }
    const waiting = new EmbeddedUpstream({
      source: parseModelSource(uri),
      modelsDir: dir,
      sha256: undefined,
      engine: { gpu: "cpu", sequences: 1, contextSize: 1024, threads: 1 },
      logger: capturingLogger("info").logger,
      download: { attempts: 2, backoffMs: 600_000 },
      progressBar: false,
    });
    const w = deciderOver(embeddedBackend(waiting, "m.gguf", capturingLogger().logger));
    try {
      const started = waiting.start();
      await waitFor(() => waiting.stateText.includes("retrying"), "the wait for a retry");
      expect((await request(w.app).get("/ready")).body).toStrictEqual({
        error: `downloading model (0 %), retrying (try 2 of 2) after: connect ECONNREFUSED 127.0.0.1:${port}`,
        code: "backend_not_ready",
      });
      await waiting.close();
      await started;
    } finally {
      await w.close();
      await waiting.close();
    }
  });

  it("a model that cannot be downloaded is a 503 naming the URI and the reason; the service lives on", async () => {
    const uri = `${server.url}/missing.gguf`;
    const { logger, lines } = capturingLogger("info");
    const embedded = embeddedFor(uri, logger);
    const app = capturingLogger("info");
    const d = deciderOver(embeddedBackend(embedded, "missing.gguf", app.logger), { logger: app.logger });
    try {
      await embedded.start();
      const text = `model download failed: ${uri}: HTTP 404 Not Found`;
      expect((await request(d.app).get("/ready")).body).toStrictEqual({ error: text, code: "backend_not_ready" });
      // A failure, not a model on its way: the gate warns of it, and the poll's 503 stays visible at info.
      expect(app.lines.filter((l) => l.level !== "debug").map((l) => [l.level, l.message])).toStrictEqual([
        ["warn", "model server not ready"],
        ["info", "request failed"],
      ]);
      const decision = await request(d.app)
        .post("/v1/systemone")
        .send({ model: "localdecider", state: "s", questions: { a: { type: "noul", instructions: "Is it?" } } });
      expect(decision.body).toStrictEqual({ error: text, code: "model_unavailable" });
      expect(lines.filter((l) => l.level === "error").map((l) => l.reason)).toStrictEqual([text]);
      expect((await request(d.app).get("/health")).status).toBe(200);
    } finally {
      await d.close();
      await embedded.close();
    }
  });
});

describe("parseModelSource", () => {
  it("reads hf: URIs of one file into the hub's download URL, and keeps credentials out of what it shows", () => {
    expect(parseModelSource("hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF/qwen2.5-1.5b-instruct-q4_k_m.gguf")).toStrictEqual({
      kind: "download",
      uri: "hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF/qwen2.5-1.5b-instruct-q4_k_m.gguf",
      url: "https://huggingface.co/Qwen/Qwen2.5-1.5B-Instruct-GGUF/resolve/main/qwen2.5-1.5b-instruct-q4_k_m.gguf",
      recorded: "https://huggingface.co/Qwen/Qwen2.5-1.5B-Instruct-GGUF/resolve/main/qwen2.5-1.5b-instruct-q4_k_m.gguf",
      cachePath: path.join(
        "huggingface.co",
        "Qwen",
        "Qwen2.5-1.5B-Instruct-GGUF",
        "resolve",
        "main",
        "qwen2.5-1.5b-instruct-q4_k_m.gguf",
      ),
    });
    expect(parseModelSource("hf:a/b/dir/m.gguf#v2")).toMatchObject({
      url: "https://huggingface.co/a/b/resolve/v2/dir/m.gguf",
    });
    expect(parseModelSource("https://me:p%40ss@host/m/../x.gguf")).toStrictEqual({
      kind: "download",
      uri: "https://host/x.gguf",
      url: "https://host/x.gguf",
      recorded: "https://host/x.gguf",
      authorization: `Basic ${Buffer.from("me:p@ss").toString("base64")}`,
      cachePath: path.join("host", "x.gguf"),
    });
    expect(parseModelSource("models/m.gguf", "/srv")).toStrictEqual({ kind: "file", path: "/srv/models/m.gguf" });
  });

  it("keeps URLs that differ only in their query in different files, each in a folder named by the query's hash", () => {
    const cachePath = (uri: string) => (parseModelSource(uri) as { cachePath: string }).cachePath;
    const v1 = cachePath("https://host/models/m.gguf?v=1");
    const v2 = cachePath("https://host/models/m.gguf?v=2");
    expect(v1).not.toBe(v2);
    expect(v1.split(path.sep)).toStrictEqual([
      "host",
      "models",
      expect.stringMatching(/^query-[0-9a-f]{16}$/),
      "m.gguf",
    ]);
    expect(cachePath("https://host/models/m.gguf")).toBe(path.join("host", "models", "m.gguf"));
  });

  it("keeps an hf: URI in its repository: a branch, user, repository or file part that could leave it is refused", () => {
    const branch =
      'the branch must be a plain ref name (letters, digits, "_", "-", "." and "/" between parts; no "..", "%" or ":")';
    const refused: [string, string][] = [
      ["hf:a/b/m.gguf#main/../../other/repo/resolve/main", branch],
      ["hf:a/b/m.gguf#..%2F..%2Fother%2Frepo", branch],
      ["hf:a/b/m.gguf#other:main", branch],
      ["hf:a/b/m.gguf#", branch],
      ["hf:../b/m.gguf", 'the user and repository must be plain names (letters, digits, "_", "-", ".")'],
      ["hf:a/b..c/m.gguf", 'the user and repository must be plain names (letters, digits, "_", "-", ".")'],
      [
        "hf:a/b/x/../../../c/d/resolve/main/m.gguf",
        'the file\'s path may not have empty, "." or ".." parts, "%", "\\", "?", ":" or spaces',
      ],
      ["hf:a/b/%2e%2e/m.gguf", 'the file\'s path may not have empty, "." or ".." parts, "%", "\\", "?", ":" or spaces'],
    ];
    for (const [uri, message] of refused) expect(() => parseModelSource(uri)).toThrow(`"${uri}": ${message}`);
    // A nested ref is one revision for the hub: its slashes are sent escaped.
    expect(parseModelSource("hf:a/b/dir/m.gguf#refs/pr/1")).toMatchObject({
      url: "https://huggingface.co/a/b/resolve/refs%2Fpr%2F1/dir/m.gguf",
    });
  });
});

describe("PercentGate", () => {
  it("passes the first percentage, each one at least 25 past the last passed, and 100 once", () => {
    const gate = new PercentGate();
    const passed = [0, 1, 2, 24, 25, 33, 49, 50, 99, 100, 100].filter((p) => gate.shouldLog(p));
    expect(passed).toStrictEqual([0, 25, 50, 99, 100]);
  });
});
