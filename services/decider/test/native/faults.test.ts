import { DECIDER_ERROR_STATUS } from "@localdecider/contracts/decider";
import request from "supertest";
import type { SystemOneFault } from "../fake-systemone/server";
import { waitFor } from "../helpers";
import { mixedQuestions, type NativeHarness, nativeHarness } from "./harness";

/**
 * How the decider answers each fault of a native System One server (llama.cpp's published statuses, reproduced
 * by test/fake-systemone): malformed answers retried then 502, 429 waited out within the deadline, 413 split,
 * 422 and 501 passed to the client as its own kind of error, the transport's faults as on the chat path.
 */
describe("a native System One server's faults", () => {
  let h: NativeHarness;
  afterEach(async () => {
    await h.close();
  });

  const post = (questions: Record<string, unknown> = mixedQuestions(3)) =>
    request(h.app).post("/v1/systemone").send({ model: "localdecider", state: "A ticket.", questions });

  describe("a malformed answer is asked again, only for the questions it spoiled", () => {
    it.each<[SystemOneFault, string[]]>([
      ["missingAnswer", ["q0"]],
      ["unknownLabel", ["q1"]],
      ["badSum", ["q1"]],
      ["notNumber", ["q0"]],
      ["wrongType", ["q0"]],
      ["notJson", ["q0", "q1", "q2"]],
    ])("%s: retried once, then answered", async (fault, retried) => {
      h = await nativeHarness();
      h.fake.faults = [fault];
      const res = await post();
      expect(res.status).toBe(200);
      expect(h.observer.retries).toBe(1);
      expect(h.fake.calls).toBe(2);
      expect(Object.keys(h.fake.requests[1]?.questions as object)).toStrictEqual(retried);
      for (const { key, probabilities } of h.fake.reported.slice(-retried.length)) {
        const answer = res.body.answers[key];
        if (answer.type === "noul") expect(answer.noul).toBe(probabilities.true);
        else expect(answer.probabilities).toStrictEqual(probabilities);
      }
    });

    it("malformed every time: 502 upstream_malformed after MALFORMED_RETRIES, saying what was wrong", async () => {
      h = await nativeHarness({ malformedRetries: 2 });
      h.fake.faults = ["unknownLabel", "unknownLabel", "unknownLabel"];
      const res = await post({ pick: { type: "choice", instructions: "?", criteria: { a: null, b: null } } });
      expect(res.status).toBe(502);
      expect(res.body).toStrictEqual({
        error:
          'inference backend returned malformed output 3 time(s); last: the answer for "pick" names "not-asked", which were not asked',
        code: "upstream_malformed",
      });
      expect(h.fake.calls).toBe(3);
    });
  });

  describe("429 with Retry-After", () => {
    it("is waited out and the call sent again, within the deadline", async () => {
      h = await nativeHarness();
      h.fake.faults = ["busy"];
      const res = await post();
      expect(res.status).toBe(200);
      expect(h.fake.calls).toBe(2);
      expect(Object.keys(res.body.answers)).toStrictEqual(["q0", "q1", "q2"]);
    });

    it("past the deadline, answers 503 upstream_busy with the server's Retry-After, without waiting", async () => {
      h = await nativeHarness({ timeoutSeconds: 5, setup: (fake) => (fake.retryAfter = "120") });
      h.fake.faults = ["busy"];
      const res = await post();
      expect(res.status).toBe(503);
      expect(res.headers["retry-after"]).toBe("120");
      expect(res.body).toStrictEqual({ error: "inference backend is busy (HTTP 429)", code: "upstream_busy" });
      expect(h.fake.calls).toBe(1);
    });
  });

  describe("413", () => {
    it("splits a call the server finds too large in two, and answers from both halves", async () => {
      h = await nativeHarness();
      h.fake.faults = ["tooLarge"];
      const questions = mixedQuestions(10);
      const res = await post(questions);
      expect(res.status).toBe(200);
      expect(h.fake.requests.map((r) => Object.keys(r.questions as object).length)).toStrictEqual([10, 5, 5]);
      expect(Object.keys(res.body.answers)).toStrictEqual(Object.keys(questions));
    });

    it("a single question the server still refuses (its prompt-token budget) is the client's 413, with the server's reason", async () => {
      h = await nativeHarness({ setup: (fake) => (fake.promptBudget = 5) });
      const res = await post(mixedQuestions(2));
      expect(res.status).toBe(413);
      expect(res.body.code).toBe("payload_too_large");
      expect(res.body.error).toMatch(
        /^the model server refuses even one question of this request as too large: The request renders \d+ prompt tokens, the maximum is 5\. Give a shorter "state"/,
      );
      // 2 questions, then each alone.
      expect(h.fake.requests.map((r) => Object.keys(r.questions as object).length)).toStrictEqual([2, 1]);
    });
  });

  it("422: the client gets a 4xx with the server's reason, and nothing is retried", async () => {
    h = await nativeHarness();
    // A null state is System One (our contract takes it); llama.cpp refuses it for all but its lfm2 types.
    const res = await request(h.app)
      .post("/v1/systemone")
      .send({ model: "localdecider", state: null, questions: mixedQuestions(1) });
    expect(res.status).toBe(DECIDER_ERROR_STATUS.invalid_request);
    expect(res.body).toStrictEqual({
      error: 'the model server refused the request: "state" must be provided',
      code: "invalid_request",
    });
    expect(h.fake.calls).toBe(1);
  });

  it("501 on a decision: 503 model_unavailable, and the server is checked again (/ready then says why)", async () => {
    h = await nativeHarness();
    expect((await request(h.app).get("/ready")).body.protocol).toBe("systemone");
    // The model swapped for one that cannot decide (and lists itself so).
    h.fake.decision = false;
    const res = await post();
    expect(res.status).toBe(503);
    expect(res.body).toStrictEqual({
      error:
        "inference backend returned HTTP 501: its model is not a decision model; the decider checks the server again",
      code: "model_unavailable",
    });
    const ready = await request(h.app).get("/ready");
    expect(ready.status).toBe(503);
    expect(ready.body).toStrictEqual({
      error:
        'the model server\'s model is not a decision model (its model list does not name it a decision model (no "decisions" output)), and its chat path cannot be used either: its chat completions failed',
      code: "backend_not_ready",
    });
  });

  it("an upstream 500 is 502 upstream_error; a connection cut before the answer is sent once more", async () => {
    h = await nativeHarness();
    h.fake.faults = ["http500"];
    const failed = await post();
    expect(failed.status).toBe(502);
    expect(failed.body).toStrictEqual({ error: "inference backend returned HTTP 500", code: "upstream_error" });
    h.fake.faults = ["drop"];
    expect((await post()).status).toBe(200);
    expect(h.fake.calls).toBe(3);
  });

  it("an unreachable server is 502 upstream_unreachable", async () => {
    h = await nativeHarness();
    expect((await request(h.app).get("/ready")).status).toBe(200);
    await h.fake.crash();
    const res = await post();
    expect(res.status).toBe(502);
    expect(res.body).toStrictEqual({ error: "inference backend unreachable", code: "upstream_unreachable" });
  });

  it("a call past LOCALDECIDER_TIMEOUT is aborted and answered 504", async () => {
    h = await nativeHarness({ timeoutSeconds: 0.5 });
    expect((await request(h.app).get("/ready")).status).toBe(200);
    h.fake.faults = ["hang"];
    const res = await post();
    expect(res.status).toBe(504);
    expect(res.body).toStrictEqual({ error: "the decision did not complete within 0.5 s", code: "upstream_timeout" });
    await waitFor(() => h.fake.aborted === 1, "the fake to see the call aborted");
  });
});
