import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { DownloadError, downloadFile } from "../../src/engine/download";
import { parseModelSource } from "../../src/engine/model-source";
import { ANSWER_MODEL } from "../engine/answer-model";
import { tinyModelPath } from "../engine/tiny-model";
import { ModelFileServer, readModel, sha256 } from "./model-server";

/**
 * What a download must refuse or get right whatever the servers on its way do: a later redirect hop vouching
 * for the bytes it serves, a body with no size and no hash, gzip, a part longer than the file, a symlink put at
 * the part's name, credentials sent beyond the URL's own origin (a downgrade to http: process.test.ts, where
 * the service can be told to trust a test certificate). Real servers on
 * loopback, real files in a temporary directory.
 */

jest.setTimeout(60_000);

const model = readModel(tinyModelPath());
const HASH = sha256(model);
/** Another valid GGUF: what an attacker's host would serve. */
const other = readModel(tinyModelPath(ANSWER_MODEL));
const fast = { attempts: 2, backoffMs: 10 };

let hub: ModelFileServer;
let cdn: ModelFileServer;
let dir: string;
beforeEach(async () => {
  hub = new ModelFileServer();
  cdn = new ModelFileServer();
  await hub.start();
  await cdn.start();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "decider-integrity-"));
});
afterEach(async () => {
  await hub.stop();
  await cdn.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const failure = (p: Promise<unknown>) =>
  p.then(
    () => "resolved",
    (e: unknown) => e,
  );

describe("downloadFile and the hops on its way", () => {
  it("takes the SHA-256 the hub states on its first response, not one a later host states: another GGUF is refused", async () => {
    hub.redirect("/m.gguf", `${cdn.url}/hop`, { "x-linked-etag": `"${HASH}"`, "x-linked-size": String(model.length) });
    // The storage host redirects once more and vouches for the file it serves: its word does not count.
    cdn.redirect("/hop", "/evil.gguf", {
      "x-linked-etag": `"${sha256(other)}"`,
      "x-linked-size": String(other.length),
    });
    cdn.serve("/evil.gguf", { bytes: other });
    const dest = path.join(dir, "m.gguf");
    const err = await failure(downloadFile({ url: `${hub.url}/m.gguf`, dest, ...fast }));
    expect(err).toBeInstanceOf(DownloadError);
    expect((err as Error).message).toBe(
      `the downloaded file failed its check (SHA-256 ${sha256(other)}, expected ${HASH}); it was deleted`,
    );
    expect(fs.existsSync(dest)).toBe(false);
  });

  it("refuses a body with neither a stated size nor a SHA-256: a cut one would look whole", async () => {
    // 5,000 bytes of the file and then a clean close, as the review saw it (they began with the GGUF magic).
    hub.serve("/m.gguf", { bytes: model, noLength: true, cutAfter: 5000, cuts: 1 });
    const dest = path.join(dir, "m.gguf");
    const err = await failure(downloadFile({ url: `${hub.url}/m.gguf`, dest, ...fast }));
    expect((err as Error).message).toBe(
      "the server states neither the file's size nor its SHA-256, so a download cut short could not be told from a whole one: set LOCALDECIDER_MODEL_SHA256",
    );
    expect(fs.readdirSync(dir)).toStrictEqual([]);
  });

  it("with a pinned SHA-256, a body without a length that is cut short is caught and the whole file is fetched again", async () => {
    hub.serve("/m.gguf", { bytes: model, noLength: true, cutAfter: 5000, cuts: 1 });
    const dest = path.join(dir, "m.gguf");
    const err = await failure(downloadFile({ url: `${hub.url}/m.gguf`, dest, sha256: HASH, attempts: 1 }));
    expect((err as Error).message).toMatch(/^the downloaded file failed its check \(SHA-256 [0-9a-f]{64}, expected/);
    await downloadFile({ url: `${hub.url}/m.gguf`, dest, sha256: HASH, attempts: 1 });
    expect(sha256(fs.readFileSync(dest))).toBe(HASH);
  });

  it("asks for the file as it is (Accept-Encoding: identity), so a server that gzips on request sends the plain bytes", async () => {
    hub.serve("/m.gguf", { bytes: model, gzip: "when-asked" });
    const dest = path.join(dir, "m.gguf");
    await downloadFile({ url: `${hub.url}/m.gguf`, dest, ...fast });
    expect(sha256(fs.readFileSync(dest))).toBe(HASH);
    expect(hub.requests.map((r) => r.acceptEncoding)).toStrictEqual(["identity"]);
  });

  it("refuses, at once, a server that gzips the file even so, naming the encoding", async () => {
    hub.serve("/m.gguf", { bytes: model, gzip: "always" });
    const err = await failure(downloadFile({ url: `${hub.url}/m.gguf`, dest: path.join(dir, "m.gguf"), ...fast }));
    expect((err as Error).message).toBe("the server sent the file gzip-encoded although asked for it as it is");
    expect(hub.requests).toHaveLength(1);
  });

  it("starts over when the server cannot resume the part (416): a part longer than the file is not a dead end", async () => {
    hub.serve("/m.gguf", { bytes: model });
    const dest = path.join(dir, "m.gguf");
    // What an interrupted download of a larger file at the same URL would have left.
    fs.writeFileSync(`${dest}.part`, Buffer.concat([model, Buffer.alloc(10)]));
    fs.writeFileSync(`${dest}.part.json`, JSON.stringify({ url: `${hub.url}/m.gguf` }));
    await downloadFile({ url: `${hub.url}/m.gguf`, dest, sha256: HASH, attempts: 1 });
    expect(sha256(fs.readFileSync(dest))).toBe(HASH);
    expect(hub.requests.map((r) => r.range)).toStrictEqual([`bytes=${model.length + 10}-`, undefined]);
  });

  it("never writes through a symlink put at the part's name: the file it points to is left as it was", async () => {
    hub.serve("/m.gguf", { bytes: model });
    const dest = path.join(dir, "models", "m.gguf");
    fs.mkdirSync(path.dirname(dest));
    const victim = path.join(dir, "victim.txt");
    fs.writeFileSync(victim, "keep me");
    fs.symlinkSync(victim, `${dest}.part`);
    fs.writeFileSync(`${dest}.part.json`, JSON.stringify({ url: `${hub.url}/m.gguf` }));
    await downloadFile({ url: `${hub.url}/m.gguf`, dest, sha256: HASH, attempts: 1 });
    expect(fs.readFileSync(victim, "utf8")).toBe("keep me");
    expect(sha256(fs.readFileSync(dest))).toBe(HASH);
    expect(hub.requests.map((r) => r.range)).toStrictEqual([undefined]);
  });

  it("sends a URL's credentials as basic auth to its own origin, and drops them on a redirect to another", async () => {
    const basic = `Basic ${Buffer.from("user:s3cretpw").toString("base64")}`;
    hub.serve("/private/m.gguf", { bytes: model, authorization: basic });
    hub.redirect("/private/moved.gguf", `${cdn.url}/m.gguf`, { "x-linked-etag": `"${HASH}"` });
    cdn.serve("/m.gguf", { bytes: model });
    const at = (file: string) =>
      parseModelSource(`http://user:s3cretpw@127.0.0.1:${new URL(hub.url).port}/private/${file}`);
    for (const file of ["m.gguf", "moved.gguf"]) {
      const source = at(file);
      if (source.kind !== "download") throw new Error("not a download");
      const { url, authorization } = source;
      await downloadFile({
        url,
        ...(authorization === undefined ? {} : { authorization }),
        dest: path.join(dir, file),
        ...fast,
      });
      expect(sha256(fs.readFileSync(path.join(dir, file)))).toBe(HASH);
    }
    expect(hub.requests.map((r) => r.authorization)).toStrictEqual([basic, basic]);
    expect(cdn.requests.map((r) => r.authorization)).toStrictEqual([undefined]);
  });
});
