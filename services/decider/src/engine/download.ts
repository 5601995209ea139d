import { createHash } from "node:crypto";
import { once } from "node:events";
import fs from "node:fs";
import path from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { setTimeout as delay } from "node:timers/promises";
import { rootCauseMessage } from "../upstream/types";

export interface DownloadProgress {
  /** Bytes on disk so far, including what an earlier, interrupted download left. */
  received: number;
  /** Bytes in all, when the server says. */
  total: number | undefined;
  /** Over this attempt so far. */
  bytesPerSecond: number;
}

export interface DownloadOptions {
  url: string;
  /** The verified file ends here; until then it is `<dest>.part`, beside a `<dest>.part.json` that names its source. */
  dest: string;
  /** A pinned SHA-256 (hex); otherwise the one the server states (Hugging Face's X-Linked-ETag), if any. */
  sha256?: string;
  signal?: AbortSignal;
  onProgress?: (progress: DownloadProgress) => void;
  /** Tries in all for failures that may pass (a cut connection, a 5xx); each resumes where the last stopped. */
  attempts?: number;
  /** Wait before the second try, doubled for each further one (at most 30 s). */
  backoffMs?: number;
}

/** Why a download failed; `final` when trying again cannot help (a 404, a file that fails its check). */
export class DownloadError extends Error {
  constructor(
    message: string,
    readonly final: boolean,
  ) {
    super(message);
    this.name = "DownloadError";
  }
}

/** What `<dest>.part.json` records, so a resumed download appends only to bytes of the same file. */
interface PartMeta {
  url: string;
  total?: number;
  sha256?: string;
  /** The server's ETag or Last-Modified, sent as If-Range: a changed file restarts from 0. */
  validator?: string;
}

const SHA256 = /^[0-9a-f]{64}$/;
const GGUF_MAGIC = Buffer.from("GGUF", "ascii");

/**
 * Downloads a model file so that it is only ever used whole and checked: bytes go to `<dest>.part`; a cut
 * connection or a 5xx is retried with a Range request that resumes where it stopped (also across
 * restarts); the finished file must have the announced size, the expected SHA-256 when one is known, and
 * the GGUF magic, and only then is it renamed to `dest`. An existing `dest` is taken as it is.
 */
export async function downloadFile(options: DownloadOptions): Promise<void> {
  if (fs.existsSync(options.dest)) return;
  fs.mkdirSync(path.dirname(options.dest), { recursive: true });
  const attempts = options.attempts ?? 5;
  let wait = options.backoffMs ?? 1000;
  for (let attempt = 1; ; attempt++) {
    try {
      const meta = await fetchPart(options);
      await verifyAndKeep(options, meta);
      return;
    } catch (err) {
      if (options.signal?.aborted) throw options.signal.reason ?? err;
      const final = err instanceof DownloadError ? err.final : false;
      if (final || attempt >= attempts) {
        throw err instanceof DownloadError ? err : new DownloadError(rootCauseMessage(err), false);
      }
      await delay(wait, undefined, { signal: options.signal });
      wait = Math.min(wait * 2, 30_000);
    }
  }
}

function partPaths(dest: string): { part: string; meta: string } {
  return { part: `${dest}.part`, meta: `${dest}.part.json` };
}

function readMeta(file: string): PartMeta | undefined {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8")) as PartMeta;
  } catch {
    return undefined;
  }
}

/** One attempt: resumes `<dest>.part` where it stops and appends until the server's body ends. */
async function fetchPart(options: DownloadOptions): Promise<PartMeta> {
  const { part, meta: metaFile } = partPaths(options.dest);
  let meta = readMeta(metaFile);
  if (meta?.url !== options.url) {
    fs.rmSync(part, { force: true });
    meta = { url: options.url };
  }
  const have = fs.existsSync(part) ? fs.statSync(part).size : 0;
  if (have > 0 && meta.total !== undefined && have === meta.total) return meta;
  const headers: Record<string, string> = {};
  if (have > 0) {
    headers.Range = `bytes=${have}-`;
    if (meta.validator !== undefined) headers["If-Range"] = meta.validator;
  }
  const { response, stated } = await follow(options.url, headers, options.signal);
  let start = 0;
  if (response.status === 206) {
    const range = /^bytes (\d+)-\d+\/(\d+|\*)$/.exec(response.headers.get("content-range") ?? "");
    if (range === null || Number(range[1]) !== have) {
      await response.body?.cancel();
      fs.rmSync(part, { force: true });
      throw new DownloadError("the server resumed at another offset than asked; starting again", false);
    }
    start = have;
    if (range[2] !== "*") meta.total = Number(range[2]);
  } else if (response.status === 200) {
    const length = response.headers.get("content-length");
    meta.total = length === null ? stated.size : Number(length);
  } else {
    await response.body?.cancel();
    const final = response.status < 500 && response.status !== 408 && response.status !== 429;
    throw new DownloadError(`HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ""}`, final);
  }
  meta.sha256 = options.sha256 ?? stated.sha256 ?? meta.sha256;
  meta.validator = response.headers.get("etag") ?? response.headers.get("last-modified") ?? meta.validator;
  fs.writeFileSync(metaFile, JSON.stringify(meta));
  if (response.body === null) throw new DownloadError("the server sent no body", false);
  const out = fs.createWriteStream(part, start > 0 ? { flags: "a" } : { flags: "w" });
  let received = start;
  const began = performance.now();
  const total = meta.total;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      received += chunk.length;
      const seconds = (performance.now() - began) / 1000;
      options.onProgress?.({ received, total, bytesPerSecond: seconds > 0 ? (received - start) / seconds : 0 });
      callback(null, chunk);
    },
  });
  try {
    await pipeline(
      Readable.fromWeb(response.body as WebReadableStream<Uint8Array>, { signal: options.signal }),
      counter,
      out,
    );
  } finally {
    // What is on disk when the file is closed is where the next attempt resumes: never measure it earlier.
    if (!out.closed) await once(out, "close");
  }
  if (total !== undefined && received < total) {
    throw new DownloadError(`the connection ended after ${received} of ${total} bytes`, false);
  }
  return meta;
}

/** Follows redirects by hand, keeping what a hub states on the way (Hugging Face: X-Linked-Size, X-Linked-ETag). */
async function follow(
  url: string,
  headers: Record<string, string>,
  signal: AbortSignal | undefined,
): Promise<{ response: Response; stated: { size?: number; sha256?: string } }> {
  const stated: { size?: number; sha256?: string } = {};
  let current = url;
  for (let hop = 0; hop < 10; hop++) {
    let response: Response;
    try {
      response = await fetch(current, { headers, redirect: "manual", ...(signal ? { signal } : {}) });
    } catch (err) {
      throw new DownloadError(rootCauseMessage(err), false);
    }
    const size = response.headers.get("x-linked-size");
    if (size !== null && /^\d+$/.test(size)) stated.size = Number(size);
    const etag = response.headers
      .get("x-linked-etag")
      ?.replace(/^(W\/)?"|"$/g, "")
      .toLowerCase();
    if (etag !== undefined && SHA256.test(etag)) stated.sha256 = etag;
    const location = response.headers.get("location");
    if (response.status >= 300 && response.status < 400 && location !== null) {
      await response.body?.cancel();
      current = new URL(location, current).toString();
      continue;
    }
    return { response, stated };
  }
  throw new DownloadError("too many redirects", true);
}

/** The finished part: size, SHA-256 and GGUF magic checked, then renamed into place. A failed check deletes it. */
async function verifyAndKeep(options: DownloadOptions, meta: PartMeta): Promise<void> {
  const { part, meta: metaFile } = partPaths(options.dest);
  const refuse = (reason: string): never => {
    fs.rmSync(part, { force: true });
    fs.rmSync(metaFile, { force: true });
    throw new DownloadError(`the downloaded file failed its check (${reason}); it was deleted`, true);
  };
  const size = fs.statSync(part).size;
  if (meta.total !== undefined && size !== meta.total) refuse(`${size} bytes, expected ${meta.total}`);
  if (meta.sha256 !== undefined) {
    const hash = createHash("sha256");
    await pipeline(fs.createReadStream(part), hash);
    const actual = hash.digest("hex");
    if (actual !== meta.sha256) refuse(`SHA-256 ${actual}, expected ${meta.sha256}`);
  }
  const head = Buffer.alloc(4);
  const fd = fs.openSync(part, "r");
  try {
    fs.readSync(fd, head, 0, 4, 0);
  } finally {
    fs.closeSync(fd);
  }
  if (!head.equals(GGUF_MAGIC)) refuse("not a GGUF file");
  fs.renameSync(part, options.dest);
  fs.rmSync(metaFile, { force: true });
}
