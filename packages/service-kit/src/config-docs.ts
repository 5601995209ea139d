/**
 * What the config variables every service shares mean (the connection limits and LOG_FORMAT), written once
 * for each service's CONFIG_DOCS, from which docs/configuration.md is generated (`pnpm docs:gen`). Defaults
 * and bounds are not repeated here: the generator reads them from the schema (CONNECTION_LIMITS).
 */
export function sharedConfigDocs<P extends string>(
  prefix: P,
): Record<
  | `${P}_HEADERS_TIMEOUT_MS`
  | `${P}_REQUEST_TIMEOUT_MS`
  | `${P}_IDLE_TIMEOUT_MS`
  | `${P}_MAX_CONNECTIONS`
  | `${P}_TIMEOUT_CHECK_MS`
  | "LOG_FORMAT",
  string
> {
  return {
    [`${prefix}_HEADERS_TIMEOUT_MS`]:
      "Milliseconds a client has to send its request headers, counted from the connection's opening; then it is answered 408 and closed. At most the request timeout.",
    [`${prefix}_REQUEST_TIMEOUT_MS`]:
      "Milliseconds a client has to send its whole request, body included; then 408 and closed. Only receiving the request is timed, never the work on it or the answer.",
    [`${prefix}_IDLE_TIMEOUT_MS`]:
      "Milliseconds an idle kept-alive connection waits for its next request before it is closed (Node's `keepAliveTimeout`). Behind a proxy that reuses connections, set it above the proxy's idle timeout.",
    [`${prefix}_MAX_CONNECTIONS`]:
      "Connections held at once; one more is closed as it opens, before a byte is read, and a warning (at most one a minute) counts them.",
    [`${prefix}_TIMEOUT_CHECK_MS`]:
      "How often (milliseconds) the two request timeouts are checked (Node's `connectionsCheckingInterval`): each may run over by up to this much. With the defaults a trickling client is closed within 35 s.",
    LOG_FORMAT:
      "`json` (one JSON object a line, for log collectors) or `pretty` (one readable line: time, level, message, `key=value` fields, the request id; coloured at a terminal unless `NO_COLOR` is set), for development.",
  } as never;
}
