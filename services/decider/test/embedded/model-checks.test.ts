import fs from "node:fs";
import path from "node:path";
import request from "supertest";
import { embeddedBackend } from "../../src/backend";
import { EmbeddedUpstream } from "../../src/engine/embedded-upstream";
import { type ModelSource, parseModelSource } from "../../src/engine/model-source";
import { ANSWER_MODEL } from "../engine/answer-model";
import { tinyModelPath } from "../engine/tiny-model";
import { capturingLogger, deciderOver, waitFor } from "../helpers";
import { type ModelFileServer, readModel, sha256 } from "./model-server";
import { serverAndDirPerTest } from "./per-test-server";

/**
 * The embedded engine's model before it is loaded: a URL's credentials are used and shown nowhere; a file
 * kept in the models directory is checked (against the pin, else the record of its download) on every start,
 * and one that fails is downloaded again; a plain path is checked against the pin. A real model server on
 * loopback, real files in a temporary directory, the real engine loading the tiny GGUF.
 */

jest.setTimeout(120_000);

const model = readModel(tinyModelPath());
const HASH = sha256(model);
/** Another valid GGUF, loadable: what a careless copy or an attacker would put in the model's place. */
const other = readModel(tinyModelPath(ANSWER_MODEL));
const ZEROS = "0".repeat(64);
const PASSWORD = "s3cretpw";
const BASIC = `Basic ${Buffer.from(`user:${PASSWORD}`).toString("base64")}`;
const fast = { attempts: 2, backoffMs: 10 };

let server: ModelFileServer;
let dir: string;
serverAndDirPerTest("decider-checks-", (s, d) => {
  server = s;
  dir = d;
});

function embeddedFor(
  source: ModelSource,
  options: { sha256?: string; logger?: ReturnType<typeof capturingLogger> } = {},
) {
  return new EmbeddedUpstream({
    source,
    modelsDir: dir,
    sha256: options.sha256,
    engine: { gpu: "cpu", sequences: 1, contextSize: 1024, threads: 1 },
    logger: (options.logger ?? capturingLogger("info")).logger,
    download: fast,
    progressBar: false,
  });
}

/** Starts the engine, waits until it is ready or failed, and closes it; returns the state's text. */
async function startOnce(embedded: EmbeddedUpstream): Promise<string> {
  try {
    await embedded.start();
    return embedded.stateText;
  } finally {
    await embedded.close();
  }
}

/** Where the models directory keeps a download of `uri`. */
function keptAt(uri: string): string {
  const source = parseModelSource(uri);
  if (source.kind !== "download") throw new Error(`${uri} is not a download`);
  return path.join(dir, source.cachePath);
}

describe("a model URL with credentials", () => {
  it("is downloaded with them as basic auth; /ready, /v1/models and every log line show the address without them", async () => {
    server.serve("/private/tiny.gguf", { bytes: model, authorization: BASIC, holdAfter: model.length / 4 });
    const port = new URL(server.url).port;
    const shown = `http://127.0.0.1:${port}/private/tiny.gguf`;
    const capture = capturingLogger("silly");
    const embedded = embeddedFor(parseModelSource(`http://user:${PASSWORD}@127.0.0.1:${port}/private/tiny.gguf`), {
      logger: capture,
    });
    const d = deciderOver(embeddedBackend(embedded, "tiny.gguf", capture.logger), {
      apiKey: "topkey",
      logger: capture.logger,
    });
    const bodies: string[] = [];
    try {
      const started = embedded.start();
      await waitFor(() => embedded.stateText === "downloading model (25 %)", "a quarter downloaded");
      const ready = await request(d.app).get("/ready");
      expect(ready.body).toStrictEqual({ error: "downloading model (25 %)", code: "backend_not_ready" });
      const models = await request(d.app).get("/v1/models").set("authorization", "Bearer topkey");
      expect(models.body.backend).toStrictEqual({
        kind: "embedded",
        source: shown,
        state: "downloading model (25 %)",
        phase: "downloading",
      });
      bodies.push(ready.text, models.text);
      server.release();
      await started;
      const loaded = await request(d.app).get("/ready");
      expect(loaded.status).toBe(200);
      bodies.push(loaded.text, (await request(d.app).get("/v1/models").set("authorization", "Bearer topkey")).text);
    } finally {
      await d.close();
      await embedded.close();
    }
    expect(server.requests.map((r) => r.authorization)).toStrictEqual([BASIC]);
    const everything = [...bodies, ...capture.lines.map((l) => JSON.stringify(l))].join("\n");
    expect(capture.lines.map((l) => l.message)).toEqual(expect.arrayContaining(["downloading model", "model loaded"]));
    expect(everything).not.toContain(PASSWORD);
    expect(everything).not.toContain(BASIC.slice("Basic ".length));
    // Nothing on disk has them either: the part's metadata and the record name the URL without them.
    const onDisk = fs
      .readdirSync(dir, { recursive: true, encoding: "utf8" })
      .filter((f) => f.endsWith(".json"))
      .map((f) => fs.readFileSync(path.join(dir, f), "utf8"));
    expect(onDisk).toHaveLength(1);
    expect(onDisk.join()).not.toContain(PASSWORD);
  });

  it("that cannot be reached is a 503 naming the address without them, to a caller without the API key", async () => {
    const capture = capturingLogger("silly");
    const embedded = embeddedFor(parseModelSource(`http://user:${PASSWORD}@127.0.0.1:1/m.gguf`), { logger: capture });
    const d = deciderOver(embeddedBackend(embedded, "m.gguf", capture.logger), {
      apiKey: "topkey",
      logger: capture.logger,
    });
    try {
      await embedded.start();
      const ready = await request(d.app).get("/ready");
      expect(ready.status).toBe(503);
      expect(ready.body).toStrictEqual({
        // Port 1 is one that fetch refuses to call: the review's own example.
        error: "model download failed: http://127.0.0.1:1/m.gguf: bad port",
        code: "backend_not_ready",
      });
      const everything = [ready.text, ...capture.lines.map((l) => JSON.stringify(l))].join("\n");
      expect(everything).not.toContain(PASSWORD);
    } finally {
      await d.close();
      await embedded.close();
    }
  });
});

describe("a model file kept in the models directory", () => {
  it("is not loaded when it lacks the pinned SHA-256: it is deleted and downloaded again", async () => {
    server.serve("/tiny.gguf", { bytes: model });
    const uri = `${server.url}/tiny.gguf`;
    const dest = keptAt(uri);
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.writeFileSync(dest, other);
    const capture = capturingLogger("info");
    expect(await startOnce(embeddedFor(parseModelSource(uri), { sha256: HASH, logger: capture }))).toBe("ready");
    expect(sha256(fs.readFileSync(dest))).toBe(HASH);
    expect(server.requests).toHaveLength(1);
    expect(capture.lines.find((l) => l.level === "warn")).toMatchObject({
      message: "model file refused: downloading it again",
      reason: `SHA-256 ${sha256(other)}, expected ${HASH} (LOCALDECIDER_MODEL_SHA256)`,
    });
  });

  it("is not loaded when the pin is zeros and a junk file sits there: it is deleted, and /ready says why", async () => {
    server.serve("/m.gguf", { bytes: model });
    const uri = `${server.url}/m.gguf`;
    const dest = keptAt(uri);
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.writeFileSync(dest, Buffer.concat([Buffer.from("GGUF"), Buffer.alloc(1000, 7)]));
    const text = await startOnce(embeddedFor(parseModelSource(uri), { sha256: ZEROS }));
    expect(text).toBe(
      `model download failed: ${uri}: the downloaded file failed its check (SHA-256 ${HASH}, expected ${ZEROS}); it was deleted`,
    );
    expect(fs.existsSync(dest)).toBe(false);
  });

  it("without a pin, is hashed again only when it changed since its download, and downloaded again when it differs", async () => {
    server.serve("/tiny.gguf", { bytes: model });
    const uri = `${server.url}/tiny.gguf`;
    const dest = keptAt(uri);
    expect(await startOnce(embeddedFor(parseModelSource(uri)))).toBe("ready");
    expect(server.requests).toHaveLength(1);

    // Unchanged: size, times and inode match the record, so it is not read again.
    const second = capturingLogger("info");
    expect(await startOnce(embeddedFor(parseModelSource(uri), { logger: second }))).toBe("ready");
    expect(server.requests).toHaveLength(1);
    expect(second.lines.find((l) => l.message === "model verified")).toMatchObject({
      against: "record",
      hashed: false,
      sha256: HASH,
    });

    // Written over in place (same inode): hashed, found different, downloaded again.
    fs.writeFileSync(dest, other);
    const third = capturingLogger("info");
    expect(await startOnce(embeddedFor(parseModelSource(uri), { logger: third }))).toBe("ready");
    expect(server.requests).toHaveLength(2);
    expect(sha256(fs.readFileSync(dest))).toBe(HASH);
    expect(third.lines.find((l) => l.level === "warn")).toMatchObject({
      reason: `SHA-256 ${sha256(other)}, expected ${HASH} (its recorded download)`,
    });
  });

  it("with a pin, is hashed on every start, record or not, and the cost is in the log", async () => {
    server.serve("/tiny.gguf", { bytes: model });
    const uri = `${server.url}/tiny.gguf`;
    expect(await startOnce(embeddedFor(parseModelSource(uri), { sha256: HASH }))).toBe("ready");
    const again = capturingLogger("info");
    expect(await startOnce(embeddedFor(parseModelSource(uri), { sha256: HASH, logger: again }))).toBe("ready");
    expect(server.requests).toHaveLength(1);
    expect(again.lines.find((l) => l.message === "model verified")).toMatchObject({
      against: "pin",
      hashed: true,
      sha256: HASH,
      ms: expect.any(Number),
    });
  });

  it("is downloaded again when there is no record of its download (put there by hand, or by an older version)", async () => {
    server.serve("/tiny.gguf", { bytes: model });
    const uri = `${server.url}/tiny.gguf`;
    const dest = keptAt(uri);
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.writeFileSync(dest, other);
    expect(await startOnce(embeddedFor(parseModelSource(uri)))).toBe("ready");
    expect(server.requests).toHaveLength(1);
    expect(sha256(fs.readFileSync(dest))).toBe(HASH);
  });

  it("is not followed when it is a symlink: the link is replaced by the download and its target left alone", async () => {
    server.serve("/tiny.gguf", { bytes: model });
    const uri = `${server.url}/tiny.gguf`;
    const dest = keptAt(uri);
    const target = path.join(dir, "elsewhere.gguf");
    fs.writeFileSync(target, other);
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.symlinkSync(target, dest);
    expect(await startOnce(embeddedFor(parseModelSource(uri)))).toBe("ready");
    expect(server.requests).toHaveLength(1);
    expect(fs.lstatSync(dest).isFile()).toBe(true);
    expect(sha256(fs.readFileSync(dest))).toBe(HASH);
    expect(sha256(fs.readFileSync(target))).toBe(sha256(other));
  });
});

describe("a model given as a plain path", () => {
  it("is checked against the pin when one is set: one without it is not loaded, and the message names both hashes", async () => {
    const file = path.join(dir, "mine.gguf");
    fs.writeFileSync(file, model);
    const text = await startOnce(embeddedFor({ kind: "file", path: file }, { sha256: ZEROS }));
    expect(text).toBe(
      `model file ${file} has SHA-256 ${HASH}, not the ${ZEROS} that LOCALDECIDER_MODEL_SHA256 pins; it was not loaded`,
    );
    expect(await startOnce(embeddedFor({ kind: "file", path: file }, { sha256: HASH }))).toBe("ready");
    // A user's own file is left where and as it was, with nothing written beside it.
    expect(fs.readdirSync(dir)).toStrictEqual(["mine.gguf"]);
  });
});
