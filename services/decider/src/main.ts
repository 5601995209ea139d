import { createLogger, describeError, exitOnSignals, loadConfig, serve } from "@localdecider/service-kit";
import { createApp } from "./app";
import { configSchema } from "./config";
import { UpstreamLimiter } from "./limiter";
import { PROMPT_VERSION } from "./prompt";
import { upstreamAddress, upstreamAuthorization } from "./upstream/address";
import { OpenAIUpstream } from "./upstream/openai-upstream";
import { ModelListProbe } from "./upstream/readiness";
import { SERVICE_VERSION } from "./version";

async function main(): Promise<void> {
  const config = loadConfig(configSchema);
  const logger = createLogger({ service: "decider", level: config.LOG_LEVEL });
  const address = upstreamAddress(config.LOCALDECIDER_UPSTREAM);
  const { baseURL } = address;
  const authorization = upstreamAuthorization(config.LOCALDECIDER_UPSTREAM_API_KEY, address.basicAuth);
  const timeoutMs = config.LOCALDECIDER_TIMEOUT * 1000;
  const limiter = new UpstreamLimiter(config.LOCALDECIDER_MAX_INFLIGHT, config.LOCALDECIDER_MAX_QUEUE);
  const { app } = createApp({
    upstream: new OpenAIUpstream({
      baseURL,
      model: config.LOCALDECIDER_UPSTREAM_MODEL,
      authorization,
      timeoutMs,
    }),
    probe: new ModelListProbe({
      baseURL,
      model: config.LOCALDECIDER_UPSTREAM_MODEL,
      authorization,
      timeoutMs: Math.min(timeoutMs, 10_000),
    }),
    limiter,
    logger,
    upstreamAddress: address.display,
    upstreamModel: config.LOCALDECIDER_UPSTREAM_MODEL,
    apiKey: config.LOCALDECIDER_API_KEY,
    limits: {
      questionsPerCall: config.LOCALDECIDER_QUESTIONS_PER_CALL,
      outcomesPerCall: config.LOCALDECIDER_OUTCOMES_PER_CALL,
    },
    malformedRetries: config.LOCALDECIDER_MALFORMED_RETRIES,
    timeoutSeconds: config.LOCALDECIDER_TIMEOUT,
    allowNoLogprobs: config.LOCALDECIDER_ALLOW_NO_LOGPROBS,
    bodyLimit: config.LOCALDECIDER_BODY_LIMIT,
  });
  const running = await serve(app, {
    host: config.LOCALDECIDER_HOST,
    port: config.LOCALDECIDER_PORT,
    logger,
    onClose: () => limiter.stop(),
    // In-flight decisions may legitimately take up to one upstream timeout.
    drainTimeoutMs: timeoutMs,
  });
  exitOnSignals(running, logger);
  // Never the API keys: only where we listen and what we call.
  logger.info("decider listening", {
    host: config.LOCALDECIDER_HOST,
    port: running.port,
    upstream: address.display,
    upstreamModel: config.LOCALDECIDER_UPSTREAM_MODEL,
    version: SERVICE_VERSION,
    promptVersion: PROMPT_VERSION,
    auth: config.LOCALDECIDER_API_KEY !== undefined,
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`decider failed to start: ${describeError(err).error}\n`);
  process.exit(1);
});
