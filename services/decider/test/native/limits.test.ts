import { createLogger } from "@localdecider/service-kit";
import request from "supertest";
import { serversBackend } from "../../src/backend";
import { FakeSystemOne } from "../fake-systemone/server";
import { type DeciderUnderTest, deciderOver, disconnectDuringFirstCall, modelServer, waitFor } from "../helpers";
import { mixedQuestions, type NativeHarness, nativeHarness } from "./harness";

const body = (n: number, state = "A ticket.") => ({ model: "localdecider", state, questions: mixedQuestions(n) });

/**
 * The chat path's limits hold for native calls too: each runs in the request's slot through the limiter,
 * counted by the questions it carries, in this process or shared through Redis.
 */
describe.each([false, true])("native calls under the limits (shared through Redis: %s)", (sharedRedis) => {
  let h: NativeHarness;
  afterEach(async () => {
    await h.close();
  });

  it("at most MAX_INFLIGHT requests run on the server at once; the others wait, then are answered", async () => {
    h = await nativeHarness({ sharedRedis, maxInflight: 2 });
    expect((await request(h.app).get("/ready")).status).toBe(200);
    h.fake.holding = true;
    const requests = [1, 2, 3, 4].map((i) =>
      request(h.app)
        .post("/v1/systemone")
        .send(body(2, `state ${i}`)),
    );
    const done = Promise.all(requests.map((r) => r.then((res) => res.status)));
    await waitFor(() => h.fake.inflight === 2, "two calls in flight");
    // A call is counted by its questions: two requests' calls of two questions each run, the rest are queued.
    await waitFor(() => h.limiter.counts().running === 4 && h.limiter.counts().queued === 4, "the counts");
    h.fake.release();
    expect(await done).toStrictEqual([200, 200, 200, 200]);
    expect(h.fake.maxInflight).toBe(2);
    expect(h.limiter.counts()).toStrictEqual({ queued: 0, running: 0 });
  });

  it("a request whose questions do not all fit MAX_QUEUE is refused whole with 429", async () => {
    h = await nativeHarness({ sharedRedis, maxInflight: 1, maxQueue: 4 });
    expect((await request(h.app).get("/ready")).status).toBe(200);
    h.fake.holding = true;
    const first = request(h.app).post("/v1/systemone").send(body(3));
    const firstDone = first.then((res) => res.status);
    await waitFor(() => h.fake.inflight === 1, "the first request's call in flight");
    const second = await request(h.app).post("/v1/systemone").send(body(3));
    expect(second.status).toBe(429);
    expect(second.body.code).toBe("queue_full");
    expect(second.headers["retry-after"]).toMatch(/^\d+$/);
    h.fake.release();
    expect(await firstDone).toBe(200);
  });

  it("a small request does not wait behind a large one while a slot is free", async () => {
    h = await nativeHarness({ sharedRedis, maxInflight: 2, questionsPerCall: 1 });
    expect((await request(h.app).get("/ready")).status).toBe(200);
    h.fake.holding = true;
    const large = request(h.app)
      .post("/v1/systemone")
      .send(body(40, "large"))
      .then((res) => res.status);
    await waitFor(() => h.fake.inflight === 1, "the large request's first call");
    const small = request(h.app)
      .post("/v1/systemone")
      .send(body(1, "small"))
      .then((res) => res.status);
    await waitFor(() => h.fake.inflight === 2, "the small request's call beside it");
    expect(h.fake.requests.at(-1)?.state).toBe("small");
    h.fake.release();
    expect(await Promise.all([large, small])).toStrictEqual([200, 200]);
  });

  it("a client that disconnects aborts its call in flight, and its other calls never reach the server", async () => {
    h = await nativeHarness({ sharedRedis, maxInflight: 2, questionsPerCall: 1 });
    expect((await request(h.app).get("/ready")).status).toBe(200);
    await disconnectDuringFirstCall(h, body(5));
    expect(h.fake.calls).toBe(1);
  });
});

describe.each([false, true])("several native servers (shared through Redis: %s)", (sharedRedis) => {
  const fakes: FakeSystemOne[] = [];
  let d: DeciderUnderTest;
  let urls: string[];

  beforeEach(async () => {
    fakes.splice(0, 2, new FakeSystemOne(), new FakeSystemOne());
    urls = await Promise.all(fakes.map((f) => f.start()));
    const logger = createLogger({ service: "decider-test", level: "silent" });
    const servers = urls.map((url) => modelServer(url, { logger }));
    d = deciderOver(serversBackend(servers, "test-model", logger), { logger, sharedRedis, maxInflight: 2 });
    for (let i = 0; sharedRedis && (await d.limiter.unavailable()) !== undefined; i++) {
      if (i === 200) throw new Error("the machine's Redis (127.0.0.1:6379) does not answer");
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  });
  afterEach(async () => {
    await d.close();
    await Promise.all(fakes.map((f) => f.stop()));
  });

  it("spread requests over both, each server at most MAX_INFLIGHT, and /ready shows each server's protocol", async () => {
    const ready = await request(d.app).get("/ready").expect(200);
    // /ready is open: servers are named by their labels there.
    expect(ready.body.servers).toStrictEqual(
      ["server 1", "server 2"].map((server) => ({ server, state: "ready", protocol: "systemone" })),
    );
    // So is /v1/models without an API key set.
    const models = await request(d.app).get("/v1/models").expect(200);
    expect(models.body.backend.servers).toStrictEqual([
      { server: "server 1", protocol: "systemone" },
      { server: "server 2", protocol: "systemone" },
    ]);
    for (const f of fakes) f.holding = true;
    const done = Promise.all(
      [1, 2, 3, 4].map((i) =>
        request(d.app)
          .post("/v1/systemone")
          .send(body(3, `s${i}`))
          .then((res) => res.status),
      ),
    );
    await waitFor(() => fakes.every((f) => f.inflight === 2), "two requests on each server");
    for (const f of fakes) f.release();
    expect(await done).toStrictEqual([200, 200, 200, 200]);
    expect(fakes.map((f) => f.maxInflight)).toStrictEqual([2, 2]);
  });

  it("a server that dies mid-request leaves rotation, and the request is answered by the other", async () => {
    expect((await request(d.app).get("/ready")).status).toBe(200);
    const [a, b] = fakes as [FakeSystemOne, FakeSystemOne];
    a.holding = true;
    // supertest sends on then(): started now.
    const pending = request(d.app)
      .post("/v1/systemone")
      .send(body(3))
      .then((res) => res);
    await waitFor(() => a.inflight === 1, "the call on the first server");
    await a.crash();
    const res = await pending;
    expect(res.status).toBe(200);
    expect(b.calls).toBe(1);
    const ready = await request(d.app).get("/ready").expect(200);
    expect(ready.body.servers[0]).toMatchObject({ server: "server 1", state: "out", protocol: "systemone" });
  });
});
