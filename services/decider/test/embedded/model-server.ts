import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

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
}

/**
 * A loopback HTTP server that serves model files as a hub does: Range requests (206 with Content-Range),
 * ETag, a redirect that carries X-Linked-Size and X-Linked-ETag, 404 for anything else; and faults on
 * demand (a cut connection, a held body). It records every request's Range header.
 */
export class ModelFileServer {
  readonly requests: { path: string; range: string | undefined }[] = [];
  private readonly files = new Map<string, ServedFile>();
  private readonly held: (() => void)[] = [];
  private releasedAll = false;
  private server: Server | undefined;
  url = "";

  serve(path: string, file: ServedFile): void {
    this.files.set(path, file);
  }

  /** Lets every held body go on. */
  release(): void {
    this.releasedAll = true;
    for (const go of this.held.splice(0)) go();
  }

  async start(): Promise<string> {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((resolve) => this.server?.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.release();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? "/", "http://x");
    this.requests.push({ path: url.pathname, range: req.headers.range });
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
    const etag = `"${createHash("sha256").update(file.bytes).digest("hex").slice(0, 16)}"`;
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? "");
    const start = range === null ? 0 : Number(range[1]);
    const body = file.bytes.subarray(start);
    res.writeHead(range === null ? 200 : 206, {
      "content-length": String(body.length),
      etag,
      ...(range === null ? {} : { "content-range": `bytes ${start}-${file.bytes.length - 1}/${file.bytes.length}` }),
    });
    if (file.cutAfter !== undefined && (file.cuts ?? 1) > 0) {
      file.cuts = (file.cuts ?? 1) - 1;
      res.write(body.subarray(0, file.cutAfter), () => res.destroy());
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
