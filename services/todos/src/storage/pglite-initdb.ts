import { existsSync } from "node:fs";
import path from "node:path";
import { Worker } from "node:worker_threads";

/**
 * Creates the embedded database's cluster (PGlite's initdb) in a worker thread that exits afterwards, when the
 * directory holds none yet. Why: initdb runs in a WebAssembly instance of its own whose memory stays mapped
 * for the life of the thread that ran it. Run in the service's own thread, the first start on a new directory
 * held ~800 MB of RSS for good (measured: 813 MB after the open, 649 MB after work and a GC), against ~300 MB
 * for any later start on the same directory. A worker's instances and memory go when it exits, so the
 * service then opens the directory as on any later start. Costs one more open on the first start (~1.5 s).
 */
export async function initialisePgliteDir(dataDir: string): Promise<boolean> {
  if (existsSync(path.join(dataDir, "PG_VERSION"))) return false;
  // The worker loads PGlite by its resolved path: an eval'd worker resolves modules from the working directory.
  const pglite = require.resolve("@electric-sql/pglite");
  const source = `
    const { workerData } = require("node:worker_threads");
    const { PGlite } = require(workerData.pglite);
    PGlite.create(workerData.dataDir).then((db) => db.close()).catch((err) => {
      process.exitCode = 1;
      throw err;
    });`;
  await new Promise<void>((resolve, reject) => {
    const worker = new Worker(source, { eval: true, workerData: { pglite, dataDir } });
    let failure: Error | undefined;
    worker.once("error", (err) => {
      failure = err;
    });
    worker.once("exit", (code) => {
      if (failure !== undefined) reject(failure);
      else if (code !== 0) reject(new Error(`creating the embedded database in ${dataDir} failed (exit ${code})`));
      else resolve();
    });
  });
  return true;
}
