import fs from "node:fs";
import path from "node:path";
import type { Logger } from "@localdecider/service-kit";
import type { ProbeRequest } from "../decide/probe";
import type { Readiness, ReadinessProbe } from "../upstream/readiness";
import { type ProbeResult, type Upstream, UpstreamError } from "../upstream/types";
import { type DownloadOptions, downloadFile } from "./download";
import { ContextOverflowError } from "./evaluate";
import { type EngineInfo, type EngineOptions, LlamaEngine } from "./llama-engine";
import type { ModelSource } from "./model-source";
import { importNodeLlamaCpp } from "./node-llama-cpp";
import { formatBytes, ProgressGate, percentOf, progressBar } from "./progress";

export interface EmbeddedOptions {
  source: ModelSource;
  /** LOCALDECIDER_MODELS_DIR: where downloaded models are kept. */
  modelsDir: string;
  /** LOCALDECIDER_MODEL_SHA256, when pinned. */
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

  /** The model file on disk: as given, or downloaded into the models directory first. */
  private async resolveFile(): Promise<string> {
    const { source, logger } = this.options;
    if (source.kind === "file") return source.path;
    const dest = path.join(this.options.modelsDir, source.cachePath);
    if (fs.existsSync(dest)) return dest;
    this.state = { phase: "downloading", percent: undefined };
    logger.info("downloading model", { uri: source.uri, to: dest });
    const gate = new ProgressGate();
    const bar = this.options.progressBar ?? process.stderr.isTTY === true;
    try {
      await downloadFile({
        url: source.url,
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

  /** `ready`, or what /ready says while not: `downloading model (42 %)`, `loading model`, or the failure. */
  get stateText(): string {
    const s = this.state;
    switch (s.phase) {
      case "ready":
        return "ready";
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

  async probe(request: ProbeRequest, signal: AbortSignal): Promise<ProbeResult> {
    if (this.state.phase !== "ready") {
      // The model gate refuses decisions before they get here; this is only a backstop.
      throw new UpstreamError({ kind: "http", status: 503, message: "the embedded model is not loaded" });
    }
    const { engine } = this.state;
    try {
      const { scores, evaluated } = await engine.score(request.messages, request.continuations, signal);
      return { scores, usage: { input: evaluated, output: 0 } };
    } catch (err) {
      if (signal.aborted) throw new UpstreamError({ kind: "aborted" });
      if (err instanceof ContextOverflowError) {
        // The decider maps a 400 about the context to 400 context_too_long, as for llama-server's own.
        throw new UpstreamError({ kind: "http", status: 400, message: `context size exceeded: ${err.message}` });
      }
      throw new UpstreamError({ kind: "http", status: 500, message: reason(err) });
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
