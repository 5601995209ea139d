/**
 * The test suite's fake native System One server (test/fake-systemone, llama.cpp's published contract) in a
 * process of its own, answering at once, for benchmarks. Prints its address on the first line of stdout; runs
 * until SIGTERM, or until the benchmark that started it goes away.
 */
import { FakeSystemOne } from "../test/fake-systemone/server";

async function main(): Promise<void> {
  const fake = new FakeSystemOne({ flavour: "llama" });
  const url = await fake.start();
  process.stdout.write(`${url}\n`);
  // What a test keeps of every call would only grow here: dropped every second.
  setInterval(() => {
    fake.requests = [];
    fake.headers = [];
    fake.reported = [];
    fake.paths = [];
  }, 1000).unref();
  const stop = () => void fake.stop().then(() => process.exit(0));
  process.once("SIGTERM", stop);
  process.once("disconnect", stop);
}

void main();
