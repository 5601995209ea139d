import http from "node:http";
import https from "node:https";
import { BodyTooLargeError, DEFAULT_UPSTREAM_MAX_BODY } from "./body-limit";

/** A model server's answer as node:http gives it: no WHATWG Response, Headers or stream built around it. */
export interface RawResponse {
  status: number;
  statusText: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export interface RawRequest {
  method: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
  signal?: AbortSignal | undefined;
}

/** One call over kept-alive connections: method, headers, a string or byte body, an abort signal. */
export type HttpRequest = (url: string | URL, init: RawRequest) => Promise<RawResponse>;

/**
 * The decider's calls to model servers, over one set of kept-alive connections (node:http(s)), in two
 * shapes: `fetch`, which the `openai` client calls (the global fetch, undici's WHATWG fetch, cost about
 * 0.3 ms of CPU more per call here: 0.78 ms against 0.40 ms for the same call, one at a time, to a fake
 * server that answers at once), and `request`, the same without the WHATWG Response around the answer
 * (its Headers and body stream cost another ~0.07 ms per call; llama.cpp's own endpoints use it). They do
 * what a model server's API needs and no more: no redirect followed, no compression asked for, and no answer
 * read past `maxBodyBytes` (LOCALDECIDER_UPSTREAM_MAX_BODY: the call is aborted with BodyTooLargeError, its
 * connection closed, and nothing past the cap held). Errors keep node's codes (ECONNREFUSED, ECONNRESET,
 * "socket hang up") for the failure policy to read.
 */
export function createHttpTransport(options: { maxBodyBytes?: number } = {}): {
  fetch: typeof fetch;
  request: HttpRequest;
} {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_UPSTREAM_MAX_BODY;
  // Idle connections are closed before a server's own keep-alive timeout (llama-server: 5 s) would cut
  // them under a call; a call that meets one cut anyway is sent again by the upstream adapter.
  const agents = {
    "http:": new http.Agent({ keepAlive: true, timeout: 4000 }),
    "https:": new https.Agent({ keepAlive: true, timeout: 4000 }),
  };
  const request: HttpRequest = (input, init) => {
    const url = new URL(input);
    const protocol = url.protocol === "https:" ? "https:" : "http:";
    const headers = { ...init.headers };
    const body = bodyBytes(init.body);
    if (body !== undefined) headers["content-length"] = String(body.byteLength);
    const signal = init.signal;
    return new Promise<RawResponse>((resolve, reject) => {
      if (signal?.aborted) return reject(abortError());
      const outgoing = (protocol === "https:" ? https : http).request(
        url,
        { method: init.method, headers, agent: agents[protocol] },
        (res) => {
          const chunks: Buffer[] = [];
          let received = 0;
          // A declared length past the cap is refused before a byte of the body is read.
          if (Number(res.headers["content-length"] ?? 0) > maxBodyBytes) return tooLarge(res);
          res.on("data", (chunk: Buffer) => {
            received += chunk.byteLength;
            if (received > maxBodyBytes) return tooLarge(res);
            chunks.push(chunk);
          });
          res.on("error", fail);
          res.on("end", () => {
            signal?.removeEventListener("abort", onAbort);
            resolve({
              status: res.statusCode ?? 502,
              statusText: res.statusMessage ?? "",
              headers: res.headers,
              body: Buffer.concat(chunks),
            });
          });
        },
      );
      /** Past the cap: the chunks read so far go with their listener, and the connection is closed (never reused). */
      function tooLarge(res: http.IncomingMessage): void {
        res.removeAllListeners("data");
        res.removeAllListeners("end");
        const err = new BodyTooLargeError(maxBodyBytes);
        res.destroy();
        outgoing.destroy();
        fail(err);
      }
      function fail(err: Error): void {
        signal?.removeEventListener("abort", onAbort);
        reject(signal?.aborted ? abortError() : err);
      }
      function onAbort(): void {
        outgoing.destroy(abortError());
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      outgoing.on("error", fail);
      outgoing.end(body);
    });
  };
  const fetchLike = (async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = typeof input === "string" || input instanceof URL ? input : input.url;
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, key) => {
      if (key !== "accept-encoding") headers[key] = value;
    });
    const res = await request(url, {
      method: init.method ?? "GET",
      headers,
      body: fetchBody(init.body),
      signal: init.signal ?? undefined,
    });
    const answer = new Headers();
    for (const [key, value] of Object.entries(res.headers)) {
      if (typeof value === "string") answer.set(key, value);
      else if (Array.isArray(value)) for (const v of value) answer.append(key, v);
    }
    // A body is not allowed with these statuses.
    const content = res.status === 204 || res.status === 304 ? null : res.body;
    return new Response(content, { status: res.status, statusText: res.statusText, headers: answer });
  }) as typeof fetch;
  return { fetch: fetchLike, request };
}

/** The `fetch` the `openai` client calls the model server with (see createHttpTransport). */
export function createHttpFetch(): typeof fetch {
  return createHttpTransport().fetch;
}

function fetchBody(body: RequestInit["body"]): string | Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string" || body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new Error("the model server's fetch sends only string or byte bodies");
}

function bodyBytes(body: string | Uint8Array | undefined): Buffer | undefined {
  if (body === undefined) return undefined;
  if (typeof body === "string") return Buffer.from(body);
  return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

function abortError(): Error {
  return new DOMException("This operation was aborted", "AbortError");
}
