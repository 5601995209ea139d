import { createLocalJWKSet, errors, type JSONWebKeySet, type JWTVerifyGetKey } from "jose";

/**
 * The provider's JSON Web Key Set, fetched by the service itself and handed to jose as a local set.
 *
 * jose's createRemoteJWKSet (used before) times out the wait for the response headers only: a key server that
 * sent its headers and then stalled the body left the fetch pending for good, and since concurrent requests
 * share the one fetch, every later sign-in waited on it too, even after the server recovered. Here one
 * deadline covers the whole fetch (connect, headers and body), the body is read with a byte cap, and the
 * shared fetch is dropped as soon as it settles, so the next request after a failure fetches again.
 *
 * What jose's remote set did is kept: fetched on first use, shared by concurrent requests, kept for
 * `cacheMaxAgeMs` and then fetched again on the next request (no stale set is served), refetched for a `kid`
 * the set lacks at most once per `cooldownMs` after the last successful fetch; a failed fetch starts no
 * cooldown.
 */

export interface KeySetOptions {
  url: URL;
  /** One deadline for the whole fetch: connecting, the headers and the body. */
  timeoutMs: number;
  /** A body longer than this (declared or received) fails the fetch. */
  maxBytes: number;
  /** No refetch for an unknown `kid` sooner than this after the last successful fetch. */
  cooldownMs: number;
  /** A set older than this is fetched again on the next request. */
  cacheMaxAgeMs: number;
}

/** The key set could not be fetched or is not a key set: the provider's fault, not the token's. */
export class KeySetUnavailable extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(`JSON Web Key Set unavailable: ${message}`, options);
    this.name = "KeySetUnavailable";
  }
}

/** The body as UTF-8 text, refused once it grows past `maxBytes`; the fetch's deadline aborts the reads. */
async function readCapped(body: ReadableStream<Uint8Array>, maxBytes: number): Promise<string> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    received += value.byteLength;
    if (received > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw new KeySetUnavailable(`the body is over ${maxBytes} bytes`);
    }
    chunks.push(value);
  }
  return new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks));
}

/** What went wrong, for the log. Duck-typed: fetch's errors may come from another realm (DOMException, undici). */
function reason(err: unknown): string {
  const { name, message, cause } = (typeof err === "object" && err !== null ? err : {}) as Record<string, unknown>;
  if (name === "TimeoutError") return "no complete answer within the deadline";
  const detail = typeof cause === "object" && cause !== null && "message" in cause ? `: ${String(cause.message)}` : "";
  return typeof message === "string" ? `${message}${detail}` : String(err);
}

/** One fetch of the set, settled (resolved or rejected) within `timeoutMs` whatever the server does. */
export async function fetchKeySet(
  options: Pick<KeySetOptions, "url" | "timeoutMs" | "maxBytes">,
): Promise<JSONWebKeySet> {
  const signal = AbortSignal.timeout(options.timeoutMs);
  let text: string;
  try {
    // No redirects: the configured URL was checked (https, or http to loopback) and a redirect could leave it.
    const response = await fetch(options.url, {
      signal,
      redirect: "error",
      headers: { accept: "application/jwk-set+json, application/json" },
    });
    if (response.status !== 200) {
      await response.body?.cancel().catch(() => undefined);
      throw new KeySetUnavailable(`the server answered ${response.status}`);
    }
    const declared = Number(response.headers.get("content-length") ?? Number.NaN);
    if (declared > options.maxBytes) {
      await response.body?.cancel().catch(() => undefined);
      throw new KeySetUnavailable(`the body declares ${declared} bytes, over ${options.maxBytes}`);
    }
    text = response.body === null ? "" : await readCapped(response.body, options.maxBytes);
  } catch (err) {
    if (err instanceof KeySetUnavailable) throw err;
    throw new KeySetUnavailable(reason(signal.aborted ? signal.reason : err), { cause: err });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new KeySetUnavailable("the body is not JSON", { cause: err });
  }
  return json as JSONWebKeySet;
}

/** The key lookup jwtVerify calls, over the set as last fetched. */
export class RemoteKeySet {
  private local: JWTVerifyGetKey | undefined;
  /** When the last successful fetch finished (ms since the epoch). */
  private fetchedAt = Number.NEGATIVE_INFINITY;
  /** The fetch in flight, shared by every request that needs it; undefined again once it settles. */
  private pending: Promise<JWTVerifyGetKey> | undefined;

  constructor(private readonly options: KeySetOptions) {}

  /** For jwtVerify: the key for the token's header, fetching or refetching the set as described above. */
  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    const fresh = this.local !== undefined && Date.now() - this.fetchedAt < this.options.cacheMaxAgeMs;
    const local = fresh && this.local !== undefined ? this.local : await this.reload();
    try {
      return await local(header, token);
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey) || Date.now() - this.fetchedAt < this.options.cooldownMs) {
        throw err;
      }
      // A kid the set lacks, past the cooldown: the provider may have rotated; ask once more.
      return (await this.reload())(header, token);
    }
  };

  private reload(): Promise<JWTVerifyGetKey> {
    this.pending ??= fetchKeySet(this.options)
      .then((set) => {
        let local: JWTVerifyGetKey;
        try {
          local = createLocalJWKSet(set);
        } catch (err) {
          throw new KeySetUnavailable("the body is not a key set", { cause: err });
        }
        this.local = local;
        this.fetchedAt = Date.now();
        return local;
      })
      .finally(() => {
        this.pending = undefined;
      });
    return this.pending;
  }
}
