import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import request from "supertest";
import { buildApp, pgliteMode, STORAGE_MODES, type StorageLocation } from "./support/storage-modes";

describe.each(STORAGE_MODES)("restarting the service on $name", (mode) => {
  let location: StorageLocation;
  beforeAll(async () => {
    location = await mode.locate();
  });
  afterAll(async () => {
    await location?.dispose();
  });

  it("when the app and its database client are closed and rebuilt on the same database, the item is still there", async () => {
    const first = await buildApp(location.options);
    const created = await request(first.app).post("/users/survivor/todos").send({ title: "persist me" }).expect(201);
    await first.repository.close();

    const second = await buildApp(location.options);
    try {
      const res = await request(second.app).get("/users/survivor/todos").expect(200);
      expect(res.body).toStrictEqual({ todoItems: [created.body.todoItem] });
    } finally {
      await second.repository.close();
    }
  });
});

/** The built service as a real process (dist/main.js, built by `pnpm test` before Jest runs). */
const MAIN = path.join(__dirname, "..", "dist", "main.js");

function startService(dataDir: string): Promise<{ child: ChildProcess; port: number; exited: Promise<number | null> }> {
  const child = spawn(process.execPath, [MAIN], {
    env: { ...process.env, TODOS_PORT: "0", TODOS_DATA_DIR: dataDir, LOG_LEVEL: "info", DATABASE_URL: "" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    let buffered = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      buffered += chunk.toString();
      for (const line of buffered.split("\n")) {
        if (!line.includes('"listening"')) continue;
        resolve({ child, port: JSON.parse(line).port, exited });
      }
    });
    exited.then((code) => reject(new Error(`service exited with ${code} before listening`)));
  });
}

describe("the built service process", () => {
  let location: StorageLocation;
  beforeAll(async () => {
    location = await pgliteMode.locate();
  });
  afterAll(async () => {
    await location?.dispose();
  });

  it("when SIGTERM arrives mid-request, finishes that request, closes the database, exits 0, and its data survives a restart", async () => {
    expect(existsSync(MAIN)).toBe(true);
    const dataDir = location.options.dataDir;
    const first = await startService(dataDir);
    const base = `http://127.0.0.1:${first.port}`;

    // A request whose body is still arriving when the signal comes: it must be served, not dropped.
    const body = JSON.stringify({ title: "in flight" });
    const inFlight = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${base}/users/proc/todos`, {
        method: "POST",
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      });
      req.on("response", (res) => {
        let text = "";
        res.on("data", (c: Buffer) => {
          text += c.toString();
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      });
      req.on("error", reject);
      req.write(body.slice(0, 5));
      setTimeout(() => {
        first.child.kill("SIGTERM");
        setTimeout(() => req.end(body.slice(5)), 200);
      }, 300);
    });
    const served = await inFlight;
    expect(served.status).toBe(201);
    expect(await first.exited).toBe(0);

    const second = await startService(dataDir);
    try {
      const res = await request(`http://127.0.0.1:${second.port}`).get("/users/proc/todos").expect(200);
      expect(res.body).toStrictEqual({ todoItems: [JSON.parse(served.body).todoItem] });
    } finally {
      second.child.kill("SIGTERM");
      expect(await second.exited).toBe(0);
    }
  });
});
