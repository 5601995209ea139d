import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import { gzipSync } from "node:zlib";
import { closeAbruptly, listenOnLoopback } from "../loopback-server";

/** How the model server answers one path. */
export interface ServedFile {
  bytes: Buffer;
  /** Sent as Hugging Face sends it (X-Linked-ETag on a redirect), when set. */
  linkedSha256?: string;
  /** Cut the connection after this many bytes of the body, for the first `cuts` requests. */
  cutAfter?: number;
  cuts?: number;
  /** Stop after this many bytes of the body until `release()` (a slow download to watch). */
  holdAfter?: number;
  /** Answer 401 unless the request carries exactly this Authorization header. */
  authorization?: string;
  /** Send the body gzip-encoded: when the client accepts gzip, or always. */
  gzip?: "when-asked" | "always";
  /** No Content-Length: the body ends where the server closes the connection (so a cut looks like an end). */
  noLength?: boolean;
}

/** A redirect this server answers with: where to, and the headers that come with it (X-Linked-ETag…). */
interface Redirect {
  location: string;
  headers: Record<string, string>;
}

/**
 * A loopback HTTP (or HTTPS) server that serves model files as a hub does: Range requests (206 with
 * Content-Range, 416 past the end), ETag, a redirect that carries X-Linked-Size and X-Linked-ETag, 404 for
 * anything else; redirects to anywhere on demand; and faults on demand (a cut connection, a held body, gzip,
 * no length). It records every request's Range, Authorization and Accept-Encoding headers.
 */
export class ModelFileServer {
  readonly requests: {
    path: string;
    /** The query as sent (`?…`), or "". */
    query: string;
    range: string | undefined;
    authorization: string | undefined;
    acceptEncoding: string | undefined;
  }[] = [];
  private readonly files = new Map<string, ServedFile>();
  private readonly redirects = new Map<string, Redirect>();
  private readonly held: (() => void)[] = [];
  private releasedAll = false;
  private server: Server | undefined;
  url = "";

  /** With `tls` (a key and certificate in PEM), an HTTPS server. */
  constructor(private readonly tls?: { key: string; cert: string }) {}

  serve(path: string, file: ServedFile): void {
    this.files.set(path, file);
  }

  /** `path` answers 302 to `location`, with `headers`. */
  redirect(path: string, location: string, headers: Record<string, string> = {}): void {
    this.redirects.set(path, { location, headers });
  }

  /** Lets every held body go on. */
  release(): void {
    this.releasedAll = true;
    for (const go of this.held.splice(0)) go();
  }

  async start(): Promise<string> {
    const handler = (req: IncomingMessage, res: ServerResponse) => this.handle(req, res);
    this.server = this.tls === undefined ? createServer(handler) : createTlsServer(this.tls, handler);
    const port = await listenOnLoopback(this.server);
    const scheme = this.tls === undefined ? "http" : "https";
    this.url = `${scheme}://127.0.0.1:${port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.release();
    await closeAbruptly(this.server);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? "/", "http://x");
    this.requests.push({
      path: url.pathname,
      query: url.search,
      range: req.headers.range,
      authorization: req.headers.authorization,
      acceptEncoding: req.headers["accept-encoding"],
    });
    const redirect = this.redirects.get(url.pathname);
    if (redirect !== undefined)
      return void res.writeHead(302, { location: redirect.location, ...redirect.headers }).end();
    if (url.pathname.startsWith("/resolve/")) {
      // The hub's redirect: size and SHA-256 stated here, the bytes served elsewhere.
      const target = url.pathname.slice("/resolve".length);
      const file = this.files.get(target);
      if (file === undefined) return void res.writeHead(404).end("Entry not found");
      res.writeHead(302, {
        location: target,
        "x-linked-size": String(file.bytes.length),
        ...(file.linkedSha256 === undefined ? {} : { "x-linked-etag": `"${file.linkedSha256}"` }),
      });
      return void res.end();
    }
    const file = this.files.get(url.pathname);
    if (file === undefined) return void res.writeHead(404, "Not Found").end("no such model");
    if (file.authorization !== undefined && req.headers.authorization !== file.authorization) {
      return void res.writeHead(401, "Unauthorized", { "www-authenticate": "Basic" }).end();
    }
    const etag = `"${createHash("sha256").update(file.bytes).digest("hex").slice(0, 16)}"`;
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? "");
    const start = range === null ? 0 : Number(range[1]);
    if (start >= file.bytes.length && range !== null) {
      return void res.writeHead(416, { "content-range": `bytes */${file.bytes.length}` }).end();
    }
    const gzip =
      file.gzip === "always" || (file.gzip === "when-asked" && /gzip/.test(req.headers["accept-encoding"] ?? ""));
    const body = gzip ? gzipSync(file.bytes.subarray(start)) : file.bytes.subarray(start);
    if (file.noLength === true) {
      // Neither Content-Length nor chunked: the body is whatever comes before the connection closes.
      res.removeHeader("transfer-encoding");
      res.removeHeader("content-length");
    }
    res.writeHead(range === null ? 200 : 206, {
      ...(file.noLength === true ? {} : { "content-length": String(body.length) }),
      etag,
      ...(gzip ? { "content-encoding": "gzip" } : {}),
      ...(range === null ? {} : { "content-range": `bytes ${start}-${file.bytes.length - 1}/${file.bytes.length}` }),
    });
    if (file.cutAfter !== undefined && (file.cuts ?? 1) > 0) {
      file.cuts = (file.cuts ?? 1) - 1;
      const cut = body.subarray(0, file.cutAfter);
      // Without a length, the cut is a clean end of the body; with one, a connection torn down mid-body.
      if (file.noLength === true) return void res.end(cut);
      res.write(cut, () => res.destroy());
      return;
    }
    if (file.holdAfter !== undefined && !this.releasedAll) {
      res.write(body.subarray(0, file.holdAfter));
      this.held.push(() => res.end(body.subarray(file.holdAfter)));
      return;
    }
    res.end(body);
  }
}

export function sha256(bytes: Buffer): string {
  return createHash("sha256").update(bytes).digest("hex");
}

export function readModel(path: string): Buffer {
  return readFileSync(path);
}
