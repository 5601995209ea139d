import fs from "node:fs";
import path from "node:path";
import type { Logger } from "@localdecider/service-kit";
import request from "supertest";
import { embeddedBackend } from "../../src/backend";
import { EmbeddedUpstream } from "../../src/engine/embedded-upstream";
import { type ModelSource, parseModelSource } from "../../src/engine/model-source";
import { capturingLogger, deciderOver, waitFor } from "../helpers";
import type { ModelFileServer } from "./model-server";
import { serverAndDirPerTest } from "./per-test-server";

/**
 * A signed model URL (`LOCALDECIDER_MODEL=https://…/model.gguf?X-Amz-Signature=…`): its query is a secret as
 * much as a password is. It is sent to the server that wants it, and shown nowhere: /ready, /v1/models, the
 * log and every error show the URL's scheme, host and path only. A real file server on loopback.
 */

const SIGNATURE = "f3a9c0ffee5e5ec2e7deadbeef0123456789abcdef0123456789abcdef012345";
const CREDENTIAL = "AKIAEXAMPLEKEYID%2F20261125%2Fus-east-1%2Fs3%2Faws4_request";
const PASSWORD = "s3cretpw";
const QUERY = `?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=${CREDENTIAL}&X-Amz-Signature=${SIGNATURE}`;
const SECRETS = [SIGNATURE, CREDENTIAL, decodeURIComponent(CREDENTIAL), "X-Amz", PASSWORD, "frag-secret"];

let server: ModelFileServer;
let dir: string;
serverAndDirPerTest("decider-signed-", (s, d) => {
  server = s;
  dir = d;
});

function engineFor(source: ModelSource, logger: Logger): EmbeddedUpstream {
  return new EmbeddedUpstream({
    source,
    modelsDir: dir,
    sha256: undefined,
    engine: { gpu: "cpu", sequences: 1, contextSize: 1024, threads: 1 },
    logger,
    download: { attempts: 1, backoffMs: 10 },
    progressBar: false,
  });
}

describe("a signed model URL (a secret in its query)", () => {
  it("after a failed download, /ready, /v1/models and every log line show scheme, host and path only", async () => {
    const port = new URL(server.url).port;
    const shown = `http://127.0.0.1:${port}/signed/m.gguf`;
    const capture = capturingLogger("silly");
    // Nothing is served at that path: the download fails with a 404 (final, not retried).
    const source = parseModelSource(`http://user:${PASSWORD}@127.0.0.1:${port}/signed/m.gguf${QUERY}#frag-secret`);
    const embedded = engineFor(source, capture.logger);
    const d = deciderOver(embeddedBackend(embedded, "m.gguf", capture.logger), {
      apiKey: "topkey",
      logger: capture.logger,
    });
    const bodies: string[] = [];
    try {
      await embedded.start();
      const ready = await request(d.app).get("/ready");
      expect({ status: ready.status, body: ready.body }).toStrictEqual({
        status: 503,
        body: { error: `model download failed: ${shown}: HTTP 404 Not Found`, code: "backend_not_ready" },
      });
      const models = await request(d.app).get("/v1/models").set("authorization", "Bearer topkey");
      expect(models.body.backend).toStrictEqual({
        kind: "embedded",
        source: shown,
        state: `model download failed: ${shown}: HTTP 404 Not Found`,
        phase: "failed",
      });
      const decision = await request(d.app)
        .post("/v1/systemone")
        .set("authorization", "Bearer topkey")
        .send({ model: "localdecider", state: "s", questions: { a: { type: "noul", instructions: "Is it so?" } } });
      expect(decision.status).toBe(503);
      bodies.push(ready.text, models.text, decision.text);
    } finally {
      await d.close();
      await embedded.close();
    }
    // The server did get the signed URL (without the fragment, which is never sent).
    expect(server.requests.map((r) => [r.path, r.query])).toStrictEqual([["/signed/m.gguf", QUERY]]);
    const logged = capture.lines.map((l) => JSON.stringify(l));
    expect(logged.some((l) => l.includes(shown))).toBe(true);
    for (const text of [...bodies, ...logged]) for (const secret of SECRETS) expect(text).not.toContain(secret);
  });

  it("a download in progress is fetched with the query, and writes neither it nor the password beside the model", async () => {
    const port = new URL(server.url).port;
    const bytes = Buffer.alloc(4096, 7);
    server.serve("/signed/m.gguf", { bytes, holdAfter: 1024 });
    const source = parseModelSource(`http://user:${PASSWORD}@127.0.0.1:${port}/signed/m.gguf${QUERY}`);
    const capture = capturingLogger("silly");
    const embedded = engineFor(source, capture.logger);
    try {
      void embedded.start();
      await waitFor(() => embedded.stateText === "downloading model (25 %)", "a quarter downloaded");
      const beside = fs
        .readdirSync(dir, { recursive: true, encoding: "utf8" })
        .filter((f) => f.endsWith(".json"))
        .map((f) => fs.readFileSync(path.join(dir, f), "utf8"));
      // The part's metadata names the source by the query's hash, so a resume still knows it is the same URL.
      expect(beside.map((text) => JSON.parse(text).url)).toStrictEqual([
        expect.stringMatching(new RegExp(`^http://127\\.0\\.0\\.1:${port}/signed/m\\.gguf\\?sha256=[0-9a-f]{64}$`)),
      ]);
      for (const text of beside) for (const secret of SECRETS) expect(text).not.toContain(secret);
    } finally {
      await embedded.close();
    }
    expect(server.requests.map((r) => [r.path, r.query])).toStrictEqual([["/signed/m.gguf", QUERY]]);
  });

  it("a boot error about the URL shows neither its credentials nor its query", () => {
    const refused = [
      `https://user:${PASSWORD}@models.example/${QUERY}`,
      `https://user:${PASSWORD}@models.example/m%zz.gguf${QUERY}`,
      `https://user:${PASSWORD}@models.example:99999/m.gguf${QUERY}`,
      `ftp://user:${PASSWORD}@models.example/m.gguf${QUERY}`,
      `https://user:pa?ss#${PASSWORD}@models.example/m.gguf${QUERY}`,
    ];
    const messages = refused.map((value) => {
      try {
        parseModelSource(value);
        return "parsed";
      } catch (err) {
        return (err as Error).message;
      }
    });
    expect(messages).toStrictEqual([
      `"https://models.example/" names no file`,
      `"https://models.example/m%zz.gguf" has a malformed percent-escape: "%" must be followed by two hexadecimal digits`,
      `"https://models.example:99999/m.gguf" is not a valid URL`,
      `"ftp://models.example/m.gguf": only a file path, an http(s) URL or an hf: URI can be loaded`,
      // A `?` in the password ends the authority early: the value does not parse, and shows neither part.
      `"https://models.example/m.gguf" is not a valid URL`,
    ]);
    for (const message of messages) for (const secret of SECRETS) expect(message).not.toContain(secret);
  });
});
