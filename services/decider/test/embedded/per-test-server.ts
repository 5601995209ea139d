import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { ModelFileServer } from "./model-server";

/**
 * For each test of the calling file: a model file server on loopback and an empty models directory (a new
 * temporary one, its name starting with `prefix`), handed to `use` before the test, stopped and removed
 * after it, so that no test sees another's files or served paths.
 */
export function serverAndDirPerTest(prefix: string, use: (server: ModelFileServer, dir: string) => void): void {
  let server: ModelFileServer | undefined;
  let dir: string | undefined;
  beforeEach(async () => {
    server = new ModelFileServer();
    await server.start();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    use(server, dir);
  });
  afterEach(async () => {
    await server?.stop();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  });
}
