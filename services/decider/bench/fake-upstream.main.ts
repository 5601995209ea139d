/**
 * The test suite's fake model server in a process of its own, every call taking a fixed time (argv[2], ms),
 * for benchmarks. Prints its address on the first line of stdout; runs until SIGTERM.
 */
import { FakeUpstream } from "../test/fake-upstream/server";

async function main(): Promise<void> {
  const fake = new FakeUpstream();
  fake.latencyMs = Number(process.argv[2] ?? 0);
  const url = await fake.start();
  process.stdout.write(`${url}\n`);
  process.once("SIGTERM", () => {
    void fake.stop().then(() => process.exit(0));
  });
}

void main();
