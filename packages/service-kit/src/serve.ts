import { createServer, type Server } from "node:http";
import type { Express } from "express";
import { type ConnectionLimits, connectionLimitsProblem, DEFAULT_CONNECTION_LIMITS } from "./connection-limits";
import { describeError } from "./error-handler";
import type { Logger } from "./logger";

export interface ServeOptions {
  host: string;
  port: number;
  logger: Logger;
  /** Closes what the service holds (database, upstream queue) after the last request has finished. */
  onClose?: () => Promise<void>;
  /** How long in-flight requests get to finish after SIGTERM before connections are cut. */
  drainTimeoutMs?: number;
  /** Request timeouts and the connection cap (connection-limits.ts); each unset one is its default. */
  connections?: Partial<ConnectionLimits>;
  /**
   * The variables that set host and port (`TODOS_HOST`, `TODOS_PORT`): a port in use or an address this
   * machine does not have is then reported naming the variable, its value and what to do (listenFailure).
   */
  variables?: { host: string; port: string };
}

/**
 * Why a service could not listen, said for an operator: the variable and its value, the problem, what to
 * do. Other errors (and errors without an errno code) are returned unchanged.
 */
export function listenFailure(
  err: unknown,
  where: { host: string; port: number; variables: { host: string; port: string } },
): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  const { host, port, variables } = where;
  const at = `${host}:${port}`;
  switch (code) {
    case "EADDRINUSE":
      return new Error(
        `${variables.port}=${port}: ${at} is already in use by another process: stop it, or set ${variables.port} to a free port (0 picks one)`,
        { cause: err },
      );
    case "EACCES":
      return new Error(
        `${variables.port}=${port}: not allowed to listen on ${at} (ports below 1024 need privileges): set ${variables.port} to 1024 or above`,
        { cause: err },
      );
    case "EADDRNOTAVAIL":
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return new Error(
        `${variables.host}=${host}: not an address of this machine (${String(code)}): set ${variables.host} to one of its addresses, 127.0.0.1 or 0.0.0.0 (every interface)`,
        { cause: err },
      );
    default:
      return err;
  }
}

export interface RunningServer {
  server: Server;
  /** The port actually bound (useful with port 0). */
  port: number;
  /** Stops accepting, lets in-flight requests finish, then runs onClose. Safe to call twice. */
  close: () => Promise<void>;
}

/** Listens, and resolves once the port is bound; rejects if it cannot be. */
export async function serve(app: Express, options: ServeOptions): Promise<RunningServer> {
  const limits = { ...DEFAULT_CONNECTION_LIMITS, ...options.connections };
  const problem = connectionLimitsProblem(limits);
  if (problem !== undefined) throw new Error(`headersTimeoutMs ${limits.headersTimeoutMs} ${problem}`);
  // connectionsCheckingInterval is read only when the server starts listening, so every limit is set on the
  // server before listen().
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: limits.connectionsCheckingIntervalMs,
    },
    app,
  );
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  server.maxConnections = limits.maxConnections;
  reportDroppedConnections(server, options.logger, limits.maxConnections);
  await new Promise<void>((resolve, reject) => {
    const fail = (err: Error) =>
      reject(
        options.variables === undefined
          ? err
          : listenFailure(err, { host: options.host, port: options.port, variables: options.variables }),
      );
    server.once("error", fail);
    server.listen(options.port, options.host, () => {
      server.off("error", fail);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : options.port;
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      const drained = new Promise<void>((resolve) => server.close(() => resolve()));
      // A keep-alive socket goes idle when its last response ends and would then hold close() open until
      // it times out, so idle sockets are swept until the drain completes.
      server.closeIdleConnections();
      const sweep = setInterval(() => server.closeIdleConnections(), 50);
      const cut = setTimeout(() => server.closeAllConnections(), options.drainTimeoutMs ?? 10_000);
      sweep.unref();
      cut.unref();
      await drained;
      clearInterval(sweep);
      clearTimeout(cut);
      await options.onClose?.();
    })();
    return closing;
  };
  return { server, port, close };
}

/**
 * A connection past maxConnections is closed as it opens ('drop'). One warning a minute at most says how
 * many were, so a flood of connections cannot flood the log too.
 */
function reportDroppedConnections(server: Server, logger: Logger, maxConnections: number): void {
  let dropped = 0;
  let quietUntil = 0;
  server.on("drop", () => {
    dropped++;
    const now = Date.now();
    if (now < quietUntil) return;
    logger.warn("connections refused: the connection cap is reached", { dropped, maxConnections });
    dropped = 0;
    quietUntil = now + 60_000;
  });
}

/**
 * SIGTERM/SIGINT: stop accepting, finish in-flight requests, close resources, exit 0. A second signal while
 * draining exits at once (1). The handlers stay registered (`on`, not `once`): libraries built on
 * signal-exit (node-llama-cpp loads one) re-raise a signal when they see no other listener left, which would
 * kill the process in the middle of its drain.
 */
export function exitOnSignals(running: RunningServer, logger: Logger): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn("second signal while shutting down: exiting now", { signal });
      process.exit(1);
    }
    stopping = true;
    logger.info("shutting down", { signal });
    running.close().then(
      () => {
        logger.info("stopped");
        process.exit(0);
      },
      (err: unknown) => {
        logger.error("shutdown failed", describeError(err));
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
}
