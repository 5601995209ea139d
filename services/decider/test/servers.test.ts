import { loadConfig } from "@localdecider/service-kit";
import { metricSample } from "@localdecider/service-kit/test-utils";
import request from "supertest";
import { createBackend } from "../src/backend";
import { configSchema } from "../src/config";
import { MODEL_404 } from "../src/upstream/failure";
import { FakeUpstream } from "./fake-upstream/server";
import { capturingLogger, type DeciderUnderTest, deciderOver, waitFor } from "./helpers";

/**
 * Several model servers in one LOCALDECIDER_UPSTREAM, wired as main.ts wires them (createBackend from the
 * parsed config), in front of two fake servers on real ports.
 */

jest.setTimeout(30_000);

const nouls = (n: number) =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`q${i}`, { type: "noul", instructions: "Is it?" }]));
const payload = (state: string, questions = 3) => ({ model: "localdecider", state, questions: nouls(questions) });

/** The states (one per request) a fake server was asked about. */
const statesSeen = (fake: FakeUpstream): Set<string> =>
  new Set(fake.requests.flatMap((body) => [...JSON.stringify(body.messages).matchAll(/state-\d+/g)].map((m) => m[0])));

let a: FakeUpstream;
let b: FakeUpstream;
let urls: string[];
/** How /ready (to a caller without the API key) and the metrics name the two servers: no address. */
const labels = ["server 1", "server 2"];
let d: DeciderUnderTest;
let closeBackend: () => Promise<void>;
let lines: { level: string; message: string; [key: string]: unknown }[];

beforeEach(async () => {
  a = new FakeUpstream();
  b = new FakeUpstream();
  urls = [await a.start(), await b.start()];
  const captured = capturingLogger("info");
  lines = captured.lines;
  const config = loadConfig(configSchema, {
    LOCALDECIDER_UPSTREAM: ` ${urls.join(" , ")} `,
    LOCALDECIDER_UPSTREAM_MODEL: "test-model",
  });
  const backend = createBackend(config, captured.logger, config.LOCALDECIDER_MAX_INFLIGHT);
  closeBackend = backend.close;
  d = deciderOver(backend, { logger: captured.logger, maxInflight: 2, questionsPerCall: 1 });
});

afterEach(async () => {
  a.release();
  b.release();
  await d.close();
  await closeBackend();
  await Promise.all([a.stop(), b.stop()]);
});

function post(state: string, questions = 3) {
  return request(d.app)
    .post("/v1/systemone")
    .send(payload(state, questions))
    .then((r) => r);
}

describe("several model servers", () => {
  it("spread requests by least load, keep each request's calls on one server, and label their metrics by server", async () => {
    a.holding = true;
    b.holding = true;
    const replies = Array.from({ length: 8 }, (_, i) => post(`state-${i}`));
    // Every request admitted: 24 calls, 2 running on each server, the rest queued.
    await waitFor(() => a.inflight === 2 && b.inflight === 2 && d.limiter.counts().queued === 20, "all admitted");
    const perServer = d.limiter.serverCounts();
    expect(urls.map((u) => perServer.get(u))).toStrictEqual([
      { queued: 10, running: 2 },
      { queued: 10, running: 2 },
    ]);
    a.release();
    b.release();
    for (const reply of await Promise.all(replies)) expect(reply.status).toBe(200);
    // Four requests each (least load alternates), and no request's calls on both.
    expect(statesSeen(a).size).toBe(4);
    expect(statesSeen(b).size).toBe(4);
    expect([...statesSeen(a)].filter((s) => statesSeen(b).has(s))).toStrictEqual([]);
    expect(a.maxInflight).toBe(2);
    expect(b.maxInflight).toBe(2);

    const text = (await request(d.app).get("/metrics").expect(200)).text;
    for (const server of labels) {
      expect(metricSample(text, "decider_upstream_call_duration_seconds_count", { server, outcome: "ok" })).toBe(12);
      expect(metricSample(text, "decider_upstream_in_rotation", { server })).toBe(1);
      expect(metricSample(text, "decider_upstream_inflight", { server })).toBe(0);
    }
    const ready = await request(d.app).get("/ready").expect(200);
    expect(ready.body).toStrictEqual({
      status: "ready",
      upstream: labels.join(","),
      model: "test-model",
      servers: labels.map((server) => ({ server, state: "ready", protocol: "chat" })),
      limits: "this process",
    });
  });

  it("a server that dies mid-request leaves rotation, its calls finish on the other, and it rejoins once back", async () => {
    a.holding = true;
    b.holding = true;
    // Each request runs its calls one at a time in its slot: one call of each in flight.
    const onA = post("state-1");
    await waitFor(() => a.inflight === 1, "the first request on A");
    const onB = post("state-2");
    await waitFor(() => b.inflight === 1, "the second request on B");
    const port = Number(new URL(urls[0] as string).port);
    await a.crash();
    a.holding = false;
    b.release();
    const [first, second] = await Promise.all([onA, onB]);
    expect(first.status).toBe(200);
    expect(Object.keys(first.body.answers)).toHaveLength(3);
    expect(second.status).toBe(200);
    // Every call of the first request answered by B in the end.
    expect(statesSeen(b)).toContain("state-1");
    expect(lines.find((l) => l.message === "model server failed; its request moves to another")).toMatchObject({
      from: urls[0],
      to: urls[1],
    });

    const ready = await request(d.app).get("/ready").expect(200);
    expect(ready.body.servers).toStrictEqual([
      { server: "server 1", state: "out", reason: "inference backend unreachable", protocol: "chat" },
      { server: "server 2", state: "ready", protocol: "chat" },
    ]);
    const text = (await request(d.app).get("/metrics").expect(200)).text;
    expect(metricSample(text, "decider_upstream_in_rotation", { server: "server 1" })).toBe(0);
    // While A is out, a new request goes to B although A has nothing to do.
    expect((await post("state-3", 1)).status).toBe(200);
    expect(statesSeen(b)).toContain("state-3");

    // Back on its port: the background probe (not /ready) finds it, and requests reach it again.
    await a.start(port);
    await waitFor(() => lines.some((l) => l.message === "model server back in rotation"), "A back in rotation");
    expect((await post("state-4", 1)).status).toBe(200);
    expect(statesSeen(a)).toContain("state-4");
  });

  it("a server without the model is out of rotation while the other serves; with none ready, /ready lists each and a decision fails cleanly", async () => {
    a.models = ["another-model"];
    const ready = await request(d.app).get("/ready").expect(200);
    expect(ready.body.servers).toStrictEqual([
      {
        server: "server 1",
        state: "out",
        reason: `${MODEL_404}: it does not serve model "test-model"`,
      },
      { server: "server 2", state: "ready", protocol: "chat" },
    ]);
    expect((await post("state-1", 2)).status).toBe(200);
    expect(statesSeen(a).size).toBe(0);

    await b.crash();
    const down = await request(d.app).get("/ready").expect(503);
    expect(down.body.code).toBe("backend_not_ready");
    expect(down.body.error).toBe(
      `no model server is ready (${MODEL_404}: it does not serve model "test-model"; inference backend unreachable)`,
    );
    expect(down.body.details).toStrictEqual([
      { path: "server 1", message: `${MODEL_404}: it does not serve model "test-model"` },
      { path: "server 2", message: "inference backend unreachable" },
    ]);
    // Not every server lacks the model (B may come back with it), so decisions are tried: the call goes to
    // A (a 404), then to B (unreachable), and the request fails with B's error, which is the last.
    const failed = await post("state-2", 1);
    expect(failed.status).toBe(502);
    expect(failed.body.code).toBe("upstream_unreachable");
  });
});
