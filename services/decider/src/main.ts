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
import { createBackend } from "./backend";
import { loadCalibration } from "./calibration/load";
import {
  type Config,
  configSchema,
  embeddedModelFile,
  invocationDir,
  playgroundEnabled,
  withAbsolutePaths,
} from "./config";
import { PROMPT_VERSION } from "./decide/prompt";
import { checkDemoAvailable, DEMO_MODEL } from "./engine/demo/demo-model";
import { checkModelFile } from "./engine/model-source";
import { UpstreamLimiter } from "./limits/limiter";
import type { SharedLimits } from "./limits/types";
import { SERVICE_VERSION } from "./version";

async function main(): Promise<void> {
  // Relative paths are read from where the command was run (pnpm runs the start script in services/decider).
  const dir = invocationDir();
  const loaded = loadConfig(configSchema);
  const config = withAbsolutePaths(loaded, dir);
  const logger = createLogger({ service: "decider", level: config.LOG_LEVEL, format: config.LOG_FORMAT });
  warnUnknownVariables(logger, configSchema, ["LOCALDECIDER_"]);
  // Kept in the schema so existing environments still start; it has bounded nothing since each call decodes
  // one token (prompt version 2).
  if ((process.env.LOCALDECIDER_MAX_OUTPUT_TOKENS ?? "") !== "") {
    logger.warn("LOCALDECIDER_MAX_OUTPUT_TOKENS has no effect: each upstream call decodes one token", {
      value: config.LOCALDECIDER_MAX_OUTPUT_TOKENS,
    });
  }
  const timeoutMs = config.LOCALDECIDER_TIMEOUT * 1000;
  // Before the backend: a bad calibration file stops the start before any model is fetched or loaded.
  const calibration =
    config.LOCALDECIDER_CALIBRATION === undefined
      ? undefined
      : loadCalibration(config.LOCALDECIDER_CALIBRATION, dir, PROMPT_VERSION);
  // The embedded engine's model given as a path must be there: a typo or a missing mount stops the start.
  const modelFile = embeddedModelFile(config);
  if (modelFile !== undefined) checkModelFile(loaded.LOCALDECIDER_MODEL, modelFile);
  if (config.LOCALDECIDER_UPSTREAM === undefined && config.LOCALDECIDER_MODEL === DEMO_MODEL) checkDemoAvailable();
  const shared = await sharedLimits(config, logger);
  const limiter = new UpstreamLimiter(config.LOCALDECIDER_MAX_INFLIGHT, config.LOCALDECIDER_MAX_QUEUE, shared);
  const backend = createBackend(config, logger, limiter.maxInflight);
  const allowedHosts = hostPolicy({
    configured: config.LOCALDECIDER_ALLOWED_HOSTS,
    listenHost: config.LOCALDECIDER_HOST,
    authenticated: config.LOCALDECIDER_API_KEY !== undefined,
  });
  const { app } = createApp({
    backend,
    limiter,
    logger,
    apiKey: config.LOCALDECIDER_API_KEY,
    allowedHosts,
    corsOrigins: config.LOCALDECIDER_CORS_ORIGINS,
    limits: {
      questionsPerCall: config.LOCALDECIDER_QUESTIONS_PER_CALL,
      outcomesPerCall: config.LOCALDECIDER_OUTCOMES_PER_CALL,
    },
    malformedRetries: config.LOCALDECIDER_MALFORMED_RETRIES,
    timeoutSeconds: config.LOCALDECIDER_TIMEOUT,
    allowNoLogprobs: config.LOCALDECIDER_ALLOW_NO_LOGPROBS,
    maxQuestions: config.LOCALDECIDER_MAX_QUESTIONS,
    bodyLimit: config.LOCALDECIDER_BODY_LIMIT,
    calibration,
    playground: playgroundEnabled(config),
  });
  const running = await serve(app, {
    host: config.LOCALDECIDER_HOST,
    port: config.LOCALDECIDER_PORT,
    logger,
    onClose: async () => {
      await limiter.stop();
      await backend.close();
    },
    // In-flight decisions may legitimately take up to one upstream timeout.
    drainTimeoutMs: timeoutMs,
    connections: {
      headersTimeoutMs: config.LOCALDECIDER_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: config.LOCALDECIDER_REQUEST_TIMEOUT_MS,
      keepAliveTimeoutMs: config.LOCALDECIDER_IDLE_TIMEOUT_MS,
      maxConnections: config.LOCALDECIDER_MAX_CONNECTIONS,
      connectionsCheckingIntervalMs: config.LOCALDECIDER_TIMEOUT_CHECK_MS,
    },
    variables: { host: "LOCALDECIDER_HOST", port: "LOCALDECIDER_PORT" },
  });
  exitOnSignals(running, logger);
  // Never the API keys: only where we listen and what we call.
  logger.info("decider listening", {
    host: config.LOCALDECIDER_HOST,
    port: running.port,
    upstream: backend.display,
    upstreamModel: backend.model,
    version: SERVICE_VERSION,
    promptVersion: PROMPT_VERSION,
    auth: config.LOCALDECIDER_API_KEY !== undefined,
    allowedHosts: describeHostPolicy(allowedHosts, config.LOCALDECIDER_ALLOWED_HOSTS, {
      variable: "LOCALDECIDER_ALLOWED_HOSTS",
      authentication: "LOCALDECIDER_API_KEY set",
    }),
    calibration:
      calibration === undefined
        ? "off"
        : {
            file: path.resolve(dir, config.LOCALDECIDER_CALIBRATION as string),
            fittedAt: calibration.file.fitted_at,
            ...calibration.describe().temperatures,
          },
    limits: shared === undefined ? "this process" : "shared through Redis",
    playground: playgroundEnabled(config) ? "/playground" : "off",
  });
  // Said on a line of its own (and in /ready's body): replicas started without LOCALDECIDER_REDIS_URL each
  // admit MAX_INFLIGHT per model server, so N of them send a server N times its slots.
  if (shared === undefined) {
    logger.info(
      config.LOCALDECIDER_UPSTREAM === undefined
        ? "limits are this process's own: each replica's embedded engine is its own model server"
        : "limits are this process's own, not shared: run one replica, or set LOCALDECIDER_REDIS_URL for several",
      {
        limits: "this process",
        maxInflight: config.LOCALDECIDER_MAX_INFLIGHT,
        maxQueue: config.LOCALDECIDER_MAX_QUEUE,
      },
    );
  }
  const calibrationWarning = calibration?.warning;
  if (calibrationWarning !== undefined)
    logger.warn("calibration fitted on another prompt", { reason: calibrationWarning });
  // After listening: /ready answers (503, with the state) while the model downloads and loads.
  backend.start();
}

/** The Redis-shared limits when LOCALDECIDER_REDIS_URL is set; ioredis is loaded only then. */
async function sharedLimits(
  config: Config,
  logger: ReturnType<typeof createLogger>,
): Promise<SharedLimits | undefined> {
  const url = config.LOCALDECIDER_REDIS_URL;
  if (url === undefined) return undefined;
  const { RedisLimits } = await import("./limits/redis-limits.js");
  return new RedisLimits({
    url,
    prefix: config.LOCALDECIDER_REDIS_PREFIX,
    maxInflight: config.LOCALDECIDER_MAX_INFLIGHT,
    maxQueue: config.LOCALDECIDER_MAX_QUEUE,
    leaseMs: config.LOCALDECIDER_REDIS_LEASE_MS,
    logger,
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`decider failed to start: ${describeError(err).error}\n`);
  process.exit(1);
});
