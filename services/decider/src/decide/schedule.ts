/**
 * The order a request's calls run in while it holds a slot. Calls of one prompt share it as a cached
 * prefix, and a server only reads that prefix once if the calls find it cached:
 *
 * - `slot` (llama.cpp, the embedded engine, any server we cannot tell): a prompt cache per slot, so the
 *   calls run one at a time in the request's slot, prompt after prompt; each call evaluates only what
 *   differs from the call before (its prefill, or the next prompt's questions after the shared state).
 * - `shared` (vLLM, SGLang): one prefix cache for every sequence, so the first call of each prompt runs
 *   alone and caches the prefix, then the prompt's other calls run at once and read it.
 *
 * Every call runs, even after one fails (a failure ends the hold only once the calls under way settled, so
 * none still runs when the slot is handed on); the first failure is then thrown.
 */
export async function runInOrder<T>(
  prompts: readonly (readonly T[])[],
  prefixCache: "slot" | "shared",
  call: (job: T) => Promise<void>,
): Promise<void> {
  for (const jobs of prompts) {
    if (jobs.length === 0) continue;
    if (prefixCache === "slot") {
      for (const job of jobs) await call(job);
      continue;
    }
    const [first, ...rest] = jobs as [T, ...T[]];
    await call(first);
    const settled = await Promise.allSettled(rest.map(call));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
    if (failed !== undefined) throw failed.reason;
  }
}
