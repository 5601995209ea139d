import fs from "node:fs";
import path from "node:path";
import { EmbeddedUpstream } from "../../src/engine/embedded-upstream";
import { type ModelSource, parseModelSource } from "../../src/engine/model-source";
import { tinyModelPath } from "../engine/tiny-model";
import { capturingLogger } from "../helpers";
import { DeciderProcess, freePort, startFailing } from "../shared/processes";
import { ConnectProxy } from "./connect-proxy";
import { ModelFileServer, readModel, sha256 } from "./model-server";
import { serverAndDirPerTest } from "./per-test-server";

/**
 * Where the embedded engine's model comes from, and what the user is told when it cannot come: a path that is
 * not there stops the start (llama-server's -hf shorthand gets the hf: form suggested); hf: URIs through a
 * mirror (HF_ENDPOINT) with a token (HF_TOKEN); downloads through a proxy (HTTPS_PROXY, HTTP_PROXY, NO_PROXY;
 * a real CONNECT proxy on loopback); a hub that cannot be reached, or refuses, says what to do.
 */

jest.setTimeout(120_000);

const model = readModel(tinyModelPath());
const HASH = sha256(model);
const TOKEN = "hf_testtoken123";
const fast = { attempts: 1, backoffMs: 10 };

let server: ModelFileServer;
let dir: string;
serverAndDirPerTest("decider-sources-", (s, d) => {
  server = s;
  dir = d;
});

const failed = (message: string) => `decider failed to start: ${message}`;

describe("a model path that is not there stops the start", () => {
  it("names the file and what LOCALDECIDER_MODEL takes", async () => {
    const file = path.join(dir, "missing.gguf");
    expect(await startFailing({ LOCALDECIDER_MODEL: file })).toStrictEqual({
      code: 1,
      stderr: failed(
        `LOCALDECIDER_MODEL: model file ${file}: there is no such file; give the path of a GGUF file, an http(s) URL, or hf:<user>/<repo>/<file>.gguf`,
      ),
    });
  });

  it("says where a relative path was looked for: the directory the command was run in", async () => {
    const run = await startFailing({ LOCALDECIDER_MODEL: "models/m.gguf", INIT_CWD: dir });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `LOCALDECIDER_MODEL: model file models/m.gguf (looked for at ${path.join(dir, "models", "m.gguf")}): there is no such file`,
    );
  });

  it("suggests the hf: form for llama-server's -hf shorthand", async () => {
    const run = await startFailing({ LOCALDECIDER_MODEL: "Qwen/Qwen2.5-1.5B-Instruct-GGUF:Q4_K_M", INIT_CWD: dir });
    expect(run).toStrictEqual({
      code: 1,
      stderr: failed(
        `LOCALDECIDER_MODEL: model file Qwen/Qwen2.5-1.5B-Instruct-GGUF:Q4_K_M (looked for at ${path.join(dir, "Qwen", "Qwen2.5-1.5B-Instruct-GGUF:Q4_K_M")}): there is no such file; ` +
          "it looks like llama-server's -hf shorthand (<user>/<repo>[:<quant>]), which names no file: write hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF/<file>.gguf, " +
          "e.g. hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF/qwen2.5-1.5b-instruct-q4_k_m.gguf if that is the file's name " +
          "(the repository's files are listed at https://huggingface.co/Qwen/Qwen2.5-1.5B-Instruct-GGUF/tree/main)",
      ),
    });
  });

  it("refuses a directory", async () => {
    const run = await startFailing({ LOCALDECIDER_MODEL: dir });
    expect(run).toStrictEqual({
      code: 1,
      stderr: failed(
        `LOCALDECIDER_MODEL: model file ${dir}: it is not a file (a directory?); name the .gguf file itself`,
      ),
    });
  });

  it("is not looked for in front of a model server, where LOCALDECIDER_MODEL is not used", async () => {
    const decider = await new DeciderProcess({
      LOCALDECIDER_UPSTREAM: "http://127.0.0.1:1",
      LOCALDECIDER_MODEL: path.join(dir, "missing.gguf"),
    }).start();
    await decider.stop();
    expect(decider.lines.some((l) => l.message === "decider listening")).toBe(true);
  });

  it("stops the start on an HF_ENDPOINT that is not an http(s) URL, naming it", async () => {
    const run = await startFailing({ HF_ENDPOINT: "ftp://mirror.example" });
    expect(run).toStrictEqual({
      code: 1,
      stderr: failed(
        'HF_ENDPOINT "ftp://mirror.example" must be an http(s) URL without credentials (a Hugging Face mirror, e.g. https://hf-mirror.example); HF_TOKEN is its token',
      ),
    });
  });
});

function embeddedFor(source: ModelSource, env: NodeJS.ProcessEnv, logger = capturingLogger("silly")) {
  return new EmbeddedUpstream({
    source,
    modelsDir: dir,
    sha256: HASH,
    engine: { gpu: "cpu", sequences: 1, contextSize: 1024, threads: 1 },
    logger: logger.logger,
    download: { ...fast, env },
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

const HF_URI = "hf:acme/tiny-GGUF/tiny.gguf";
const HF_PATH = "/acme/tiny-GGUF/resolve/main/tiny.gguf";

describe("hf: URIs with HF_ENDPOINT and HF_TOKEN", () => {
  it("are fetched from the mirror HF_ENDPOINT names (a path under it too), with HF_TOKEN as a bearer", () => {
    const env = { HF_ENDPOINT: "https://mirror.example/hf/", HF_TOKEN: TOKEN };
    expect(parseModelSource(HF_URI, dir, env)).toStrictEqual({
      kind: "download",
      uri: HF_URI,
      url: `https://mirror.example/hf${HF_PATH}`,
      recorded: `https://mirror.example/hf${HF_PATH}`,
      authorization: `Bearer ${TOKEN}`,
      cachePath: path.join("mirror.example", "hf", "acme", "tiny-GGUF", "resolve", "main", "tiny.gguf"),
    });
    expect(parseModelSource(HF_URI, dir, {})).toMatchObject({ url: `https://huggingface.co${HF_PATH}` });
    expect(parseModelSource(HF_URI, dir, {})).not.toHaveProperty("authorization");
    expect(() => parseModelSource(HF_URI, dir, { HF_ENDPOINT: "https://u:p@mirror.example" })).toThrow(
      'HF_ENDPOINT "https://mirror.example" must be an http(s) URL without credentials',
    );
  });

  it("download from a mirror on loopback with the token, which goes to the mirror only and into no log line", async () => {
    const storage = new ModelFileServer();
    await storage.start();
    try {
      // The mirror redirects to its storage host, as the hub does: the token must not follow.
      server.redirect(HF_PATH, `${storage.url}/blob/tiny.gguf`, { "x-linked-size": String(model.length) });
      storage.serve("/blob/tiny.gguf", { bytes: model });
      const logger = capturingLogger("silly");
      const source = parseModelSource(HF_URI, dir, { HF_ENDPOINT: server.url, HF_TOKEN: TOKEN });
      expect(await startOnce(embeddedFor(source, {}, logger))).toBe("ready");
      expect(server.requests.map((r) => [r.path, r.authorization])).toStrictEqual([[HF_PATH, `Bearer ${TOKEN}`]]);
      expect(storage.requests.map((r) => [r.path, r.authorization])).toStrictEqual([["/blob/tiny.gguf", undefined]]);
      expect(JSON.stringify(logger.lines)).not.toContain(TOKEN);
      expect(fs.existsSync(path.join(dir, source.kind === "download" ? source.cachePath : ""))).toBe(true);
    } finally {
      await storage.stop();
    }
  });

  it("a hub that refuses the file without a token says HF_TOKEN is what it needs", async () => {
    server.serve(HF_PATH, { bytes: model, authorization: `Bearer ${TOKEN}` });
    const source = parseModelSource(HF_URI, dir, { HF_ENDPOINT: server.url });
    expect(await startOnce(embeddedFor(source, {}))).toBe(
      `model download failed: ${HF_URI}: HTTP 401 Unauthorized. The hub refused it: a gated or private repository needs HF_TOKEN (a Hugging Face access token)`,
    );
  });

  it("a hub that cannot be reached says what to do instead: a local file, a model server, a mirror or a proxy", async () => {
    const port = await freePort();
    const source = parseModelSource(HF_URI, dir, { HF_ENDPOINT: `http://127.0.0.1:${port}` });
    const text = await startOnce(embeddedFor(source, {}));
    expect(text).toMatch(new RegExp(`^model download failed: ${HF_URI}: .*ECONNREFUSED`));
    expect(text).toContain(
      `. 127.0.0.1:${port} cannot be reached from here: put the model file on this machine and set LOCALDECIDER_MODEL to its path, ` +
        "set LOCALDECIDER_UPSTREAM to a model server, set HF_ENDPOINT to a Hugging Face mirror, " +
        "or set HTTPS_PROXY to the proxy this machine reaches the internet through",
    );
  });
});

describe("downloads through a proxy", () => {
  let proxy: ConnectProxy;
  afterEach(async () => {
    await proxy.stop();
  });

  it("go to HTTPS_PROXY with CONNECT for an https URL (the name resolved by the proxy, never here); a refusal is named", async () => {
    proxy = new ConnectProxy();
    proxy.refuse = 403;
    await proxy.start();
    const source = parseModelSource("https://models.invalid/tiny.gguf", dir, {});
    const text = await startOnce(embeddedFor(source, { HTTPS_PROXY: proxy.url }));
    expect(proxy.connects).toStrictEqual(["models.invalid:443"]);
    expect(text).toMatch(/^model download failed: https:\/\/models\.invalid\/tiny\.gguf: .*403/);
    expect(text).toContain("models.invalid cannot be reached from here (through the proxy in HTTPS_PROXY)");
  });

  it("download whole through HTTP_PROXY's CONNECT tunnel for an http URL", async () => {
    server.serve("/tiny.gguf", { bytes: model });
    proxy = new ConnectProxy({ host: "127.0.0.1", port: Number(new URL(server.url).port) });
    await proxy.start();
    const source = parseModelSource("http://models.invalid/tiny.gguf", dir, {});
    expect(await startOnce(embeddedFor(source, { http_proxy: proxy.url }))).toBe("ready");
    expect(proxy.connects).toStrictEqual(["models.invalid:80"]);
    expect(server.requests.map((r) => r.path)).toStrictEqual(["/tiny.gguf"]);
  });

  it("go straight to a host NO_PROXY lists", async () => {
    server.serve("/tiny.gguf", { bytes: model });
    proxy = new ConnectProxy();
    await proxy.start();
    const source = parseModelSource(`${server.url}/tiny.gguf`, dir, {});
    const env = { HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url, NO_PROXY: "localhost,127.0.0.1" };
    expect(await startOnce(embeddedFor(source, env))).toBe("ready");
    expect(proxy.connects).toStrictEqual([]);
    expect(server.requests.map((r) => r.path)).toStrictEqual(["/tiny.gguf"]);
  });
});
