import path from "node:path";
import type { Logger } from "@localdecider/service-kit";
import type { Readiness, ReadinessProbe } from "../upstream/readiness";
import {
  type ProbeOptions,
  type ProbeRequest,
  type ProbeResult,
  type ScoredResult,
  type Upstream,
  UpstreamError,
} from "../upstream/types";
import { DEMO_LABEL, demoModelFile } from "./demo/demo-model";
import { DownloadError, type DownloadOptions, downloadFile } from "./download";
import { ContextOverflowError } from "./evaluate";
import { type EngineInfo, type EngineOptions, LlamaEngine } from "./llama-engine";
import { type HashedFile, hashFile, inspectKept, removeKept, writeRecord } from "./model-file";
import type { ModelSource } from "./model-source";
import { importNodeLlamaCpp } from "./node-llama-cpp";
import { formatBytes, PercentGate, ProgressGate, percentOf, progressBar } from "./progress";

export interface EmbeddedOptions {
  source: ModelSource;
  /** LOCALDECIDER_MODELS_DIR: where downloaded models are kept. */
  modelsDir: string;
  /** LOCALDECIDER_MODEL_SHA256, when pinned: checked before every load, of a downloaded file or a plain path. */
  sha256: string | undefined;
  engine: Omit<EngineOptions, "modelPath">;
  logger: Logger;
  /** Download retries and their backoff (tests shorten them), and where the proxy variables are read. */
  download?: Pick<DownloadOptions, "attempts" | "backoffMs" | "env">;
  /** Draw a progress bar on stderr (default: when stderr is a terminal). */
  progressBar?: boolean;
}

/** Where the engine is on its way to answering, as /ready tells it. */
export type EngineState =
  /** Before anything else: the engine's binary is loaded and the model file looked for. */
  | { phase: "starting" }
  | { phase: "verifying" }
  | {
      phase: "downloading";
      percent: number | undefined;
      /** While a failed try waits for the next one: which one that is, and why the last failed. */
      retry?: { attempt: number; attempts: number; reason: string };
    }
  | { phase: "loading"; percent?: number }
  | { phase: "ready"; engine: LlamaEngine }
  | { phase: "failed"; message: string }
  | { phase: "closed" };

/**
 * The decider's upstream when no model server is configured: a GGUF model in this process (LlamaEngine),
 * downloaded first when LOCALDECIDER_MODEL names one to fetch. The service listens at once; until the model
 * is loaded, /ready and decisions answer 503 with the state (`downloading model (42 %)`, `loading model`),
 * and a failed download or load stays a 503 that names the model and the reason: the process lives on.
 */
export class EmbeddedUpstream implements Upstream, ReadinessProbe {
  /** Every outcome is scored, so a choice of any size is one probe. */
  readonly outcomesPerPart = Number.POSITIVE_INFINITY;
  /** Each slot is a sequence of the context, which keeps what it evaluated last. */
  readonly prefixCache = "slot";
  /** The state is in memory: decisions read it fresh every time. */
  readonly maxAgeMs = 0;
  private state: EngineState = { phase: "starting" };
  private readonly stop = new AbortController();
  private started: Promise<void> | undefined;

  constructor(private readonly options: EmbeddedOptions) {}

  /** Downloads (if needed) and loads the model in the background; never rejects (failures become the state). */
  start(): Promise<void> {
    this.started ??= this.boot().catch((err: unknown) => {
      if (this.state.phase === "closed") return;
      const message = reason(err);
      this.setState({ phase: "failed", message });
      this.options.logger.error("embedded model unavailable", { reason: message });
    });
    return this.started;
  }

  get current(): EngineState {
    return this.state;
  }

  /** The loaded model, for GET /v1/models and the start-up log. */
  get info(): EngineInfo | undefined {
    return this.state.phase === "ready" ? this.state.engine.info : undefined;
  }

  /** Sequences lent now and at most since start (undefined before the model is loaded). */
  get sequencesBusy(): { now: number; peak: number; waits: number } | undefined {
    return this.state.phase === "ready" ? this.state.engine.sequencesBusy : undefined;
  }

  /** LOCALDECIDER_MODEL=demo: random weights, answers meaningless; said wherever the model is named. */
  get isDemo(): boolean {
    return this.options.source.kind === "demo";
  }

  get modelLabel(): string {
    const { source } = this.options;
    if (source.kind === "demo") return DEMO_LABEL;
    return source.kind === "file" ? source.path : source.uri;
  }

  private async boot(): Promise<void> {
    // An installation without the engine (the lean image) says so at once, not after a 1 GB download.
    await importNodeLlamaCpp();
    const modelPath = await this.resolveFile();
    this.setState({ phase: "loading" });
    this.options.logger.info("loading model", { file: modelPath });
    const gate = new PercentGate();
    const onLoadProgress = (loaded: number) => {
      if (this.state.phase !== "loading") return;
      const percent = Math.min(100, Math.floor(loaded * 100));
      this.state = { phase: "loading", percent };
      if (gate.shouldLog(percent)) this.options.logger.info("loading model", { file: modelPath, percent });
    };
    let engine: LlamaEngine;
    try {
      engine = await LlamaEngine.open({ ...this.options.engine, modelPath, onLoadProgress });
    } catch (err) {
      throw new Error(`model ${path.basename(modelPath)} could not be loaded: ${reason(err)}`);
    }
    if (this.stop.signal.aborted) {
      await engine.close();
      return;
    }
    this.setState({ phase: "ready", engine });
    const { info } = engine;
    this.options.logger.info("model loaded", { ...info, size: formatBytes(info.sizeBytes) });
  }

  /**
   * The model file on disk, checked before it is loaded: a plain path against the pin (when set); a file in the
   * models directory against the pin, else against the record of its verified download (model-file.ts). A kept
   * file that is missing or fails is (deleted and) downloaded again.
   */
  private async resolveFile(): Promise<string> {
    const { source, logger } = this.options;
    const pin = this.options.sha256;
    if (source.kind === "demo") {
      const { file, written } = await demoModelFile(path.join(this.options.modelsDir, "demo"));
      logger.warn("demo model: random weights, its answers are meaningless", { file, written });
      return file;
    }
    if (source.kind === "file") {
      if (pin === undefined) return source.path;
      const { sha256: actual } = await this.hash(source.path, "pin", false);
      if (actual !== pin) {
        throw new Error(
          `model file ${source.path} has SHA-256 ${actual}, not the ${pin} that LOCALDECIDER_MODEL_SHA256 pins; it was not loaded`,
        );
      }
      return source.path;
    }
    const dest = path.join(this.options.modelsDir, source.cachePath);
    const kept = inspectKept(dest, source.recorded, pin);
    if (kept.state === "unchanged") {
      logger.info("model verified", { file: dest, sha256: kept.sha256, against: "record", hashed: false });
      return dest;
    }
    if (kept.state === "hash") {
      const { sha256: actual, stat } = await this.hash(dest, kept.against, true);
      if (actual === kept.expected) {
        writeRecord(dest, source.recorded, actual, stat);
        return dest;
      }
      const which = kept.against === "pin" ? "LOCALDECIDER_MODEL_SHA256" : "its recorded download";
      logger.warn("model file refused: downloading it again", {
        file: dest,
        reason: `SHA-256 ${actual}, expected ${kept.expected} (${which})`,
      });
      removeKept(dest);
    } else if (kept.state === "untrusted") {
      logger.warn("model file refused: downloading it again", { file: dest, reason: kept.reason });
      removeKept(dest);
    }
    this.setState({ phase: "downloading", percent: undefined });
    logger.info("downloading model", { uri: source.uri, to: dest });
    const gate = new ProgressGate();
    const bar = this.options.progressBar ?? process.stderr.isTTY === true;
    try {
      await downloadFile({
        url: source.url,
        recordAs: source.recorded,
        ...(source.authorization === undefined ? {} : { authorization: source.authorization }),
        dest,
        ...(this.options.sha256 === undefined ? {} : { sha256: this.options.sha256 }),
        signal: this.stop.signal,
        ...this.options.download,
        onRetry: (retry) => {
          const percent = this.state.phase === "downloading" ? this.state.percent : undefined;
          const { attempt, attempts, reason } = retry;
          this.state = { phase: "downloading", percent, retry: { attempt, attempts, reason } };
          logger.warn("model download failed; trying again", { uri: source.uri, ...retry });
        },
        onProgress: (progress) => {
          this.state = { phase: "downloading", percent: percentOf(progress) };
          if (bar) process.stderr.write(`\r${progressBar(progress)}\u001b[K`);
          if (gate.shouldLog(progress)) {
            logger.info("downloading model", {
              uri: source.uri,
              percent: percentOf(progress),
              received: progress.received,
              total: progress.total,
              bytesPerSecond: Math.round(progress.bytesPerSecond),
              rate: `${formatBytes(progress.bytesPerSecond)}/s`,
            });
          }
        },
      });
    } catch (err) {
      const hint = downloadHint(source, err, this.options.download?.env ?? process.env);
      throw new Error(`model download failed: ${source.uri}: ${reason(err)}${hint}`);
    } finally {
      if (bar) process.stderr.write("\n");
    }
    logger.info("model downloaded", { uri: source.uri, file: dest });
    return dest;
  }

  /** SHA-256 of a model file, with the cost in the log: about 2 s per GB read (README, "Model downloads"). */
  private async hash(file: string, against: "pin" | "record", noFollow: boolean): Promise<HashedFile> {
    this.setState({ phase: "verifying" });
    const { logger } = this.options;
    logger.info("verifying model", { file, against });
    const began = performance.now();
    let hashed: HashedFile;
    try {
      hashed = await hashFile(file, noFollow);
    } catch (err) {
      throw new Error(`model file ${file} could not be read to check its SHA-256: ${reason(err)}`);
    }
    const ms = Math.round(performance.now() - began);
    const { sha256, stat } = hashed;
    logger.info("model verified", { file, sha256, against, hashed: true, size: formatBytes(stat.size), ms });
    return hashed;
  }

  /**
   * A change of phase, logged at debug with what /ready says from now on (a download's or a load's percent
   * changes the state without a line here: those have lines of their own).
   */
  private setState(state: EngineState): void {
    const before = this.state.phase;
    this.state = state;
    if (state.phase !== before) this.options.logger.debug("embedded engine state", { state: this.stateText });
  }

  /**
   * `ready`, or what /ready says while not, in the order it happens: `starting the engine`, `verifying model
   * (SHA-256)`, `downloading model (42 %)`, `loading model`, or the failure.
   */
  get stateText(): string {
    const s = this.state;
    switch (s.phase) {
      case "ready":
        return "ready";
      case "starting":
        return "starting the engine";
      case "verifying":
        return "verifying model (SHA-256)";
      case "downloading":
        return s.retry === undefined
          ? `downloading model (${s.percent ?? 0} %)`
          : `downloading model (${s.percent ?? 0} %), retrying (try ${s.retry.attempt} of ${s.retry.attempts}) after: ${s.retry.reason}`;
      case "loading":
        return s.percent === undefined ? "loading model" : `loading model (${s.percent} %)`;
      case "failed":
        return s.message;
      default:
        return "the embedded engine is shut down";
    }
  }

  async check(): Promise<Readiness> {
    if (this.state.phase === "ready") return { ready: true };
    // Not ready means no decision can be served: the gate answers them 503 with this text.
    const starting = ["starting", "verifying", "downloading", "loading"].includes(this.state.phase);
    return { ready: false, message: this.stateText, modelMissing: true, starting };
  }

  async probe(request: ProbeRequest, options: ProbeOptions): Promise<ProbeResult> {
    const [only] = await this.probeMany([request], options);
    return only as ProbeResult;
  }

  /**
   * The probes of one prompt in one call (they share all but their prefilled answer): the prompt is tokenized
   * once and evaluated once in the slot's sequence, then each probe's own tokens (LlamaEngine.scoreMany). Each
   * result counts what its probe evaluated; the first also the shared prompt, when it was not in the sequence.
   */
  async probeMany(requests: readonly ProbeRequest[], { signal, cacheKey }: ProbeOptions): Promise<ScoredResult[]> {
    if (this.state.phase !== "ready") {
      // The model gate refuses decisions before they get here; this is only a backstop.
      throw new UpstreamError({ kind: "not_ready", status: 503, detail: "the embedded model is not loaded" });
    }
    const { engine } = this.state;
    try {
      const results = await engine.scoreMany(requests, signal, cacheKey);
      return results.map(({ scores, evaluated, cached }) => ({
        scores,
        usage: { input: evaluated, output: 0, cached },
      }));
    } catch (err) {
      if (signal.aborted) throw new UpstreamError({ kind: "aborted" });
      // Each sequence has a context of its own: a prompt that does not fit does not fit alone.
      if (err instanceof ContextOverflowError) {
        throw new UpstreamError({ kind: "context_overflow", together: false, detail: err.message });
      }
      throw new UpstreamError({ kind: "server_error", status: 500, detail: reason(err) });
    }
  }

  /** Stops a download under way and frees the model. */
  async close(): Promise<void> {
    const s = this.state;
    this.state = { phase: "closed" };
    this.stop.abort();
    if (s.phase === "ready") await s.engine.close();
  }
}

/**
 * What to do about a failed download, after its reason: when no answer came (no network, no name, refused),
 * the ways around it; when the hub refused an hf: file, the token. Names variables only, never their values.
 */
function downloadHint(
  source: Extract<ModelSource, { kind: "download" }>,
  err: unknown,
  env: NodeJS.ProcessEnv,
): string {
  if (!(err instanceof DownloadError)) return "";
  const hf = source.uri.startsWith("hf:");
  if (err.unreachable) {
    const proxy = ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"].find((v) => (env[v] ?? "") !== "");
    return (
      `. ${new URL(source.url).host} cannot be reached from here${proxy === undefined ? "" : ` (through the proxy in ${proxy})`}: ` +
      "put the model file on this machine and set LOCALDECIDER_MODEL to its path, set LOCALDECIDER_UPSTREAM to a model server" +
      (hf ? ", set HF_ENDPOINT to a Hugging Face mirror" : "") +
      (proxy === undefined
        ? ", or set HTTPS_PROXY to the proxy this machine reaches the internet through"
        : ", or check that proxy")
    );
  }
  if (hf && /^HTTP 40[13]\b/.test(err.message)) {
    return source.authorization === undefined
      ? ". The hub refused it: a gated or private repository needs HF_TOKEN (a Hugging Face access token)"
      : ". The hub refused HF_TOKEN for it: check that the token may read this repository";
  }
  return "";
}

function reason(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
