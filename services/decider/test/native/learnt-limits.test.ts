import { DECIDER_ERROR_STATUS } from "@localdecider/contracts/decider";
import { FakeSystemOne } from "../fake-systemone/server";
import { waitFor } from "../helpers";
import { DeciderProcess } from "../shared/processes";
import { questionsOfCalls, wideChoice } from "./harness";

/**
 * Issue 35, item 1: an option limit is learnt from the model server's own words only. A client's text (a
 * question's name, echoed in llama.cpp's `questions.<id>: …` refusals) must teach nothing, and a server that
 * names an absurd limit (0, 1) must not leave the decider planning chunks that cannot work.
 *
 * The decider runs as the built service in a process of its own, with a small heap: before the fix, planning
 * with a chunk of 0 looped forever (100 % CPU, memory growing), which would have frozen this test process
 * with it. No timing assertions: each wait is bounded by a count of polls (waitFor), and the test passes or
 * fails by what answered.
 */
describe("an option limit learnt from a refusal (issue 35)", () => {
  let fake: FakeSystemOne;
  let decider: DeciderProcess;

  beforeEach(async () => {
    fake = new FakeSystemOne();
    const upstream = await fake.start();
    decider = await new DeciderProcess(
      { LOCALDECIDER_UPSTREAM: upstream, LOCALDECIDER_UPSTREAM_MODEL: "test-model", LOG_LEVEL: "info" },
      ["--max-old-space-size=192"],
    ).start();
  });
  afterEach(async () => {
    await decider.kill();
    await fake.stop();
  });

  const post = async (questions: Record<string, unknown>) => {
    const res = await fetch(`${decider.url}/v1/systemone`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "localdecider", state: "A ticket.", questions }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const wide = { pick: { type: "choice", instructions: "Which one?", criteria: wideChoice(60) } };
  const optionCounts = () =>
    questionsOfCalls(fake).map((c) => Object.values(c).map((q) => Object.keys(q.criteria ?? {}).length));

  it.each(["option at most 0", "option at most 1"])(
    "a refusal that repeats the question's name %j teaches nothing: /health answers while the next choice is in flight, and it is answered whole",
    async (name) => {
      fake.refused.add(name);
      const refused = await post({
        [name]: { type: "choice", instructions: "Which?", criteria: { a: null, b: null } },
      });
      expect(refused.status).toBe(DECIDER_ERROR_STATUS.invalid_request);
      expect(refused.body.code).toBe("invalid_request");
      expect(refused.body.error).toBe(
        `the model server refused the request: questions.${name}: this model cannot answer it`,
      );
      // The next request: a choice of 60 labels, held at the server once its call arrives.
      fake.holding = true;
      const before = fake.calls;
      const pending = post(wide);
      await waitFor(() => fake.calls === before + 1, "the choice's call at the model server");
      const health = await fetch(`${decider.url}/health`);
      expect(health.status).toBe(200);
      fake.release();
      const answered = await pending;
      expect(answered.status).toBe(200);
      expect(
        Object.keys((answered.body.answers as { pick: { probabilities: object } }).pick.probabilities),
      ).toHaveLength(60);
      // One call for the refused request, one for the choice asked whole (the server takes 255 options).
      expect(optionCounts()).toStrictEqual([[2], [60]]);
    },
  );

  it.each([0, 1])(
    "a server that says it takes at most %i options teaches nothing: its refusals stand, and /health answers beside the next request",
    async (limit) => {
      fake.optionLimit = limit;
      const first = await post({ q: { type: "noul", instructions: "Is it?" } });
      expect(first.status).toBe(DECIDER_ERROR_STATUS.invalid_request);
      expect(first.body.code).toBe("invalid_request");
      expect(first.body.error).toBe(
        `the model server refused the request: questions.q: too many options (2), this model supports at most ${limit}`,
      );
      const [next, health] = await Promise.all([post(wide), fetch(`${decider.url}/health`)]);
      expect(health.status).toBe(200);
      expect(next.status).toBe(DECIDER_ERROR_STATUS.invalid_request);
      expect(next.body.code).toBe("invalid_request");
      // The yes/no question (no criteria sent), the 60 labels asked whole, then in chunks of 26 (the first probe, as no number under 2 is a limit),
      // whose first call is refused too: at most two refused calls, then the refusal stands.
      expect(optionCounts()).toStrictEqual([[0], [60], [26]]);
    },
  );
});
