/**
 * The test suite's fake model server in a process of its own, every call taking a fixed time (argv[2], ms),
 * for benchmarks, in the flavour argv[3] names (vllm by default; llama with llama-server's own endpoints). Prints its address on the first line of stdout; runs until SIGTERM. Started with an IPC
 * channel (bench/processes.ts), it answers "stats" with its chat calls and their peak concurrency, and
 * "reset" by counting again from now (dropping the calls it keeps for tests, which would only grow here).
 */
import { FakeUpstream } from "../test/fake-upstream/server";

async function main(): Promise<void> {
  const fake = new FakeUpstream({ flavour: process.argv[3] === "llama" ? "llama" : "vllm" });
  // As a current llama-server: its own /apply-template, /tokenize and /completion too.
  fake.packing = true;
  fake.latencyMs = Number(process.argv[2] ?? 0);
  const url = await fake.start();
  process.stdout.write(`${url}\n`);
  process.on("message", (message) => {
    if (message === "reset") {
      fake.calls = 0;
      fake.maxInflight = fake.inflight;
      fake.requests = [];
      fake.reported = [];
      fake.busy = [];
      fake.authorizations = [];
      fake.concurrencyAtArrival = [];
    }
    process.send?.({ calls: fake.calls, peak: fake.maxInflight });
  });
  const stop = () => void fake.stop().then(() => process.exit(0));
  process.once("SIGTERM", stop);
  // The benchmark that started it is gone (killed): nothing will ever send SIGTERM.
  process.once("disconnect", stop);
}

void main();
