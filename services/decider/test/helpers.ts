import { randomUUID } from "node:crypto";
import { request as httpRequest } from "node:http";
import { DEFAULT_MAX_QUESTIONS } from "@localdecider/contracts/decider";
import { type AllowedHosts, byteSize, createLogger, hostPolicy, type Logger, serve } from "@localdecider/service-kit";
import { createApp } from "../src/app";
import { type Backend, serversBackend } from "../src/backend";
import type { Calibration } from "../src/calibration/calibration";
import type { Decider } from "../src/decide/decider";
import { UpstreamLimiter } from "../src/limits/limiter";
import { RedisLimits } from "../src/limits/redis-limits";
import type { DeciderObserver, UpstreamOutcome } from "../src/observer";
import { ModelServer } from "../src/upstream/model-server";
import type { ProtocolSetting } from "../src/upstream/protocol";
import type { ReadinessProbe } from "../src/upstream/readiness";
import type { Upstream } from "../src/upstream/types";
import { FakeUpstream, type Flavour } from "./fake-upstream/server";
import { recorder } from "./setup/openapi-responses";

/** Counts every observer hook, so tests can see retries, rejections and token totals. */
export class RecordingObserver implements DeciderObserver {
  calls: UpstreamOutcome[] = [];
  input = 0;
  output = 0;
  retries = 0;
  rejected = 0;
  /** The server of each call, in the order the calls ended. */
  servers: string[] = [];
  upstreamCall(_ms: number, outcome: UpstreamOutcome, server: string): void {
    this.calls.push(outcome);
    this.servers.push(server);
  }
  tokens(input: number, output: number): void {
    this.input += input;
    this.output += output;
  }
  malformedRetry(): void {
    this.retries += 1;
  }
  queueRejected(): void {
    this.rejected += 1;
  }
  absent = 0;
  absentOutcomes(count: number): void {
    this.absent += count;
  }
}

export interface Harness {
  fake: FakeUpstream;
  app: ReturnType<typeof createApp>["app"];
  decider: Decider;
  limiter: UpstreamLimiter;
  observer: RecordingObserver;
  logger: Logger;
  upstream: string;
  close: () => Promise<void>;
}

export interface HarnessOptions {
  flavour?: Flavour;
  apiKey?: string;
  /** The Host check; by default the one main.ts wires without LOCALDECIDER_ALLOWED_HOSTS, on 127.0.0.1. */
  allowedHosts?: AllowedHosts | undefined;
  upstreamApiKey?: string;
  timeoutSeconds?: number;
  maxInflight?: number;
  maxQueue?: number;
  malformedRetries?: number;
  questionsPerCall?: number;
  outcomesPerCall?: number;
  upstreamModel?: string;
  bodyLimit?: string;
  /** LOCALDECIDER_MAX_QUESTIONS; default its default, 4096. */
  maxQuestions?: number;
  /** Most heap the admitted requests may hold (DeciderOptions.maxHeldBytes); default: half the heap limit. */
  maxHeldBytes?: number;
  allowNoLogprobs?: boolean;
  /** LOCALDECIDER_PACK_PROMPTS (default true). */
  packPrompts?: boolean;
  /** The fake (llama flavour) serves llama-server's `/apply-template`, `/tokenize` and `/completion`. */
  packing?: boolean;
  logger?: Logger;
  calibration?: Calibration;
  /** Limits shared through the test run's Redis (TEST_REDIS), under a key prefix of this test's own. */
  sharedRedis?: boolean;
  /** The least time between two rechecks of a server after a 501 (default RECHECK_MIN_GAP_MS). */
  recheckGapMs?: number;
  /** LOCALDECIDER_UPSTREAM_MAX_BODY in bytes (default its default, 8 MiB). */
  upstreamMaxBody?: number;
  /** LOCALDECIDER_UPSTREAM_PROTOCOL (default auto, as in production). */
  protocol?: ProtocolSetting;
  /** With sharedRedis: the key prefix (replicas in one test share one); a fresh one by default. */
  redisPrefix?: string;
  /** With sharedRedis: another Redis than the test run's (one that is down, say). */
  redisUrl?: string;
  /** Serve GET /playground (LOCALDECIDER_PLAYGROUND); off by default. */
  playground?: boolean;
}

/**
 * The Redis the Redis-shared tests use (each under a prefix of its own): the one the global setup found or
 * started (test/setup/redis.ts), the machine's at 127.0.0.1:6379 when it answers.
 */
export const TEST_REDIS = process.env.LOCALDECIDER_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

export interface DeciderUnderTest {
  app: ReturnType<typeof createApp>["app"];
  decider: Decider;
  limiter: UpstreamLimiter;
  observer: RecordingObserver;
  logger: Logger;
  close: () => Promise<void>;
}

/**
 * The real app in front of any model server on a real port, built as backend.ts builds one
 * (`LOCALDECIDER_UPSTREAM` with one address): its protocol found by its start-up check.
 */
export function deciderFor(
  upstream: string,
  options: HarnessOptions & { wrapUpstream?: (upstream: Upstream) => Upstream } = {},
): DeciderUnderTest {
  const logger = options.logger ?? createLogger({ service: "decider-test", level: "silent" });
  const server = modelServer(upstream, { ...options, logger });
  return deciderOver(serversBackend([server], server.model, logger), { ...options, logger });
}

/** One model server as backend.ts makes it, from the harness's options. */
export function modelServer(
  upstream: string,
  options: HarnessOptions & { wrapUpstream?: (upstream: Upstream) => Upstream; logger: Logger },
): ModelServer & { model: string } {
  const model = options.upstreamModel ?? "test-model";
  const server = new ModelServer({
    address: upstream,
    model,
    apiKey: options.upstreamApiKey,
    timeoutMs: (options.timeoutSeconds ?? 30) * 1000,
    maxInflight: options.maxInflight ?? 2,
    allowNoLogprobs: options.allowNoLogprobs ?? false,
    protocol: options.protocol ?? "auto",
    packPrompts: options.packPrompts ?? true,
    ...(options.upstreamMaxBody === undefined ? {} : { maxBodyBytes: options.upstreamMaxBody }),
    ...(options.recheckGapMs === undefined ? {} : { recheckGapMs: options.recheckGapMs }),
    logger: options.logger,
    ...(options.wrapUpstream === undefined ? {} : { wrapChat: options.wrapUpstream }),
  });
  return Object.assign(server, { model });
}

/** A backend of one model server: what `LOCALDECIDER_UPSTREAM` with one address builds (backend.ts). */
export function oneServer(
  id: string,
  upstream: Upstream,
  probe: ReadinessProbe,
  model: string,
  logger: Logger,
): Backend {
  return serversBackend([{ id, upstream, probe }], model, logger);
}

/** The real app in front of a backend: model servers, or the embedded engine. */
export function deciderOver(backend: Backend, options: HarnessOptions = {}): DeciderUnderTest {
  const observer = new RecordingObserver();
  const logger = options.logger ?? createLogger({ service: "decider-test", level: "silent" });
  const maxInflight = options.maxInflight ?? 2;
  const maxQueue = options.maxQueue ?? 256;
  const shared =
    options.sharedRedis === true
      ? new RedisLimits({
          url: options.redisUrl ?? TEST_REDIS,
          prefix: options.redisPrefix ?? `localdecider-test:${randomUUID()}:`,
          maxInflight,
          maxQueue,
          leaseMs: 5000,
          logger,
        })
      : undefined;
  const limiter = new UpstreamLimiter(maxInflight, maxQueue, shared);
  const { app, decider } = createApp({
    backend,
    limiter,
    logger,
    observer,
    apiKey: options.apiKey,
    allowedHosts:
      "allowedHosts" in options
        ? options.allowedHosts
        : hostPolicy({ configured: undefined, listenHost: "127.0.0.1", authenticated: options.apiKey !== undefined }),
    limits: { questionsPerCall: options.questionsPerCall ?? 16, outcomesPerCall: options.outcomesPerCall ?? 128 },
    malformedRetries: options.malformedRetries ?? 2,
    timeoutSeconds: options.timeoutSeconds ?? 30,
    allowNoLogprobs: options.allowNoLogprobs ?? false,
    maxQuestions: options.maxQuestions ?? DEFAULT_MAX_QUESTIONS,
    bodyLimit: byteSize({ min: 1, fallback: "1mb" }).parse(options.bodyLimit),
    maxHeldBytes: options.maxHeldBytes,
    calibration: options.calibration,
    playground: options.playground ?? false,
    hooks: { beforeRoutes: (app) => app.use(recorder.middleware) },
  });
  return { app, decider, limiter, observer, logger, close: () => limiter.stop() };
}

/**
 * The real app in front of a fake model server, started here on a real port; `close` stops both. With shared
 * limits it answers once their first heartbeat reached Redis: they admit nothing before.
 */
export async function deciderInFrontOf<F extends { start(): Promise<string>; stop(): Promise<void> }>(
  fake: F,
  options: HarnessOptions,
): Promise<DeciderUnderTest & { fake: F; upstream: string }> {
  const upstream = await fake.start();
  const d = deciderFor(upstream, options);
  for (let i = 0; options.sharedRedis === true && (await d.limiter.unavailable()) !== undefined; i++) {
    if (i === 200) throw new Error(`the test run's Redis (${TEST_REDIS}) does not answer`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return {
    ...d,
    fake,
    upstream,
    close: async () => {
      await fake.stop();
      await d.close();
    },
  };
}

/** The real app against a fake upstream on a real port. */
export async function harness(options: HarnessOptions = {}): Promise<Harness> {
  const fake = new FakeUpstream({ flavour: options.flavour ?? "vllm" });
  fake.packing = options.packing ?? false;
  return deciderInFrontOf(fake, options);
}

/** The harness's app listening on a real port (for the SDK and for disconnects). */
export async function listen(h: Pick<Harness, "app" | "logger">): Promise<{ url: string; close: () => Promise<void> }> {
  const running = await serve(h.app, { host: "127.0.0.1", port: 0, logger: h.logger, drainTimeoutMs: 1000 });
  return { url: `http://127.0.0.1:${running.port}`, close: running.close };
}

/**
 * A client that disconnects while its request's first call is held at the fake model server: the request is
 * sent over a real connection and cut once that call is in flight. Returns when the fake saw the call aborted
 * and the limiter's queue has drained, for the test to count what reached the server.
 */
export async function disconnectDuringFirstCall(
  h: Pick<DeciderUnderTest, "app" | "logger" | "limiter"> & {
    fake: { holding: boolean; inflight: number; aborted: number };
  },
  body: unknown,
): Promise<void> {
  const server = await listen(h);
  h.fake.holding = true;
  const text = JSON.stringify(body);
  const req = httpRequest(`${server.url}/v1/systemone`, {
    method: "POST",
    headers: { "content-type": "application/json", "content-length": Buffer.byteLength(text) },
  });
  req.on("error", () => {});
  req.end(text);
  await waitFor(() => h.fake.inflight === 1, "the request's first call in flight");
  req.destroy();
  await waitFor(() => h.fake.aborted === 1, "the fake to see the call in flight aborted");
  await waitFor(() => h.limiter.counts().queued === 0 && h.limiter.counts().running === 0, "the queue to drain");
  await server.close();
}

/** Polls a condition on the event loop (no sleeps with a fixed length, no timing assertions). */
export async function waitFor(condition: () => boolean, what = "condition"): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export const sum = (values: Iterable<number>) => [...values].reduce((a, b) => a + b, 0);

/** A logger at `level` whose every line is kept (its console transport silenced). */
export function capturingLogger(level: "info" | "silly" = "silly"): {
  logger: Logger;
  lines: { level: string; message: string; [key: string]: unknown }[];
} {
  const lines: { level: string; message: string }[] = [];
  const logger = createLogger({ service: "decider-test", level });
  for (const t of logger.transports) t.silent = true;
  logger.on("data", (info: { level: string; message: string }) => lines.push(info));
  return { logger, lines };
}
