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

export function upstreamAddress(configured: string): UpstreamAddress {
  const url = new URL(configured);
  const basicAuth =
    url.username === "" && url.password === ""
      ? undefined
      : `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString("base64")}`;
  url.username = "";
  url.password = "";
  const display = url.toString().replace(/\/+$/, "");
  return { baseURL: upstreamBaseURL(display), display, basicAuth };
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
