import type { ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { freePort } from "@localdecider/test-env/ports";
import { spawnTracked } from "@localdecider/test-env/processes";
import type { TinyEngine } from "./engine";
import { type ChatMessage, EngineUpstream, renderChatML } from "./engine-upstream";

// Also here for the tests and benches that take their backends from this file.
export { freePort };

/** An OpenAI-compatible model server the decider's tests can call, and the prompt it evaluates. */
export interface AnswerBackend {
  url: string;
  /** The model name the server lists at /v1/models. */
  model: string;
  /** The prompt text the server evaluates for these chat messages. */
  promptOf(messages: readonly ChatMessage[]): Promise<string>;
  stop(): Promise<void>;
}

/** A model server in a process of its own, which a test can also kill outright. */
export interface ProcessBackend extends AnswerBackend {
  /** Its process id (the benchmark reads its CPU time). */
  pid: number | undefined;
  /** SIGKILL: the server dies at once, cutting what it was answering. */
  kill(): Promise<void>;
}

/** node-llama-cpp behind the llama.cpp-shaped test upstream, in this process on a port of its own. */
export async function engineBackend(engine: TinyEngine, model = "tiny.gguf"): Promise<AnswerBackend> {
  const upstream = new EngineUpstream(engine, model);
  const url = await upstream.start();
  return { url, model, promptOf: async (messages) => renderChatML(messages), stop: () => upstream.stop() };
}

/**
 * A real llama-server binary (given by LLAMA_SERVER_BIN; never part of the repository) on loopback,
 * serving the tiny model with the slots and shared context the README recommends. The prompt it
 * evaluates is asked of its own `/apply-template`, so the expectation uses the server's template.
 */
export async function llamaServerBackend(
  bin: string,
  modelFile: string,
  extraArgs: string[] = [],
  /** How long it may take to load the model and answer /health (a large model on a GPU takes longer). */
  readyWithinMs = 60_000,
  /** A file that gets the server's whole log too (a benchmark keeps it; tests keep only its tail). */
  logFile?: string,
): Promise<ProcessBackend> {
  const port = await freePort();
  // Without --alias the server lists the path it was given.
  const model = path.basename(modelFile);
  const child: ChildProcess = spawnTracked(
    bin,
    [
      "-m",
      modelFile,
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "-c",
      "8192",
      "--parallel",
      "2",
      "--no-webui",
      "-t",
      "1",
      "--alias",
      model,
      ...extraArgs,
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let log = "";
  const whole = logFile === undefined ? undefined : fs.createWriteStream(logFile, { flags: "a" });
  child.stderr?.on("data", (chunk: Buffer) => {
    log = (log + chunk.toString("utf8")).slice(-4000);
    whole?.write(chunk);
  });
  child.once("exit", () => whole?.end());
  const url = `http://127.0.0.1:${port}`;
  const stop = () => stopProcess(child);
  try {
    await waitUntilOk(`${url}/health`, () => child.exitCode !== null, readyWithinMs);
  } catch (err) {
    await stop();
    throw new Error(`${String(err)}; llama-server's log:\n${log}`);
  }
  return {
    url,
    model,
    pid: child.pid,
    promptOf: async (messages) => {
      const ask = () =>
        fetch(`${url}/apply-template`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ messages }),
        });
      // llama-server closes idle kept-alive connections; a request sent on one as it closes fails with
      // "other side closed" before any answer, and is sent once more (as the decider's own calls are).
      const res = await ask().catch(ask);
      if (!res.ok) throw new Error(`/apply-template answered ${res.status}: ${await res.text()}`);
      return ((await res.json()) as { prompt: string }).prompt;
    },
    stop,
    kill: () => stopProcess(child, "SIGKILL"),
  };
}

/** Polls a URL until it answers 2xx; bounded at `withinMs` (60 s), or until `gone()` says the server exited. */
export async function waitUntilOk(url: string, gone: () => boolean = () => false, withinMs = 60_000): Promise<void> {
  for (let i = 0; i < withinMs / 100; i++) {
    if (gone()) throw new Error(`the server behind ${url} exited`);
    const ok = await fetch(url).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not answer 2xx within ${withinMs / 1000} s`);
}

/** SIGTERM (or `signal`), and wait until the process has exited (at once if it already has). */
export async function stopProcess(child: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill(signal);
  await exited;
}
