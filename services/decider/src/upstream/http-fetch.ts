import http from "node:http";
import https from "node:https";

/**
 * The `fetch` the `openai` client calls the model server with: node:http(s) over kept-alive connections
 * instead of the global fetch (undici's WHATWG fetch, whose request and response streams cost about
 * 0.3 ms of CPU per call here: 0.78 ms against 0.40 ms for the same call, one at a time, to a fake server
 * that answers at once). A decision makes one call per question, so that is most of what the decider
 * itself adds per call. It does what the client asks of a fetch and no more: method, headers, a string
 * or byte body, an abort signal; it follows no redirect and asks for no compression (a model server's API
 * does neither). Errors keep node's codes (ECONNREFUSED, ECONNRESET, "socket hang up") for the failure
 * policy to read.
 */
export function createHttpFetch(): typeof fetch {
  const send = createHttpRequest();
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, key) => {
      headers[key] = value;
    });
    const res = await send(url, {
      method: init.method ?? "GET",
      headers,
      body: bodyBytes(init.body),
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
}

/** One HTTP exchange as node:http gives it: the status, the headers, the whole body. */
export interface HttpAnswer {
  status: number;
  statusText: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export type HttpRequest = (
  url: URL,
  init: {
    method: string;
    headers: Record<string, string>;
    body?: Buffer | undefined;
    signal?: AbortSignal | undefined;
  },
) => Promise<HttpAnswer>;

/**
 * node:http(s) over kept-alive connections, without the WHATWG Request and Response around it: what
 * createHttpFetch wraps for the `openai` client, and what the native System One adapter calls directly (it
 * reads one JSON body and needs nothing more). Asks for no compression and follows no redirect; an abort
 * destroys the request with an AbortError.
 */
export function createHttpRequest(): HttpRequest {
  // Idle connections are closed before a server's own keep-alive timeout (llama-server: 5 s) would cut
  // them under a call; a call that meets one cut anyway is sent again by the upstream adapter.
  const agents = {
    "http:": new http.Agent({ keepAlive: true, timeout: 4000 }),
    "https:": new https.Agent({ keepAlive: true, timeout: 4000 }),
  };
  return (url, init) => {
    const protocol = url.protocol === "https:" ? "https:" : "http:";
    const headers: Record<string, string> = {};
    for (const [key, value] of Object.entries(init.headers)) if (key !== "accept-encoding") headers[key] = value;
    const { body, signal } = init;
    if (body !== undefined) headers["content-length"] = String(body.byteLength);
    return new Promise<HttpAnswer>((resolve, reject) => {
      if (signal?.aborted) return reject(abortError());
      const request = (protocol === "https:" ? https : http).request(
        url,
        { method: init.method, headers, agent: agents[protocol] },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
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
      function fail(err: Error): void {
        signal?.removeEventListener("abort", onAbort);
        reject(signal?.aborted ? abortError() : err);
      }
      function onAbort(): void {
        request.destroy(abortError());
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      request.on("error", fail);
      request.end(body);
    });
  };
}

function bodyBytes(body: RequestInit["body"]): Buffer | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string") return Buffer.from(body);
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  throw new Error("the model server's fetch sends only string or byte bodies");
}

function abortError(): Error {
  return new DOMException("This operation was aborted", "AbortError");
}
