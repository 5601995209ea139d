import request from "supertest";
import { FakeUpstream } from "./fake-upstream/server";
import { disconnectDuringFirstCall, type Harness, harness, waitFor } from "./helpers";

const nouls = (n: number, prefix = "n") =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, { type: "noul", instructions: "Is it?" }]));
const payload = (n: number, prefix?: string) => ({ model: "localdecider", state: "s", questions: nouls(n, prefix) });

// Every behaviour of the limiter holds the same with the limits in this process and shared through Redis.
describe.each([
  ["in this process", false],
  ["shared through Redis", true],
])("POST /v1/systemone under load, limits %s", (_mode, sharedRedis) => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("runs at most MAX_INFLIGHT requests at once, each with its calls one at a time in a slot of its own, and answers once the queue drains", async () => {
    h = await harness({ sharedRedis, flavour: "llama", maxInflight: 2, questionsPerCall: 1 });
    h.fake.holding = true;
    const pending = ["a", "b", "c"].map((prefix) =>
      request(h.app)
        .post("/v1/systemone")
        .send(payload(2, prefix))
        .then((r) => r),
    );
    await waitFor(() => h.fake.inflight === 2, "two calls in flight");
    // Two requests hold the two slots, one call each in flight; the third request waits for a slot.
    expect(h.limiter.counts()).toStrictEqual({ queued: 4, running: 2 });
    h.fake.release();
    for (const res of await Promise.all(pending)) {
      expect(res.status).toBe(200);
      expect(Object.keys(res.body.answers)).toHaveLength(2);
    }
    expect(h.fake.calls).toBe(6);
    expect(h.fake.maxInflight).toBe(2);
    expect(h.limiter.counts()).toStrictEqual({ queued: 0, running: 0 });
    // Every call of a request named the request's slot (llama.cpp's id_slot), so its prompt is read once.
    const slotsOf = (prefix: string) =>
      new Set(
        h.fake.requests.filter((r) => FakeUpstream.probed(r).question.name.startsWith(prefix)).map((r) => r.id_slot),
      );
    for (const prefix of ["a", "b", "c"]) expect([...slotsOf(prefix)]).toHaveLength(1);
    expect([...slotsOf("a"), ...slotsOf("b")].sort()).toStrictEqual([0, 1]);
  });

  it("a request never waits behind another request's calls while a slot is free: a 1-question request sent after a 40-call one starts at once", async () => {
    h = await harness({ sharedRedis, maxInflight: 2, questionsPerCall: 16 });
    h.fake.holding = true;
    const big = request(h.app)
      .post("/v1/systemone")
      .send(payload(40, "big"))
      .then((r) => r);
    await waitFor(() => h.fake.inflight === 1, "the big request's first call in flight");
    const small = request(h.app)
      .post("/v1/systemone")
      .send(payload(1, "small"))
      .then((r) => r);
    // The small request's call reaches the server beside the big request's held one.
    await waitFor(() => h.fake.inflight === 2, "the small request's call in flight");
    h.fake.release();
    expect((await small).status).toBe(200);
    expect((await big).status).toBe(200);
    const order = h.fake.requests.map((r) => FakeUpstream.probed(r).question.name);
    expect(order.indexOf("small0")).toBe(1);
    expect(order).toHaveLength(41);
    // The big request ran its calls one at a time.
    expect(h.fake.maxInflight).toBe(2);
  });

  it("refuses a request whose calls would overflow MAX_QUEUE with 429 and Retry-After, before queueing any", async () => {
    h = await harness({ sharedRedis, maxInflight: 1, maxQueue: 4, questionsPerCall: 1 });
    h.fake.holding = true;
    const first = request(h.app)
      .post("/v1/systemone")
      .send(payload(3))
      .then((r) => r);
    await waitFor(() => h.fake.inflight === 1, "the first call in flight");
    expect(h.limiter.counts()).toStrictEqual({ queued: 2, running: 1 });
    // The admitted request's 3 calls count toward MAX_QUEUE until it has finished.
    const refused = await request(h.app).post("/v1/systemone").send(payload(2, "m"));
    expect(refused.status).toBe(429);
    expect(refused.headers["retry-after"]).toMatch(/^[1-9][0-9]*$/);
    expect(refused.body).toStrictEqual({
      error: `too many decisions queued; retry in ${refused.headers["retry-after"]} s`,
      code: "queue_full",
    });
    expect(h.limiter.counts()).toStrictEqual({ queued: 2, running: 1 });
    expect(h.observer.rejected).toBe(1);
    // One more call still fits (3 + 1 = MAX_QUEUE).
    const second = request(h.app)
      .post("/v1/systemone")
      .send(payload(1, "k"))
      .then((r) => r);
    await waitFor(() => h.limiter.counts().queued === 3, "the second request queued");
    h.fake.release();
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
    expect(h.fake.calls).toBe(4);
    expect(h.fake.maxInflight).toBe(1);
  });

  it("answers 413 too_many_questions for a request needing more calls than MAX_QUEUE could ever hold", async () => {
    h = await harness({ sharedRedis, maxQueue: 2, questionsPerCall: 1 });
    const res = await request(h.app).post("/v1/systemone").send(payload(3));
    expect(res.status).toBe(413);
    expect(res.body).toStrictEqual({
      error:
        "this request needs 3 upstream calls but at most 2 can be queued (LOCALDECIDER_MAX_QUEUE); send fewer questions per request",
      code: "too_many_questions",
    });
    expect(h.fake.calls).toBe(0);
  });

  it("a client that disconnects aborts its in-flight call and its other calls never reach the upstream", async () => {
    h = await harness({ sharedRedis, maxInflight: 2, questionsPerCall: 1 });
    await disconnectDuringFirstCall(h, payload(5));
    expect(h.fake.calls).toBe(1);
  });
});

describe("LOCALDECIDER_MAX_QUESTIONS: the questions one request may hold", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });
  const tooMany = (count: number, max: number) => ({
    error: `this request holds ${count} questions, more than the ${max} one request may hold (LOCALDECIDER_MAX_QUESTIONS); send them in several requests`,
    code: "too_many_questions",
  });

  it("answers up to the maximum and 413 too_many_questions one past it, with no upstream call", async () => {
    h = await harness({ maxQuestions: 3 });
    expect((await request(h.app).post("/v1/systemone").send(payload(3))).status).toBe(200);
    expect(h.fake.calls).toBe(3);
    const res = await request(h.app).post("/v1/systemone").send(payload(4));
    expect(res.status).toBe(413);
    expect(res.body).toStrictEqual(tooMany(4, 3));
    expect(h.fake.calls).toBe(3);
  });

  it("counts the questions before reading any: too many invalid questions is the 413, not a 422", async () => {
    h = await harness({ maxQuestions: 3 });
    const questions = Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`q${i}`, { type: "maybe" }]));
    const res = await request(h.app).post("/v1/systemone").send({ model: "localdecider", state: null, questions });
    expect(res.status).toBe(413);
    expect(res.body).toStrictEqual(tooMany(4, 3));
  });

  it("is 4096 by default, as llama.cpp's: 4097 questions get the 413, 4096 only the queue's (256 calls)", async () => {
    h = await harness();
    const over = await request(h.app).post("/v1/systemone").send(payload(4097));
    expect(over.status).toBe(413);
    expect(over.body).toStrictEqual(tooMany(4097, 4096));
    const at = await request(h.app).post("/v1/systemone").send(payload(4096));
    expect(at.status).toBe(413);
    expect(at.body).toStrictEqual({
      error:
        "this request needs 4096 upstream calls but at most 256 can be queued (LOCALDECIDER_MAX_QUEUE); send fewer questions per request",
      code: "too_many_questions",
    });
    expect(h.fake.calls).toBe(0);
  });
});
