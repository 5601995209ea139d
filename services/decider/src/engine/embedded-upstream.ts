import path from "node:path";
import type { Logger } from "@localdecider/service-kit";
import type { Readiness, ReadinessProbe } from "../upstream/readiness";
import {
  type ProbeOptions,
  type ProbeRequest,
  type ProbeResult,
  type Upstream,
  UpstreamError,
} from "../upstream/types";
import { type DownloadOptions, downloadFile } from "./download";
import { ContextOverflowError } from "./evaluate";
import { type EngineInfo, type EngineOptions, LlamaEngine } from "./llama-engine";
import { type HashedFile, hashFile, inspectKept, removeKept, writeRecord } from "./model-file";
import type { ModelSource } from "./model-source";
import { importNodeLlamaCpp } from "./node-llama-cpp";
import { formatBytes, ProgressGate, percentOf, progressBar } from "./progress";

export interface EmbeddedOptions {
  source: ModelSource;
  /** LOCALDECIDER_MODELS_DIR: where downloaded models are kept. */
  modelsDir: string;
  /** LOCALDECIDER_MODEL_SHA256, when pinned: checked before every load, of a downloaded file or a plain path. */
  sha256: string | undefined;
  engine: Omit<EngineOptions, "modelPath">;
  logger: Logger;
  /** Download retries and their backoff (tests shorten them). */
  download?: Pick<DownloadOptions, "attempts" | "backoffMs">;
  /** Draw a progress bar on stderr (default: when stderr is a terminal). */
  progressBar?: boolean;
}

/** Where the engine is on its way to answering, as /ready tells it. */
export type EngineState =
  | { phase: "verifying" }
  | { phase: "downloading"; percent: number | undefined }
  | { phase: "loading" }
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
  private state: EngineState = { phase: "loading" };
  private readonly stop = new AbortController();
  private started: Promise<void> | undefined;

  constructor(private readonly options: EmbeddedOptions) {}

  /** Downloads (if needed) and loads the model in the background; never rejects (failures become the state). */
  start(): Promise<void> {
    this.started ??= this.boot().catch((err: unknown) => {
      if (this.state.phase === "closed") return;
      const message = reason(err);
      this.state = { phase: "failed", message };
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

  get modelLabel(): string {
    const { source } = this.options;
    return source.kind === "file" ? source.path : source.uri;
  }

  private async boot(): Promise<void> {
    // An installation without the engine (the lean image) says so at once, not after a 1 GB download.
    await importNodeLlamaCpp();
    const modelPath = await this.resolveFile();
    this.state = { phase: "loading" };
    this.options.logger.info("loading model", { file: modelPath });
    let engine: LlamaEngine;
    try {
      engine = await LlamaEngine.open({ ...this.options.engine, modelPath });
    } catch (err) {
      throw new Error(`model ${path.basename(modelPath)} could not be loaded: ${reason(err)}`);
    }
    if (this.stop.signal.aborted) {
      await engine.close();
      return;
    }
    this.state = { phase: "ready", engine };
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
    this.state = { phase: "downloading", percent: undefined };
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
      throw new Error(`model download failed: ${source.uri}: ${reason(err)}`);
    } finally {
      if (bar) process.stderr.write("\n");
    }
    logger.info("model downloaded", { uri: source.uri, file: dest });
    return dest;
  }

  /** SHA-256 of a model file, with the cost in the log: about 2 s per GB read (README, "Model downloads"). */
  private async hash(file: string, against: "pin" | "record", noFollow: boolean): Promise<HashedFile> {
    this.state = { phase: "verifying" };
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

  /** `ready`, or what /ready says while not: `downloading model (42 %)`, `loading model`, or the failure. */
  get stateText(): string {
    const s = this.state;
    switch (s.phase) {
      case "ready":
        return "ready";
      case "verifying":
        return "verifying model (SHA-256)";
      case "downloading":
        return `downloading model (${s.percent ?? 0} %)`;
      case "loading":
        return "loading model";
      case "failed":
        return s.message;
      default:
        return "the embedded engine is shut down";
    }
  }

  async check(): Promise<Readiness> {
    if (this.state.phase === "ready") return { ready: true };
    // Not ready means no decision can be served: the gate answers them 503 with this text.
    return { ready: false, message: this.stateText, modelMissing: true };
  }

  async probe(request: ProbeRequest, { signal, slot }: ProbeOptions): Promise<ProbeResult> {
    if (this.state.phase !== "ready") {
      // The model gate refuses decisions before they get here; this is only a backstop.
      throw new UpstreamError({ kind: "not_ready", status: 503, detail: "the embedded model is not loaded" });
    }
    const { engine } = this.state;
    try {
      const { scores, evaluated } = await engine.score(request.messages, request.continuations, signal, slot);
      return { scores, usage: { input: evaluated, output: 0 } };
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

function reason(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
