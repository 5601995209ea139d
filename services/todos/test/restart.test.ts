import { existsSync } from "node:fs";
import http from "node:http";
import request from "supertest";
import { MAIN, pgliteEnv, startService } from "./support/service-process";
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
    const first = await startService(pgliteEnv(dataDir));
    const base = `http://127.0.0.1:${first.port}`;

    // A request whose body is still arriving when the signal comes: it must be served, not dropped.
    const body = JSON.stringify({ title: "in flight" });
    const req = http.request(`${base}/users/proc/todos`, {
      method: "POST",
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
    });
    const inFlight = new Promise<{ status: number; body: string }>((resolve, reject) => {
      req.on("response", (res) => {
        let text = "";
        res.on("data", (c: Buffer) => {
          text += c.toString();
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      });
      req.on("error", reject);
    });
    req.write(body.slice(0, 5));
    // A later request answered means the server has read the first one's headers: it is in flight now.
    await request(base).get("/health").expect(200);
    first.child.kill("SIGTERM");
    await first.logged("shutting down");
    req.end(body.slice(5));
    const served = await inFlight;
    expect(served.status).toBe(201);
    expect(await first.exited).toBe(0);

    const second = await startService(pgliteEnv(dataDir));
    try {
      const res = await request(`http://127.0.0.1:${second.port}`).get("/users/proc/todos").expect(200);
      expect(res.body).toStrictEqual({ todoItems: [JSON.parse(served.body).todoItem] });
    } finally {
      second.child.kill("SIGTERM");
      expect(await second.exited).toBe(0);
    }
  });
});
