import path from "node:path";
import type { BackendInfo } from "@localdecider/contracts";
import type { Logger } from "@localdecider/service-kit";
import type { Config } from "./config";
import { EmbeddedUpstream } from "./engine/embedded-upstream";
import { defaultModelsDir, parseModelSource } from "./engine/model-source";
import { upstreamAddress, upstreamAuthorization } from "./upstream/address";
import { OpenAIUpstream } from "./upstream/openai-upstream";
import { ModelListProbe, type ReadinessProbe } from "./upstream/readiness";
import type { Upstream } from "./upstream/types";

/** What answers the questions, chosen by LOCALDECIDER_UPSTREAM: a model server when set, the embedded engine when not. */
export interface Backend {
  upstream: Upstream;
  probe: ReadinessProbe;
  /** For /ready and the log: the server's address without credentials, or `embedded`. */
  display: string;
  /** The model's name in answers (`localdecider-0.1.0/<this>`) and /ready. */
  model: string;
  describe(): BackendInfo;
  /** Starts what runs in the background (the embedded engine's download and load). */
  start(): void;
  close(): Promise<void>;
}

export function createBackend(config: Config, logger: Logger): Backend {
  const timeoutMs = config.LOCALDECIDER_TIMEOUT * 1000;
  if (config.LOCALDECIDER_UPSTREAM !== undefined) {
    const address = upstreamAddress(config.LOCALDECIDER_UPSTREAM);
    const authorization = upstreamAuthorization(config.LOCALDECIDER_UPSTREAM_API_KEY, address.basicAuth);
    const model = config.LOCALDECIDER_UPSTREAM_MODEL;
    const { baseURL } = address;
    return {
      upstream: new OpenAIUpstream({ baseURL, model, authorization, timeoutMs }),
      probe: new ModelListProbe({ baseURL, model, authorization, timeoutMs: Math.min(timeoutMs, 10_000) }),
      display: address.display,
      model,
      describe: () => ({ kind: "server", address: address.display, model }),
      start: () => undefined,
      close: async () => undefined,
    };
  }
  const source = parseModelSource(config.LOCALDECIDER_MODEL);
  const embedded = new EmbeddedUpstream({
    source,
    modelsDir: config.LOCALDECIDER_MODELS_DIR ?? defaultModelsDir(),
    sha256: config.LOCALDECIDER_MODEL_SHA256,
    engine: {
      gpu: config.LOCALDECIDER_GPU,
      sequences: config.LOCALDECIDER_MAX_INFLIGHT,
      contextSize: config.LOCALDECIDER_CONTEXT_SIZE,
      threads: config.LOCALDECIDER_THREADS,
    },
    logger,
  });
  return embeddedBackend(embedded, source.kind === "file" ? source.path : source.cachePath);
}

/** The embedded engine as a Backend (tests build one over their own EmbeddedUpstream). */
export function embeddedBackend(embedded: EmbeddedUpstream, file: string): Backend {
  return {
    upstream: embedded,
    probe: embedded,
    display: "embedded",
    model: path.basename(file).replace(/\.gguf$/i, ""),
    describe: () => {
      const info = embedded.info;
      const base = { kind: "embedded" as const, source: embedded.modelLabel, state: embedded.stateText };
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
    start: () => {
      void embedded.start();
    },
    close: () => embedded.close(),
  };
}
