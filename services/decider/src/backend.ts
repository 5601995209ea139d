import path from "node:path";
import type { BackendInfo } from "@localdecider/contracts/decider";
import type { Logger } from "@localdecider/service-kit";
import type { Config } from "./config";
import { DEMO_FILE } from "./engine/demo/demo-model";
import { EmbeddedUpstream } from "./engine/embedded-upstream";
import { defaultModelsDir, parseModelSource } from "./engine/model-source";
import { parseUpstreams } from "./upstream/address";
import { CHAT_SERVERS_RUN } from "./upstream/failure";
import { ModelServer } from "./upstream/model-server";
import { type PoolServer, ServerPool } from "./upstream/pool";
import type { Upstream } from "./upstream/types";

/**
 * What answers the questions, chosen by LOCALDECIDER_UPSTREAM: the model servers it lists when set, the
 * embedded engine when not (a pool of one).
 */
export interface Backend {
  pool: ServerPool;
  /** For /ready and the log: the servers' addresses without credentials (comma separated), or `embedded`. */
  display: string;
  /** The model's name in answers (`localdecider-0.1.0/<this>`) and /ready. */
  model: string;
  describe(): BackendInfo;
  /**
   * What its upstream takes beyond text, asked per request (a server's protocol may be learnt after start):
   * routes/images.ts lets images and box questions through only when `images` is true.
   */
  upstreamAccepts(): UpstreamAccepts;
  /** Starts what runs in the background (the embedded engine's download and load). */
  start(): void;
  close(): Promise<void>;
}

/**
 * Whether the upstream takes Jev 1.14's images (`assets`) and `box` questions, and what the backend is, for
 * the 422 that refuses them (`this decider runs <runs>`). Only a native System One server can take them.
 */
export interface UpstreamAccepts {
  images: boolean;
  runs: string;
}

/** What chat model servers and the embedded engine take: text questions only. */
export const CHAT_SERVER_ACCEPTS: UpstreamAccepts = { images: false, runs: CHAT_SERVERS_RUN };
export const EMBEDDED_ACCEPTS: UpstreamAccepts = { images: false, runs: "the embedded engine (node-llama-cpp)" };
/** What a pool with a server that answers System One itself takes: images and box questions too. */
export const NATIVE_SERVER_ACCEPTS: UpstreamAccepts = {
  images: true,
  runs: "a model server that answers System One itself",
};

/**
 * `slots`: how many requests the limiter runs at once on each server, each in one numbered slot
 * (UpstreamLimiter.maxInflight): a llama.cpp server is checked to have that many, and the embedded engine
 * gets one sequence per slot, so the slot a request holds is the sequence it is lent.
 */
export function createBackend(config: Config, logger: Logger, slots: number): Backend {
  const timeoutMs = config.LOCALDECIDER_TIMEOUT * 1000;
  if (config.LOCALDECIDER_UPSTREAM !== undefined) {
    const parsed = parseUpstreams(config.LOCALDECIDER_UPSTREAM);
    if ("problem" in parsed) throw new Error(`LOCALDECIDER_UPSTREAM ${parsed.problem}`);
    const model = config.LOCALDECIDER_UPSTREAM_MODEL;
    const servers = parsed.addresses.map(
      (address) =>
        new ModelServer({
          address,
          model,
          apiKey: config.LOCALDECIDER_UPSTREAM_API_KEY,
          timeoutMs,
          maxInflight: slots,
          allowNoLogprobs: config.LOCALDECIDER_ALLOW_NO_LOGPROBS,
          protocol: config.LOCALDECIDER_UPSTREAM_PROTOCOL,
          packPrompts: config.LOCALDECIDER_PACK_PROMPTS,
          maxBodyBytes: config.LOCALDECIDER_UPSTREAM_MAX_BODY,
          logger,
        }),
    );
    return serversBackend(servers, model, logger);
  }
  const source = parseModelSource(config.LOCALDECIDER_MODEL);
  const embedded = new EmbeddedUpstream({
    source,
    modelsDir: config.LOCALDECIDER_MODELS_DIR ?? defaultModelsDir(),
    sha256: config.LOCALDECIDER_MODEL_SHA256,
    engine: {
      gpu: config.LOCALDECIDER_GPU,
      sequences: slots,
      contextSize: config.LOCALDECIDER_CONTEXT_SIZE,
      threads: config.LOCALDECIDER_THREADS,
      stateCacheMiB: config.LOCALDECIDER_STATE_CACHE_MIB,
    },
    logger,
  });
  const file = source.kind === "demo" ? DEMO_FILE : source.kind === "file" ? source.path : source.cachePath;
  return embeddedBackend(embedded, file, logger);
}

/** Model servers already made (one or several) as a Backend: the pool that chooses among them. */
export function serversBackend(servers: readonly PoolServer[], model: string, logger: Logger): Backend {
  const pool = new ServerPool(servers, logger);
  const display = servers.map((s) => s.id).join(",");
  return {
    pool,
    display,
    model,
    describe: () => {
      const states = pool.states();
      if (states.length === 1) {
        const protocol = states[0]?.protocol;
        return { kind: "server", address: display, model, ...(protocol === undefined ? {} : { protocol }) };
      }
      return {
        kind: "server",
        address: display,
        model,
        servers: states.map((s) => ({ server: s.id, ...(s.protocol === undefined ? {} : { protocol: s.protocol }) })),
      };
    },
    // Images and box questions pass while a server speaks System One itself (the decider sends them there), or
    // may: one not checked yet is asked before the request is planned, and the decider refuses it the same way
    // when none does.
    upstreamAccepts: () => (servers.some((s) => s.protocol !== "chat") ? NATIVE_SERVER_ACCEPTS : CHAT_SERVER_ACCEPTS),
    start: () => undefined,
    close: async () => pool.close(),
  };
}

/**
 * The embedded engine as a Backend (tests build one over their own EmbeddedUpstream, and may put a
 * recorder in front of it: `upstream`).
 */
export function embeddedBackend(
  embedded: EmbeddedUpstream,
  file: string,
  logger: Logger,
  upstream: Upstream = embedded,
): Backend {
  // No address to keep from anyone: the same text with or without the API key.
  const display = embedded.isDemo ? "embedded demo model (random weights: its answers are meaningless)" : "embedded";
  return {
    pool: new ServerPool([{ id: "embedded", label: display, upstream, probe: embedded }], logger),
    display,
    model: path.basename(file).replace(/\.gguf$/i, ""),
    describe: () => {
      const info = embedded.info;
      const base = {
        kind: "embedded" as const,
        source: embedded.modelLabel,
        state: embedded.stateText,
        phase: embedded.current.phase,
      };
      if (info === undefined) return base;
      return {
        ...base,
        gpu: info.backend,
        model: {
          file: info.file,
          ...(info.architecture === undefined ? {} : { architecture: info.architecture }),
          quantization: info.quantization,
          size_bytes: info.sizeBytes,
          context_size: info.contextSize,
          sequences: info.sequences,
          train_context_size: info.trainContextSize,
        },
      };
    },
    upstreamAccepts: () => EMBEDDED_ACCEPTS,
    start: () => {
      void embedded.start();
    },
    close: () => embedded.close(),
  };
}
