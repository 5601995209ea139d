import request from "supertest";
import { mixedQuestions, type NativeHarness, nativeHarness } from "./harness";

/**
 * Review four, item 5: a native server that starts answering 501 (its model is no longer a decision model) is
 * checked again once, shared by every request refused meanwhile, not once per refusal.
 */
describe("a native server that answers 501 to many requests at once", () => {
  let h: NativeHarness;
  afterEach(async () => {
    await h.close();
  });

  it("50 concurrent requests refused 501 start one check of the server, not one each", async () => {
    // A gap longer than the test, so that however slow the machine, every 501 falls in one check's window.
    h = await nativeHarness({ maxInflight: 8, maxQueue: 1000, recheckGapMs: 600_000 });
    const body = { model: "localdecider", state: "A ticket.", questions: mixedQuestions(3) };
    expect((await request(h.app).post("/v1/systemone").send(body)).status).toBe(200);
    const before = h.fake.paths.length;
    const callsBefore = h.fake.calls;
    const probesBefore = h.fake.probes;
    h.fake.decision = false;
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => request(h.app).post("/v1/systemone").send(body)),
    );
    for (const res of answers) expect(res.status).toBeGreaterThanOrEqual(500);
    // Let a check the 501s started finish before counting.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const after = h.fake.paths.slice(before);
    const lists = after.filter((p) => p === "GET /v1/models").length;
    // One check of the server (one System One probe), not one per 501: before the fix, 50 refusals made 125
    // model-list calls and 37 probes and other calls. The list is also asked by the decision path's gate
    // (an answer at most 5 s old), so its bound leaves room for a slow machine.
    expect(h.fake.probes - probesBefore).toBeLessThanOrEqual(1);
    expect(lists).toBeLessThanOrEqual(10);
    expect(after.length - lists - (h.fake.calls - callsBefore)).toBeLessThanOrEqual(6);
  });
});
