import path from "node:path";
import {
  createLogger,
  describeError,
  describeHostPolicy,
  exitOnSignals,
  hostPolicy,
  loadConfig,
  serve,
  warnUnknownVariables,
} from "@localdecider/service-kit";
import { createApp } from "./app";
import { configSchema } from "./config";
import { authFromConfig } from "./http/auth";
import { createTodosMetrics } from "./metrics";
import { storageStartupError } from "./startup-errors";
import { openStorage } from "./storage/open-storage";

/**
 * Boot: config from the environment (a bad value stops here, naming the variable), storage opened and
 * migrated, then listen; SIGTERM/SIGINT drain in-flight requests, close the database and exit 0.
 */
async function main(): Promise<void> {
  const config = loadConfig(configSchema);
  const logger = createLogger({ service: "todos", level: config.LOG_LEVEL, format: config.LOG_FORMAT });
  warnUnknownVariables(logger, configSchema, ["TODOS_"]);
  const auth = authFromConfig(config);
  if (auth === undefined) logger.info("sign-in off: per-user routes are open to anyone who can reach them");
  else {
    logger.info("sign-in on: per-user routes require a bearer JWT", {
      keySource: auth.keySource,
      issuer: config.TODOS_JWT_ISSUER,
      audience: config.TODOS_JWT_AUDIENCE,
      ...(auth.keySource === "jwks" ? { jwksUrl: config.TODOS_JWT_JWKS_URL } : {}),
      adminClaim: auth.adminClaim ?? null,
      ...auth.tokenTimes,
    });
  }
  const allowedHosts = hostPolicy({
    configured: config.TODOS_ALLOWED_HOSTS,
    listenHost: config.TODOS_HOST,
    authenticated: auth !== undefined,
  });
  // Created before storage, which reports query timings and its pool to it.
  const metrics = createTodosMetrics();
  // Opening PGlite takes seconds (3-8 s on 2 cores): say so, and stop cleanly on a signal meanwhile (once the
  // database is open, so that it is closed as on any stop, never killed half-written; a second signal exits at
  // once). The server's own handlers take over once it listens.
  const storage = config.DATABASE_URL === undefined ? "pglite" : "postgres";
  let stopSignal: NodeJS.Signals | undefined;
  const onEarlySignal = (signal: NodeJS.Signals) => {
    if (stopSignal !== undefined) {
      logger.warn("second signal while starting: exiting now", { signal });
      process.exit(1);
    }
    stopSignal = signal;
    logger.info("shutting down", { signal, while: "opening storage" });
  };
  process.on("SIGTERM", onEarlySignal);
  process.on("SIGINT", onEarlySignal);
  if (storage === "pglite") {
    logger.info("opening the embedded database (PGlite): this takes a few seconds", {
      dataDir: path.resolve(config.TODOS_DATA_DIR),
    });
  } else {
    logger.info("connecting to PostgreSQL and applying migrations");
  }
  const repository = await openStorage({
    onQuery: metrics.onQuery,
    onPool: metrics.watchPool,
    databaseUrl: config.DATABASE_URL,
    dataDir: config.TODOS_DATA_DIR,
    onPoolError: (err) => logger.warn("idle database connection failed", describeError(err)),
  }).catch((err: unknown) => {
    throw storageStartupError(err, { databaseUrl: config.DATABASE_URL, dataDir: config.TODOS_DATA_DIR });
  });
  if (stopSignal !== undefined) {
    await repository.close();
    logger.info("stopped");
    process.exit(0);
  }
  logger.info("storage ready", { storage: repository.kind });
  const running = await serve(
    createApp({
      repository,
      logger,
      metrics,
      auth,
      allowedHosts,
      corsOrigins: config.TODOS_CORS_ORIGINS,
      maxItemsPerUser: config.TODOS_MAX_ITEMS_PER_USER,
      listLimits: { maxItems: config.TODOS_LIST_MAX_ITEMS, maxBytes: config.TODOS_LIST_MAX_BYTES },
    }),
    {
      host: config.TODOS_HOST,
      port: config.TODOS_PORT,
      logger,
      onClose: () => repository.close(),
      connections: {
        headersTimeoutMs: config.TODOS_HEADERS_TIMEOUT_MS,
        requestTimeoutMs: config.TODOS_REQUEST_TIMEOUT_MS,
        keepAliveTimeoutMs: config.TODOS_IDLE_TIMEOUT_MS,
        maxConnections: config.TODOS_MAX_CONNECTIONS,
        connectionsCheckingIntervalMs: config.TODOS_TIMEOUT_CHECK_MS,
      },
      variables: { host: "TODOS_HOST", port: "TODOS_PORT" },
    },
  ).catch(async (err: unknown) => {
    await repository.close();
    throw err;
  });
  // The server's handlers replace the start-up ones before "listening" is said, so that no signal falls
  // between the two; one that came while the server bound is handed on to them.
  exitOnSignals(running, logger);
  process.off("SIGTERM", onEarlySignal);
  process.off("SIGINT", onEarlySignal);
  logger.info("listening", {
    host: config.TODOS_HOST,
    port: running.port,
    allowedHosts: describeHostPolicy(allowedHosts, config.TODOS_ALLOWED_HOSTS, {
      variable: "TODOS_ALLOWED_HOSTS",
      authentication: "sign-in on",
    }),
  });
  if (stopSignal !== undefined) process.kill(process.pid, stopSignal);
}

main().catch((err: unknown) => {
  // Before the logger exists (bad config), when storage cannot be opened or the port is taken: say why on
  // stderr, naming the variable and what to do (startup-errors.ts, the kit's listenFailure), and exit 1.
  process.stderr.write(`todos failed to start: ${describeError(err).error}\n`);
  process.exit(1);
});
