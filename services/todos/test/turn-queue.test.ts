import { TurnQueue } from "../src/storage/turn-queue";

/** An operation the test finishes by hand, recording when it starts. */
function gate(events: string[], name: string) {
  let finish!: (value: string) => void;
  let fail!: (err: Error) => void;
  const done = new Promise<string>((resolve, reject) => {
    finish = resolve;
    fail = reject;
  });
  const operation = () => {
    events.push(`start ${name}`);
    return done;
  };
  return { operation, finish: () => finish(name), fail: (err: Error) => fail(err) };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe("TurnQueue (the embedded database's queue)", () => {
  it("when operations are asked for at once, then they run one at a time, in the order asked", async () => {
    const queue = new TurnQueue();
    const events: string[] = [];
    const [a, b, c] = [gate(events, "a"), gate(events, "b"), gate(events, "c")];
    const results = [queue.run(a.operation), queue.run(b.operation), queue.run(c.operation)];
    expect(queue.length).toBe(3);
    await turn();
    await turn();
    expect(events).toStrictEqual(["start a"]);
    c.finish(); // finishing a later one first changes nothing: it has not started
    b.finish();
    await turn();
    expect(events).toStrictEqual(["start a"]);
    a.finish();
    await expect(Promise.all(results)).resolves.toStrictEqual(["a", "b", "c"]);
    expect(events).toStrictEqual(["start a", "start b", "start c"]);
    await turn(); // the queue notes the last one done just after its caller hears of it
    expect(queue.length).toBe(0);
  });

  it("when an operation rejects or throws as it is called, then its caller gets that error and the next ones still run", async () => {
    const queue = new TurnQueue();
    const events: string[] = [];
    const failing = gate(events, "failing");
    const rejected = queue.run(failing.operation);
    const thrown = queue.run(() => {
      throw new Error("thrown at call");
    });
    const after = queue.run(async () => "after");
    failing.fail(new Error("rejected"));
    await expect(rejected).rejects.toThrow("rejected");
    await expect(thrown).rejects.toThrow("thrown at call");
    await expect(after).resolves.toBe("after");
  });

  it("when one operation finishes, then the event loop turns (I/O and immediates run) before the next starts", async () => {
    const queue = new TurnQueue();
    const events: string[] = [];
    const first = queue.run(async () => {
      events.push("first");
      // Scheduled before the first settles: without a turn between operations the second would start first.
      setImmediate(() => events.push("turn"));
    });
    const second = queue.run(async () => {
      events.push("second");
    });
    await Promise.all([first, second]);
    expect(events).toStrictEqual(["first", "turn", "second"]);
  });
});
