import { setImmediate as nextTurn } from "node:timers/promises";

/**
 * Runs database operations one at a time, in the order they were asked for, each in a turn of the event
 * loop of its own. For the embedded database: PGlite is one WebAssembly instance in this thread, and a
 * query runs synchronously inside whichever callback's microtasks reach it. Measured under 50 concurrent
 * clients, without this queue the server read a socket, ran that request's query at once and only then
 * read the next socket; which socket came next was up to the poll order, so most requests waited ~40 ms
 * and 1% over 300 ms (server-side durations under 5 ms: the wait was before the request was even read).
 * Yielding one loop turn before each operation lets Node read every request that has arrived and queue
 * it here behind the earlier ones, so requests are served in arrival order and the tail follows the
 * queue's length. See the README, "Performance".
 */
export class TurnQueue {
  private readonly waiting: (() => Promise<void>)[] = [];
  private running = false;

  /** Operations queued or running. */
  get length(): number {
    return this.waiting.length + (this.running ? 1 : 0);
  }

  /** Resolves or rejects as `operation` does, once every operation asked for earlier has settled. */
  run<T>(operation: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      // Called inside a promise, so an operation that throws as it is called rejects like one that fails later.
      this.waiting.push(() => new Promise<T>((settle) => settle(operation())).then(resolve, reject));
      if (!this.running) this.next();
    });
  }

  private next(): void {
    const start = this.waiting.shift();
    this.running = start !== undefined;
    if (start === undefined) return;
    // The turn first: sockets with requests get read (and queued behind this one) before it runs.
    void nextTurn()
      .then(start)
      .finally(() => this.next());
  }
}
