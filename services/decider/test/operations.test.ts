import { request as httpRequest } from "node:http";
import { createLogger } from "@localdecider/service-kit";
import request from "supertest";
import { type Harness, harness, listen, waitFor } from "./helpers";

const payload = {
  model: "localdecider",
  state: { secret: "STATE-MUST-NOT-BE-LOGGED" },
  questions: { a: { type: "noul", instructions: "INSTRUCTIONS-MUST-NOT-BE-LOGGED" } },
};

describe("operations", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("logs JSON lines with the request id and never the state, the questions or the API key at info level", async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger({ service: "decider", level: "info" });
    for (const t of logger.transports) t.silent = true;
    logger.on("data", (info: Record<string, unknown>) => lines.push(info));
    h = await harness({ logger, apiKey: "KEY-MUST-NOT-BE-LOGGED" });
    h.fake.faults = ["malformed", "http500"];
    const res = await request(h.app)
      .post("/v1/systemone")
      .set("authorization", "Bearer KEY-MUST-NOT-BE-LOGGED")
      .set("x-request-id", "ops-1")
      .send(payload);
    expect(res.status).toBe(502);
    expect(lines.length).toBeGreaterThanOrEqual(2);
    for (const line of lines) expect(line.requestId).toBe("ops-1");
    const text = JSON.stringify(lines);
    expect(text).not.toContain("MUST-NOT-BE-LOGGED");
  });

  it("on shutdown finishes the in-flight request and refuses new connections", async () => {
    h = await harness();
    const server = await listen(h);
    h.fake.holding = true;
    const body = JSON.stringify(payload);
    const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(`${server.url}/v1/systemone`, {
        method: "POST",
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      });
      req.on("response", (res) => {
        let text = "";
        res.on("data", (chunk: Buffer) => {
          text += chunk.toString();
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      });
      req.on("error", reject);
      req.end(body);
    });
    await waitFor(() => h.fake.inflight === 1, "the call in flight");
    const closed = server.close();
    await expect(fetch(`${server.url}/health`)).rejects.toThrow();
    h.fake.release();
    const res = await answer;
    expect(res.status).toBe(200);
    expect(Object.keys(JSON.parse(res.body).answers)).toStrictEqual(["a"]);
    await closed;
  });
});
