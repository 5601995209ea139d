import request from "supertest";
import { recombineChunks } from "../../src/decide/recombine";
import type { VllmWording } from "../fake-systemone/server";
import { mixedQuestions, type NativeHarness, nativeHarness, questionsOfCalls, wideChoice } from "./harness";

/**
 * The decider in front of vLLM's `/v1/systemone` (the native fake's vLLM flavour: 26 options, every fault a
 * 400 in its own envelope, worded two ways, extra response fields, no `architecture` in its model list).
 * Issue 31 item 2: the limit is learnt from the refused call, whatever the wording, in at most two refused
 * calls, and remembered for the model.
 */
describe("vLLM's /v1/systemone", () => {
  let h: NativeHarness;
  afterEach(async () => {
    await h.close();
  });

  const post = (questions: Record<string, unknown>) =>
    request(h.app).post("/v1/systemone").send({ model: "localdecider", state: "A ticket.", questions });
  const widths = () =>
    questionsOfCalls(h.fake).map((c) =>
      Object.values(c).map((q) =>
        Array.isArray(q.criteria) ? q.criteria.length : Object.keys(q.criteria ?? {}).length,
      ),
    );

  it("is found native by the probe (its model list publishes no architecture), and its extra fields are tolerated", async () => {
    h = await nativeHarness({ flavour: "vllm" });
    const ready = await request(h.app).get("/ready");
    expect(ready.status).toBe(200);
    expect(ready.body.protocol).toBe("systemone");
    expect(h.fake.probes).toBe(1);
    const res = await post(mixedQuestions(3));
    expect(res.status).toBe(200);
    const reported = Object.fromEntries(h.fake.reported.map((r) => [r.key, r.probabilities]));
    expect(res.body.answers.q0).toStrictEqual({ type: "noul", noul: reported.q0?.true });
    expect(res.body.answers.q1.probabilities).toStrictEqual(reported.q1);
    expect(res.body.answers.q2.probabilities).toStrictEqual(reported.q2);
    expect(Object.keys(res.body).sort()).toStrictEqual(["answers", "model", "usage"]);
  });

  it.each<VllmWording>(["options", "alternatives"])(
    "learns its 26 options from one refused call (worded with %j), recombines the chunks exactly, and plans later requests with it",
    async (wording) => {
      h = await nativeHarness({ flavour: "vllm" });
      h.fake.vllmWording = wording;
      const criteria = wideChoice(60);
      const res = await post({ pick: { type: "choice", instructions: "Which?", criteria } });
      expect(res.status).toBe(200);
      // Refused whole (400), then chunks of 26, 26 and 8, then the final round among their three leaders.
      expect(widths()).toStrictEqual([[60], [26], [26], [8], [3]]);
      const labels = Object.keys(criteria);
      const [a, b, c, final] = h.fake.reported.map((r) => r.probabilities) as Record<string, number>[];
      const chunks = [a, b, c].map((chunk, i) =>
        labels.slice(i * 26, i * 26 + 26).map((l) => (chunk as Record<string, number>)[l] as number),
      );
      const expected = recombineChunks(chunks, Object.values(final as object)).flat();
      expect(Object.values(res.body.answers.pick.probabilities)).toStrictEqual(expected);
      expect(Object.keys(res.body.answers.pick.probabilities)).toStrictEqual(labels);
      // Remembered for the model: no refused call the next time.
      expect((await post({ pick: { type: "choice", instructions: "Which?", criteria } })).status).toBe(200);
      expect(widths().slice(5)).toStrictEqual([[26], [26], [8], [3]]);
    },
  );

  it("learns it without any number in the refusal, and a question named to look like a limit teaches nothing", async () => {
    h = await nativeHarness({ flavour: "vllm" });
    h.fake.vllmWording = "options";
    const res = await post({
      "pick at most 3 options": { type: "choice", instructions: "Which?", criteria: wideChoice(30) },
    });
    expect(res.status).toBe(200);
    // The echoed name's "at most 3" is the client's: 26 was tried, not 3.
    expect(widths()).toStrictEqual([[30], [26], [4], [2]]);
  });

  it("a call of more than 64 questions refused with 400 is sent again in halves", async () => {
    h = await nativeHarness({ flavour: "vllm", questionsPerCall: 100, outcomesPerCall: 1000 });
    const questions = Object.fromEntries(
      Array.from({ length: 100 }, (_, i) => [`n${i}`, { type: "noul", instructions: `Is ${i} true?` }]),
    );
    const res = await post(questions);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body.answers)).toHaveLength(100);
    expect(widths().map((call) => call.length)).toStrictEqual([100, 50, 50]);
  });

  it("a refusal that is not about options stands: a choice within 26 is not split", async () => {
    h = await nativeHarness({ flavour: "vllm" });
    h.fake.refused.add("pick");
    const res = await post({ pick: { type: "choice", instructions: "Which?", criteria: wideChoice(20) } });
    expect(res.status).toBe(422);
    expect(res.body).toStrictEqual({
      error: "the model server refused the request: questions.pick: this model cannot answer it",
      code: "invalid_request",
    });
    expect(widths()).toStrictEqual([[20]]);
  });
});
