/**
 * The benchmark's model server, in a process of its own: the llama.cpp-shaped test upstream answering
 * from node-llama-cpp over the tiny generated model, reusing the evaluated prompt prefix between calls as
 * llama-server's prompt cache does. Prints its address on stdout, then serves until killed.
 * Usage: node engine-upstream.main.js <model.gguf>
 */
import { openEngine } from "../test/engine/engine";
import { EngineUpstream } from "../test/engine/engine-upstream";

async function main(): Promise<void> {
  const model = process.argv[2];
  if (model === undefined) throw new Error("usage: engine-upstream.main.js <model.gguf>");
  const engine = await openEngine(model, { reusePrefix: true });
  const upstream = new EngineUpstream(engine, "tiny.gguf");
  const url = await upstream.start();
  process.stdout.write(`${url}\n`);
  process.on("SIGTERM", () => {
    void upstream.stop().then(() => engine.close().then(() => process.exit(0)));
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
