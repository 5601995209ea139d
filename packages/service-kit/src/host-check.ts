import { isIP } from "node:net";
import type { RequestHandler } from "express";
import { z } from "zod";
import type { AppError } from "./app-error";

/**
 * The Host check against DNS rebinding. A page on the attacker's name (`rebind.attacker.example`) whose DNS
 * record is switched to 127.0.0.1 (or to any address the victim's browser reaches) can send requests to a
 * service there and read the answers: for the browser they are same-origin. What gives it away is `Host`,
 * which always carries the name the page was loaded from. A service without authentication answers only the
 * names it is meant to be reached by; anything else gets a 4xx and changes nothing.
 */

/**
 * Names a client on the same machine uses. Always allowed: a rebound page never carries one, since its Host
 * is the attacker's name, and a page that is really on localhost is not a rebinding.
 */
export const LOOPBACK_HOSTS = ["localhost", "127.0.0.1", "[::1]"] as const;

/**
 * The probe endpoints, open to any Host: a kubelet probe sends the pod's IP as Host, Prometheus the target's
 * address, a load balancer whatever it was configured with. They change nothing and show no user data.
 */
export const PROBE_PATHS = ["/health", "/ready", "/metrics"] as const;

/** Which Host names a service answers for. */
export interface AllowedHosts {
  /** `*`: every name (no check). */
  readonly any: boolean;
  /** Exact names, lower case; an IPv6 address in brackets, in its canonical form (`[::1]`). */
  readonly names: readonly string[];
  /** From `.example.com` entries, stored as `example.com`: that name and every name under it. */
  readonly domains: readonly string[];
}

const NAME = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/;

/** A host name or address in the form Host carries it, lower case, IPv6 in canonical brackets; else undefined. */
function canonicalHost(text: string): string | undefined {
  const host = text.toLowerCase();
  const v6 = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  if (isIP(v6) === 6) {
    try {
      return new URL(`http://[${v6}]/`).hostname;
    } catch {
      return undefined; // a zone id (`fe80::1%eth0`): never in a Host a browser sends
    }
  }
  return host.length <= 253 && NAME.test(host) ? host : undefined;
}

/** The host name of a `Host` header (`name`, `name:port`, `[v6]`, `[v6]:port`), any port; undefined if malformed. */
export function hostName(header: string): string | undefined {
  const match = /^(\[[^\]]*\]|[^:[\]]*)(?::\d{0,5})?$/.exec(header);
  return match === null || match[1] === undefined ? undefined : canonicalHost(match[1]);
}

const ENTRY_HELP =
  "write host names or addresses without scheme or port (todos.example.com, 10.0.0.5, [fd00::1]), " +
  ".example.com for a domain and every name under it, or * for any host";

/**
 * Reads a comma list of allowed hosts (`*ALLOWED_HOSTS`). Entries: a name or address, `.example.com`, or
 * `*`; case does not matter, spaces around entries and empty entries are ignored (so a compose file can
 * write `decider,${X:-}`).
 */
export function parseAllowedHosts(text: string): { hosts: AllowedHosts } | { problem: string } {
  const names: string[] = [];
  const domains: string[] = [];
  let any = false;
  for (const entry of text.split(",").map((e) => e.trim())) {
    if (entry === "") continue;
    if (entry === "*") {
      any = true;
      continue;
    }
    const domain = entry.startsWith(".") ? canonicalHost(entry.slice(1)) : undefined;
    const name = entry.startsWith(".") ? undefined : canonicalHost(entry);
    if (domain !== undefined && !domain.startsWith("[")) domains.push(domain);
    else if (name !== undefined) names.push(name);
    else return { problem: `${JSON.stringify(entry)} is not a host name or address: ${ENTRY_HELP}` };
  }
  return { hosts: { any, names: [...new Set(names)], domains: [...new Set(domains)] } };
}

/** The zod field of a service's `*_ALLOWED_HOSTS` variable: the comma list, parsed (see parseAllowedHosts). */
export function allowedHostsSchema() {
  return z
    .string()
    .max(16_384)
    .transform((text, ctx) => {
      const parsed = parseAllowedHosts(text);
      if ("problem" in parsed) {
        ctx.addIssue({ code: "custom", message: parsed.problem });
        return z.NEVER;
      }
      return parsed.hosts;
    });
}

/** Whether a listen address is the wildcard (every interface): then it names no host a client would use. */
function isWildcard(host: string): boolean {
  return host === "0.0.0.0" || canonicalHost(host) === "[::]";
}

export interface HostPolicyOptions {
  /** The service's `*_ALLOWED_HOSTS`, parsed; undefined when unset. */
  configured: AllowedHosts | undefined;
  /** Where the service listens (`*_HOST`): a specific address or name is allowed too. */
  listenHost: string;
  /** Whether the service authenticates its API (a bearer key or sign-in): a rebound page has no credentials. */
  authenticated: boolean;
}

/**
 * The names a service answers for, or undefined for no check. Without authentication: the loopback names,
 * the listen address when it is a specific one, and the configured entries. With authentication the check
 * is off, unless the variable is set (then it applies as configured). `*` turns it off in either case.
 */
export function hostPolicy(options: HostPolicyOptions): AllowedHosts | undefined {
  const { configured } = options;
  if (configured === undefined ? options.authenticated : configured.any) return undefined;
  const listen = isWildcard(options.listenHost) ? undefined : canonicalHost(options.listenHost);
  const names = [...LOOPBACK_HOSTS, ...(listen === undefined ? [] : [listen]), ...(configured?.names ?? [])];
  return { any: false, names: [...new Set(names)], domains: configured?.domains ?? [] };
}

/**
 * What the start's log line says of the Host check: the names a request's Host may carry (else 421), or why
 * any is answered (`variable` set to `*`, or `authentication` on and the variable unset).
 */
export function describeHostPolicy(
  allowed: AllowedHosts | undefined,
  configured: AllowedHosts | undefined,
  names: { variable: string; authentication: string },
): string | string[] {
  if (allowed !== undefined) return [...allowed.names, ...allowed.domains.map((d) => `.${d}`)];
  return configured?.any === true ? `any (${names.variable}=*)` : `any (${names.authentication})`;
}

/** Whether a request with this `Host` header (undefined: none sent) is for a name in the list. */
export function hostAllowed(allowed: AllowedHosts, header: string | undefined): boolean {
  if (allowed.any) return true;
  const host = header === undefined ? undefined : hostName(header);
  if (host === undefined) return false;
  return allowed.names.includes(host) || allowed.domains.some((d) => host === d || host.endsWith(`.${d}`));
}

/** How the log shows a refused Host: quoted, cut to 200 characters. */
function shown(header: string | undefined): string {
  if (header === undefined) return "(none)";
  return JSON.stringify(header.length > 200 ? `${header.slice(0, 200)}…` : header);
}

export interface HostCheckOptions {
  allowed: AllowedHosts;
  /** The service's error for a refused request; `cause` names the Host for the log (never sent). */
  reject: (cause: Error) => AppError;
  /** Paths answered whatever the Host (default PROBE_PATHS); matched like Express's routes, case-insensitively. */
  exemptPaths?: readonly string[];
}

/**
 * Refuses, before any route runs, a request whose Host is not in `allowed` (one with no Host at all too),
 * except on the exempt paths. Mount it after the request id, access log and metrics, so a refusal is
 * counted and logged like any answer.
 */
export function hostCheck(options: HostCheckOptions): RequestHandler {
  const exempt = new Set((options.exemptPaths ?? PROBE_PATHS).map((p) => p.toLowerCase()));
  return (req, _res, next) => {
    // Express routes ignore case and a trailing slash: `/Ready/` is the /ready route.
    const path = req.path.toLowerCase().replace(/(.)\/$/, "$1");
    if (exempt.has(path) || hostAllowed(options.allowed, req.headers.host)) {
      next();
      return;
    }
    next(options.reject(new Error(`Host ${shown(req.headers.host)} is not among the allowed hosts`)));
  };
}
