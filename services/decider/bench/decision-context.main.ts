/**
 * node-llama-cpp's own decisions (LlamaDecisionContext, `model.createDecisionContext`) over HTTP, in a process
 * of its own, for bench/decision-context.bench.ts: `POST /decide` with `{ document, questions }` answers
 * `decideWithMeta`'s `{ answers, tokenUsage }`. Prints its address on stdout, then serves until killed.
 * Usage: node decision-context.main.js <model.gguf> <contextSize> <batchSize> <threads> <parallelQuestions> <auto|off>
 * The last argument is its flash attention: `auto`, its default (createDecisionContext has no option for it;
 * on the CPU llama.cpp then turns it on), or `off` (the model's default for its contexts, set at load), as
 * the decider's engine runs.
 */
import http from "node:http";
import { importNodeLlamaCpp } from "../src/engine/node-llama-cpp";

async function main(): Promise<void> {
  const [model, contextSize, batchSize, threads, parallel, flash] = process.argv.slice(2);
  if (model === undefined || flash === undefined) {
    throw new Error(
      "usage: decision-context.main.js <model.gguf> <contextSize> <batchSize> <threads> <parallel> <auto|off>",
    );
  }
  const lib = await importNodeLlamaCpp();
  const llama = await lib.getLlama({
    gpu: false,
    build: "never",
    logLevel: lib.LlamaLogLevel.error,
    progressLogs: false,
  });
  const loaded = await llama.loadModel({
    modelPath: model,
    ...(flash === "off" ? { defaultContextFlashAttention: false } : {}),
  });
  const decisions = await loaded.createDecisionContext({
    contextSize: Number(contextSize),
    batchSize: Number(batchSize),
    threads: Number(threads),
    parallelQuestions: Number(parallel),
  });
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const { document, questions } = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      decisions.decideWithMeta(document, questions).then(
        (answer) => {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify(answer));
        },
        (err: unknown) => {
          res.writeHead(500, { "content-type": "application/json" });
          res.end(JSON.stringify({ error: String(err) }));
        },
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  // The address, then the flash attention the context runs with.
  process.stdout.write(`http://127.0.0.1:${port} ${String(decisions.flashAttention)}\n`);
  process.on("SIGTERM", () => {
    server.close();
    void llama.dispose().then(() => process.exit(0));
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
