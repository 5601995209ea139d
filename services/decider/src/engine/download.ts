import { once } from "node:events";
import fs from "node:fs";
import path from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { setTimeout as delay } from "node:timers/promises";
import { rootCauseMessage } from "../upstream/types";
import { hashFile, NO_FOLLOW, writeFileReplacing, writeRecord } from "./model-file";

export interface DownloadProgress {
  /** Bytes on disk so far, including what an earlier, interrupted download left. */
  received: number;
  /** Bytes in all, when the server says. */
  total: number | undefined;
  /** Over this attempt so far. */
  bytesPerSecond: number;
}

export interface DownloadOptions {
  /** Without credentials (they go in `authorization`). */
  url: string;
  /** How the files beside the download name its source (default `url`; without a signed URL's query). */
  recordAs?: string;
  /** Sent as the Authorization header to the URL's own origin only: dropped once a redirect leaves it. */
  authorization?: string;
  /**
   * The verified file ends here, replacing whatever was there, beside its record (model-file.ts); until then it
   * is `<dest>.part`, beside a `<dest>.part.json` that names its source.
   */
  dest: string;
  /** A pinned SHA-256 (hex); otherwise the one the hub states (Hugging Face's X-Linked-ETag), if any. */
  sha256?: string;
  signal?: AbortSignal;
  onProgress?: (progress: DownloadProgress) => void;
  /** Tries in all for failures that may pass (a cut connection, a 5xx); each resumes where the last stopped. */
  attempts?: number;
  /** Wait before the second try, doubled for each further one (at most 30 s). */
  backoffMs?: number;
  /** Told before each wait for another try: why the last one failed, and when the next one starts. */
  onRetry?: (retry: DownloadRetry) => void;
  /**
   * Where the proxy variables are read (default: the process's): HTTPS_PROXY for https URLs, HTTP_PROXY for
   * http ones, NO_PROXY for hosts to reach directly (either case, lower case first, as curl reads them).
   */
  env?: NodeJS.ProcessEnv;
}

export interface DownloadRetry {
  /** The try about to be made (2 for the first retry), and how many there are in all. */
  attempt: number;
  attempts: number;
  /** Why the last try failed. */
  reason: string;
  /** How long until the next try. */
  waitMs: number;
}

/**
 * Why a download failed; `final` when trying again cannot help (a 404, a file that fails its check);
 * `unreachable` when no answer came at all (no route, no name, refused, reset: the host, or the proxy).
 */
export class DownloadError extends Error {
  constructor(
    message: string,
    readonly final: boolean,
    readonly unreachable = false,
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
 * the GGUF magic, and only then is it renamed to `dest` and its SHA-256 recorded beside it. A download
 * whose size and SHA-256 are both unknown is refused: a body cut short could not be told from a whole one.
 */
export async function downloadFile(options: DownloadOptions): Promise<{ sha256: string }> {
  fs.mkdirSync(path.dirname(options.dest), { recursive: true });
  const attempts = options.attempts ?? 5;
  let wait = options.backoffMs ?? 1000;
  const http = await httpClientFor(options.env ?? process.env);
  try {
    for (let attempt = 1; ; attempt++) {
      try {
        const meta = await fetchPart(options, http.fetch);
        return await verifyAndKeep(options, meta);
      } catch (err) {
        if (options.signal?.aborted) throw options.signal.reason ?? err;
        const final = err instanceof DownloadError ? err.final : false;
        if (final || attempt >= attempts) {
          throw err instanceof DownloadError ? err : new DownloadError(rootCauseMessage(err), false);
        }
        const reason = err instanceof DownloadError ? err.message : rootCauseMessage(err);
        options.onRetry?.({ attempt: attempt + 1, attempts, reason, waitMs: wait });
        await delay(wait, undefined, { signal: options.signal });
        wait = Math.min(wait * 2, 30_000);
      }
    }
  } finally {
    await http.close();
  }
}

/**
 * Codes (anywhere in an error's cause chain) of a host or proxy that gave no answer: no route, no name,
 * refused, reset, timed out; UND_ERR_ABORTED is undici's for a proxy that refused the tunnel (a download's own
 * abort is told apart before). Not a refusal fetch makes itself (a "bad port"), nor a certificate error.
 */
const NO_ANSWER = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EAI_FAIL",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EHOSTDOWN",
  "ENETDOWN",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_SOCKET",
  "UND_ERR_ABORTED",
]);

function noAnswer(err: unknown): boolean {
  // Not `instanceof Error`: fetch's errors may come from another realm (Node's own undici, a test's vm).
  for (let e: unknown = err, depth = 0; typeof e === "object" && e !== null && depth < 10; depth++) {
    const { code, cause } = e as { code?: unknown; cause?: unknown };
    if (typeof code === "string" && NO_ANSWER.has(code)) return true;
    e = cause;
  }
  return false;
}

type Fetch = (url: URL, init: RequestInit) => Promise<Response>;

/**
 * The global fetch, or, when a proxy variable is set, undici's fetch through its EnvHttpProxyAgent (Node 20's
 * fetch reads no proxy variables): HTTPS_PROXY for https URLs (HTTP_PROXY when it is unset), HTTP_PROXY for
 * http ones, both through a CONNECT tunnel; NO_PROXY lists hosts reached directly. undici is loaded only then.
 */
async function httpClientFor(env: NodeJS.ProcessEnv): Promise<{ fetch: Fetch; close: () => Promise<void> }> {
  const read = (name: string) => {
    const value = env[name.toLowerCase()] ?? env[name];
    return value === undefined || value === "" ? undefined : value;
  };
  const httpProxy = read("HTTP_PROXY");
  const httpsProxy = read("HTTPS_PROXY");
  if (httpProxy === undefined && httpsProxy === undefined) {
    return { fetch: (url, init) => fetch(url, init), close: async () => undefined };
  }
  const undici = await import("undici");
  // From `env` alone ("" stops undici from reading the process's own); as undici has it, an https URL goes
  // through HTTP_PROXY when HTTPS_PROXY is unset.
  const dispatcher = new undici.EnvHttpProxyAgent({
    httpProxy: httpProxy ?? "",
    httpsProxy: httpsProxy ?? "",
    noProxy: read("NO_PROXY") ?? "",
  });
  return {
    fetch: (url, init) =>
      undici.fetch(url, {
        ...(init as Parameters<typeof undici.fetch>[1]),
        dispatcher,
      }) as unknown as Promise<Response>,
    close: () => dispatcher.close(),
  };
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

/** Size of the regular file at `file`, 0 when there is none; anything else there (a symlink) is removed, never followed. */
function partSize(file: string): number {
  let stat: fs.Stats;
  try {
    stat = fs.lstatSync(file);
  } catch {
    return 0;
  }
  if (stat.isFile()) return stat.size;
  fs.rmSync(file, { force: true });
  return 0;
}

/** One attempt: resumes `<dest>.part` where it stops and appends until the server's body ends. */
async function fetchPart(options: DownloadOptions, fetch: Fetch): Promise<PartMeta> {
  const { part, meta: metaFile } = partPaths(options.dest);
  let meta = readMeta(metaFile);
  const source = options.recordAs ?? options.url;
  if (meta?.url !== source) {
    fs.rmSync(part, { force: true });
    meta = { url: source };
  }
  const have = partSize(part);
  if (have > 0 && meta.total !== undefined && have === meta.total) return meta;
  // Identity: the sizes, the resume offsets and the hash are all of the file's own bytes, never of a gzip of them.
  const headers: Record<string, string> = { "Accept-Encoding": "identity" };
  if (have > 0) {
    headers.Range = `bytes=${have}-`;
    if (meta.validator !== undefined) headers["If-Range"] = meta.validator;
  }
  const { response, stated } = await follow(options, headers, fetch);
  const fail = async (message: string, final: boolean): Promise<never> => {
    await response.body?.cancel();
    throw new DownloadError(message, final);
  };
  if (response.status === 416 && have > 0) {
    // Nothing to resume at that offset (the part is longer than the file, or the file changed): start over.
    await response.body?.cancel();
    fs.rmSync(part, { force: true });
    return fetchPart(options, fetch);
  }
  let start = 0;
  let total: number | undefined;
  if (response.status === 206) {
    const range = /^bytes (\d+)-\d+\/(\d+|\*)$/.exec(response.headers.get("content-range") ?? "");
    if (range === null || Number(range[1]) !== have) {
      fs.rmSync(part, { force: true });
      return fail("the server resumed at another offset than asked; starting again", false);
    }
    start = have;
    total = range[2] === "*" ? meta.total : Number(range[2]);
  } else if (response.status === 200) {
    const length = response.headers.get("content-length");
    total = length === null ? undefined : Number(length);
  } else {
    const final = response.status < 500 && response.status !== 408 && response.status !== 429;
    return fail(`HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ""}`, final);
  }
  const encoding = response.headers.get("content-encoding");
  if (encoding !== null && encoding.toLowerCase() !== "identity") {
    return fail(`the server sent the file ${encoding}-encoded although asked for it as it is`, true);
  }
  if (stated.size !== undefined) {
    if (total !== undefined && total !== stated.size) {
      return fail(`the server sends a file of ${total} bytes where the hub states ${stated.size}`, true);
    }
    total = stated.size;
  }
  meta.total = total;
  meta.sha256 = options.sha256 ?? stated.sha256 ?? meta.sha256;
  if (meta.total === undefined && meta.sha256 === undefined) {
    return fail(
      "the server states neither the file's size nor its SHA-256, so a download cut short could not be told from a whole one: set LOCALDECIDER_MODEL_SHA256",
      true,
    );
  }
  meta.validator = response.headers.get("etag") ?? response.headers.get("last-modified") ?? meta.validator;
  writeFileReplacing(metaFile, JSON.stringify(meta));
  if (response.body === null) throw new DownloadError("the server sent no body", false);
  const { O_WRONLY, O_CREAT, O_APPEND, O_TRUNC } = fs.constants;
  // Never through a symlink put at the part's name (partSize removed one; this covers one put there since).
  let fd: number;
  try {
    fd = fs.openSync(part, O_WRONLY | O_CREAT | NO_FOLLOW | (start > 0 ? O_APPEND : O_TRUNC));
  } catch (err) {
    await response.body.cancel();
    throw err;
  }
  const out = fs.createWriteStream(part, { fd });
  let received = start;
  const began = performance.now();
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

/**
 * Follows redirects by hand. What the hub states about the file (Hugging Face: X-Linked-Size, X-Linked-ETag on
 * its redirect to the storage host) is read only from responses of the URL's own origin, as huggingface_hub
 * reads it (it follows only relative redirects for it): a later host cannot vouch for the bytes it serves.
 * The credentials go to that origin only, and a redirect from https to http is refused.
 */
async function follow(
  options: DownloadOptions,
  headers: Record<string, string>,
  fetch: Fetch,
): Promise<{ response: Response; stated: { size?: number; sha256?: string } }> {
  const stated: { size?: number; sha256?: string } = {};
  const origin = new URL(options.url).origin;
  let current = new URL(options.url);
  let onHub = true;
  for (let hop = 0; hop < 10; hop++) {
    const hopHeaders: Record<string, string> = { ...headers };
    if (onHub && options.authorization !== undefined) hopHeaders.Authorization = options.authorization;
    let response: Response;
    try {
      response = await fetch(current, {
        headers: hopHeaders,
        redirect: "manual",
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (err) {
      if (options.signal?.aborted) throw err;
      throw new DownloadError(rootCauseMessage(err), false, noAnswer(err));
    }
    if (onHub) {
      const size = response.headers.get("x-linked-size");
      if (size !== null && /^\d+$/.test(size)) stated.size = Number(size);
      const etag = response.headers
        .get("x-linked-etag")
        ?.replace(/^(W\/)?"|"$/g, "")
        .toLowerCase();
      if (etag !== undefined && SHA256.test(etag)) stated.sha256 = etag;
    }
    const location = response.headers.get("location");
    if (response.status >= 300 && response.status < 400 && location !== null) {
      await response.body?.cancel();
      // Messages name the next host only: a redirect's query may carry a signature.
      const next = URL.canParse(location, current.href) ? new URL(location, current) : undefined;
      if (next === undefined || !/^https?:$/.test(next.protocol)) {
        throw new DownloadError("the server redirected to an address that is not http(s)", true);
      }
      if (current.protocol === "https:" && next.protocol === "http:") {
        throw new DownloadError(`the server redirected from https to http (${next.host}); refused`, true);
      }
      if (next.username !== "" || next.password !== "") {
        throw new DownloadError(`the server redirected to an address with credentials (${next.host}); refused`, true);
      }
      if (next.origin !== origin) onHub = false;
      current = next;
      continue;
    }
    return { response, stated };
  }
  throw new DownloadError("too many redirects", true);
}

/**
 * The finished part: size, SHA-256 and GGUF magic checked, then renamed into place (over whatever was there:
 * rename replaces a symlink, never its target) and its SHA-256 recorded. A failed check deletes it.
 */
async function verifyAndKeep(options: DownloadOptions, meta: PartMeta): Promise<{ sha256: string }> {
  const { part, meta: metaFile } = partPaths(options.dest);
  const refuse = (reason: string): never => {
    fs.rmSync(part, { force: true });
    fs.rmSync(metaFile, { force: true });
    throw new DownloadError(`the downloaded file failed its check (${reason}); it was deleted`, true);
  };
  const size = fs.lstatSync(part).size;
  if (meta.total !== undefined && size !== meta.total) refuse(`${size} bytes, expected ${meta.total}`);
  // Hashed even without an expected value: the record of what was downloaded is what later starts check.
  const { sha256: actual } = await hashFile(part, true);
  if (meta.sha256 !== undefined && actual !== meta.sha256) refuse(`SHA-256 ${actual}, expected ${meta.sha256}`);
  const head = Buffer.alloc(4);
  const fd = fs.openSync(part, fs.constants.O_RDONLY | NO_FOLLOW);
  try {
    fs.readSync(fd, head, 0, 4, 0);
  } finally {
    fs.closeSync(fd);
  }
  if (!head.equals(GGUF_MAGIC)) refuse("not a GGUF file");
  fs.renameSync(part, options.dest);
  writeRecord(options.dest, options.recordAs ?? options.url, actual);
  fs.rmSync(metaFile, { force: true });
  return { sha256: actual };
}
