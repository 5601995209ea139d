import {
  createLogger,
  describeError,
  describeHostPolicy,
  exitOnSignals,
  hostPolicy,
  loadConfig,
  serve,
} from "@localdecider/service-kit";
import { createApp } from "./app";
import { configSchema } from "./config";
import { authFromConfig } from "./http/auth";
import { createTodosMetrics } from "./metrics";
import { openStorage } from "./storage/open-storage";

/**
 * Boot: config from the environment (a bad value stops here, naming the variable), storage opened and
 * migrated, then listen; SIGTERM/SIGINT drain in-flight requests, close the database and exit 0.
 */
async function main(): Promise<void> {
  const config = loadConfig(configSchema);
  const logger = createLogger({ service: "todos", level: config.LOG_LEVEL });
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
  const repository = await openStorage({
    onQuery: metrics.onQuery,
    onPool: metrics.watchPool,
    databaseUrl: config.DATABASE_URL,
    dataDir: config.TODOS_DATA_DIR,
    onPoolError: (err) => logger.warn("idle database connection failed", describeError(err)),
  });
  logger.info("storage ready", { storage: repository.kind });
  const running = await serve(
    createApp({
      repository,
      logger,
      metrics,
      auth,
      allowedHosts,
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
    },
  );
  logger.info("listening", {
    host: config.TODOS_HOST,
    port: running.port,
    allowedHosts: describeHostPolicy(allowedHosts, config.TODOS_ALLOWED_HOSTS, {
      variable: "TODOS_ALLOWED_HOSTS",
      authentication: "sign-in on",
    }),
  });
  exitOnSignals(running, logger);
}

main().catch((err: unknown) => {
  // Before the logger exists (bad config) or when storage cannot be opened: say why on stderr, exit 1.
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
