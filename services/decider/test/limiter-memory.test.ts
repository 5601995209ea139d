import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { UpstreamLimiter } from "../src/limits/limiter";
import { AbortedError } from "../src/limits/types";

// A full collection on demand: the flag exposes `gc` to contexts made after it is set.
setFlagsFromString("--expose-gc");
const collect = runInNewContext("gc") as () => void;

/**
 * A request abandoned while it waits for its slot stays in Bottleneck's queue until its turn (Bottleneck cannot
 * take a job out): it must not keep what its work holds (its parsed body, its prompts) alive meanwhile, or
 * clients that give up in a long queue fill the heap with requests nobody waits for.
 */
describe("an abandoned hold keeps nothing of its request", () => {
  it("its work (and all it holds) can be collected while the job still waits in the queue", async () => {
    const limiter = new UpstreamLimiter(1, 100);
    const first = await limiter.tryReserve(1, "s");
    const second = await limiter.tryReserve(1, "s");
    if (!("reservation" in first) || !("reservation" in second)) throw new Error("not admitted");
    let free: () => void = () => undefined;
    let running: () => void = () => undefined;
    const firstRuns = new Promise<void>((resolve) => {
      running = resolve;
    });
    const busy = first.reservation.hold(
      () =>
        new Promise<void>((resolve) => {
          free = resolve;
          running();
        }),
      new AbortController().signal,
    );
    // The first hold has its slot, so the second one queues behind it.
    await firstRuns;
    const client = new AbortController();
    const { held, waiting } = (() => {
      const body = { state: "x".repeat(1 << 20) };
      const ref = new WeakRef(body);
      const hold = second.reservation.hold(async () => body.state.length, client.signal);
      return { held: ref, waiting: hold };
    })();
    await new Promise((r) => setImmediate(r));
    client.abort();
    await expect(waiting).rejects.toBeInstanceOf(AbortedError);
    second.reservation.release();
    // Bottleneck still holds the second job (the first hold runs): only what it captured is in question.
    expect(limiter.slotsOf("s").holds).toBe(2);
    await new Promise((r) => setImmediate(r));
    collect();
    // (compared, not printed: a failure would print a MiB of state)
    expect(held.deref() === undefined).toBe(true);
    free();
    await busy;
    first.reservation.release();
    await limiter.stop();
  });
});
