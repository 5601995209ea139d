/**
 * The model server's address as configured, split into what may be shown and what must not: a URL with
 * credentials (`http://user:pass@host:8081`) is called without them, with the credentials sent as HTTP
 * basic auth instead (fetch and the `openai` client refuse URLs that carry credentials).
 */
export interface UpstreamAddress {
  /** `{upstream}/v1`, without credentials: what the clients call. */
  baseURL: string;
  /** The address without credentials, for /ready and the logs. */
  display: string;
  /** `Basic …` when the URL carried credentials. */
  basicAuth: string | undefined;
}

/** Most model servers one LOCALDECIDER_UPSTREAM may list. */
export const MAX_UPSTREAMS = 64;

/**
 * LOCALDECIDER_UPSTREAM as a list: addresses separated by commas (spaces around them ignored), or a text
 * saying what is wrong: an address that is not an http(s) URL, one listed twice, or too many. A comma in a
 * password must be written `%2C`, as in any URL.
 */
export function parseUpstreams(configured: string): { addresses: string[] } | { problem: string } {
  const addresses = configured.split(",").map((a) => a.trim());
  if (addresses.length > MAX_UPSTREAMS) return { problem: `lists more than ${MAX_UPSTREAMS} model servers` };
  const seen = new Set<string>();
  for (const [i, address] of addresses.entries()) {
    const which = addresses.length === 1 ? "" : ` (address ${i + 1} of ${addresses.length})`;
    if (!URL.canParse(address) || !/^https?:$/.test(new URL(address).protocol)) {
      return { problem: `must be an http:// or https:// URL, or several separated by commas${which}` };
    }
    const { display } = upstreamAddress(address);
    if (seen.has(display)) return { problem: `lists ${display} twice` };
    seen.add(display);
  }
  return { addresses };
}

export function upstreamAddress(configured: string): UpstreamAddress {
  const url = new URL(configured);
  const basicAuth = basicAuthOf(url);
  url.username = "";
  url.password = "";
  const display = url.toString().replace(/\/+$/, "");
  return { baseURL: upstreamBaseURL(display), display, basicAuth };
}

/** `Basic …` from a URL's credentials (percent-decoded, as a browser sends them), or undefined without any. */
export function basicAuthOf(url: URL): string | undefined {
  if (url.username === "" && url.password === "") return undefined;
  const pair = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
  return `Basic ${Buffer.from(pair).toString("base64")}`;
}

/** `{upstream}/v1` from an address given with or without a trailing slash or `/v1`. */
export function upstreamBaseURL(upstream: string): string {
  const trimmed = upstream.replace(/\/+$/, "");
  return trimmed.endsWith("/v1") ? trimmed : `${trimmed}/v1`;
}

/** The Authorization header toward the model server: its API key as a bearer, or the URL's basic auth. */
export function upstreamAuthorization(apiKey: string | undefined, basicAuth: string | undefined): string | undefined {
  return apiKey === undefined ? basicAuth : `Bearer ${apiKey}`;
}
