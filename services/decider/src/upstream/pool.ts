import { createHash } from "node:crypto";
import type { Logger } from "@localdecider/service-kit";
import { leavesRotation } from "./failure";
import type { Readiness, ReadinessProbe } from "./readiness";
import type { ModelPort, Protocol } from "./types";

/** How often a server out of rotation is probed again (its model list) to see whether it can rejoin. */
export const REJOIN_PROBE_MS = 2000;

/** One model server (or the embedded engine): what answers, how to ask whether it is ready, its name. */
export interface PoolServer {
  /** Its address without credentials (or `embedded`): the key of its limits, in the log and in /ready to a key holder. */
  readonly id: string;
  /**
   * What names it to anyone (/ready without the API key, its metrics label): no address. By default
   * `server <n>`, its place in LOCALDECIDER_UPSTREAM from 1.
   */
  readonly label?: string;
  /** The adapter that answers now: a model server's is that of the protocol its start-up check found. */
  readonly upstream: ModelPort;
  readonly probe: ReadinessProbe;
  /** A model server's protocol once a check found it; undefined for the embedded engine (and before). */
  readonly protocol?: Protocol | undefined;
  /** The decision models a native server lists, which a client may name (always its configured one). */
  readonly decisionModels?: readonly string[];
}

/** A server as /ready and the metrics show it. */
export interface ServerState {
  id: string;
  /** See PoolServer.label. */
  label: string;
  /** In rotation: new requests may be sent to it. */
  inRotation: boolean;
  /** Why it is out (the probe's client-safe text, or how its last call failed). */
  reason?: string;
  /** The protocol its start-up check found, if any. */
  protocol?: Protocol;
}

/**
 * The model servers of LOCALDECIDER_UPSTREAM and which of them take new requests. A server leaves rotation
 * when a call to it fails as a server fails (unreachable, 5xx, 404: not a malformed answer, not a busy 429,
 * not a timeout, which a loaded server gives too)
 * or when a probe finds it not ready; while out it is probed every REJOIN_PROBE_MS and rejoins once ready.
 * With one server there is nowhere else to go: it never leaves rotation, and its failures are the
 * request's, as they always were.
 *
 * As a ReadinessProbe it is ready while any server is; the answer names each server that is not.
 */
export class ServerPool implements ReadinessProbe {
  readonly servers: readonly PoolServer[];
  private readonly out = new Map<string, string>();
  private rejoinTimer: NodeJS.Timeout | undefined;
  private probing = false;
  private closed = false;

  constructor(
    servers: readonly PoolServer[],
    private readonly logger: Logger,
    private readonly rejoinProbeMs = REJOIN_PROBE_MS,
  ) {
    if (servers.length === 0) throw new Error("a server pool needs at least one server");
    this.servers = servers;
  }

  /** The embedded engine's probe decides how long its answer holds; servers' answers the gate's default. */
  get maxAgeMs(): number | undefined {
    return this.servers.length === 1 ? this.servers[0]?.probe.maxAgeMs : undefined;
  }

  /** The decision models the native servers list: what a client may name besides the decider's own names. */
  decisionModels(): string[] {
    return [...new Set(this.servers.flatMap((s) => s.decisionModels ?? []))];
  }

  get(id: string): PoolServer {
    const server = this.servers.find((s) => s.id === id);
    if (server === undefined) throw new Error(`no model server ${id} in the pool`);
    return server;
  }

  states(): ServerState[] {
    return this.servers.map((s) => {
      const reason = this.out.get(s.id);
      const label = this.labelOf(s.id);
      const protocol = s.protocol === undefined ? {} : { protocol: s.protocol };
      return reason === undefined
        ? { id: s.id, label, inRotation: true, ...protocol }
        : { id: s.id, label, inRotation: false, reason, ...protocol };
    });
  }

  /** The name of server `id` that holds no address (see PoolServer.label). */
  labelOf(id: string): string {
    const at = this.servers.findIndex((s) => s.id === id);
    return this.servers[at]?.label ?? `server ${at + 1}`;
  }

  /**
   * The server for a new request: the least loaded in rotation, `load` telling each one's load; ties go to
   * the first listed. When every server is out, all of them are candidates (the request then fails with the
   * server's own error, or finds it back): refusing outright would turn a blip into an outage.
   */
  choose(load: (id: string) => number, except: ReadonlySet<string> = new Set()): PoolServer | undefined {
    const open = this.servers.filter((s) => !except.has(s.id));
    const inRotation = open.filter((s) => !this.out.has(s.id));
    const candidates = inRotation.length > 0 ? inRotation : open;
    let best: PoolServer | undefined;
    let bestLoad = Number.POSITIVE_INFINITY;
    for (const server of candidates) {
      const l = load(server.id);
      if (l < bestLoad) {
        best = server;
        bestLoad = l;
      }
    }
    return best;
  }

  /**
   * The server for a request with a client's cache key (Decisions' `prompt_cache_key`): every request with the
   * same key goes to the same server while the servers in rotation stay the same, whatever their load, so
   * that its prompt cache holds what the key's requests share. Rendezvous hashing: a server leaving rotation
   * moves only the keys that were on it.
   */
  chooseFor(key: string, except: ReadonlySet<string> = new Set()): PoolServer | undefined {
    const open = this.servers.filter((s) => !except.has(s.id));
    const inRotation = open.filter((s) => !this.out.has(s.id));
    const candidates = inRotation.length > 0 ? inRotation : open;
    let best: PoolServer | undefined;
    let bestWeight = "";
    for (const server of candidates) {
      const weight = createHash("sha256").update(server.id).update("\0").update(key).digest("hex");
      if (best === undefined || weight > bestWeight) {
        best = server;
        bestWeight = weight;
      }
    }
    return best;
  }

  /**
   * Takes a server out of rotation after one of its calls failed as `err`, if that failure says the server
   * cannot serve (see the class comment). Returns whether it is out now.
   */
  failed(id: string, err: unknown): boolean {
    const reason = leavesRotation(err);
    if (reason === undefined || this.servers.length === 1) return false;
    this.takeOut(id, reason);
    return true;
  }

  /** Probes every server now, updates the rotation, and answers ready while any server is. */
  async check(): Promise<Readiness> {
    const results = await this.probe(this.servers);
    if (this.servers.length === 1) return results[0] as Readiness;
    if (results.some((r) => r.ready)) return { ready: true };
    const failures = results.filter((r): r is Exclude<Readiness, { ready: true }> => !r.ready);
    return {
      ready: false,
      // Decisions are refused outright (model_unavailable) only when no server holds the model at all.
      modelMissing: failures.every((f) => f.modelMissing),
      // Client-safe like each probe's own text: no address (GET /ready lists each server's state).
      message: `no model server is ready (${[...new Set(failures.map((f) => f.message))].join("; ")})`,
      detail: this.servers.map((s, i) => `${s.id}: ${failures[i]?.detail ?? failures[i]?.message}`).join("; "),
    };
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.rejoinTimer);
  }

  /** Probes these servers at once and, with several in the pool, moves each in or out of rotation. */
  private async probe(servers: readonly PoolServer[]): Promise<Readiness[]> {
    const results = await Promise.all(servers.map((s) => s.probe.check().catch((err: unknown) => failure(err))));
    if (this.servers.length === 1) return results;
    for (const [i, server] of servers.entries()) {
      const result = results[i] as Readiness;
      if (result.ready) this.rejoin(server.id);
      else this.takeOut(server.id, result.message, result.detail);
    }
    return results;
  }

  private takeOut(id: string, reason: string, detail?: string): void {
    if (!this.out.has(id)) {
      this.logger.warn("model server out of rotation; probing it in the background", {
        server: id,
        reason,
        ...(detail === undefined ? {} : { detail }),
        inRotation: this.servers.length - this.out.size - 1,
      });
    }
    this.out.set(id, reason);
    this.scheduleRejoinProbe();
  }

  private rejoin(id: string): void {
    if (!this.out.delete(id)) return;
    this.logger.info("model server back in rotation", { server: id, inRotation: this.servers.length - this.out.size });
  }

  private scheduleRejoinProbe(): void {
    if (this.closed || this.rejoinTimer !== undefined || this.out.size === 0) return;
    this.rejoinTimer = setTimeout(() => void this.probeOut(), this.rejoinProbeMs);
    // The probe is for requests to come: it never keeps a stopping process alive.
    this.rejoinTimer.unref();
  }

  /** Probes the servers out of rotation (not those in: their own calls and /ready watch them). */
  private async probeOut(): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    try {
      await this.probe(this.servers.filter((s) => this.out.has(s.id)));
    } finally {
      this.probing = false;
      this.rejoinTimer = undefined;
      this.scheduleRejoinProbe();
    }
  }
}

function failure(err: unknown): Readiness {
  return { ready: false, message: "readiness probe failed", modelMissing: false, detail: String(err) };
}
