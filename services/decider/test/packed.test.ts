import { SystemOneResponse } from "@localdecider/contracts/decider";
import request from "supertest";
import type { AskedQuestion } from "./fake-upstream/server";
import { capturingLogger, type Harness, type HarnessOptions, harness } from "./helpers";

/**
 * A llama.cpp server's prompts packed into one `/completion` call each (src/upstream/llama-packed.ts),
 * against the fake's llama flavour serving llama-server's own endpoints: the same answers as one chat call
 * per question, the checks that decide whether a server's prompts are packed, and the faults.
 */

function script(q: AskedQuestion): Record<string, number> {
  if (q.name === "urgent") return { true: 0.7, false: 0.3 };
  if (q.name === "topic") return { billing: 0.5, shipping: 0.3, refund: 0.15, other: 0.05 };
  if (q.name === "severity") return { "0": 0.1, "1": 0.2, "2": 0.6, "3": 0.1 };
  return Object.fromEntries(q.labels.map((l, i) => [l, 1 + ((i * 7 + q.name.length) % 5)]));
}

const body = {
  model: "localdecider",
  state: { diff: "--- a/x\n+++ b/x\n@@\n-old\n+new" },
  questions: {
    urgent: { type: "noul", instructions: "Is this urgent?" },
    topic: {
      type: "choice",
      instructions: "What is it about?",
      criteria: { billing: "money", shipping: null, refund: "money back", other: null },
    },
    severity: { type: "score", instructions: "How severe is it?", criteria: ["none", "low", "high", "critical"] },
  },
};

/** `n` mixed questions (yes/no, a choice of 3, a score of 4). */
function many(n: number) {
  const questions = Object.fromEntries(
    Array.from({ length: n }, (_, i) => {
      if (i % 3 === 0) return [`noul_${i}`, { type: "noul", instructions: `Is statement ${i} true?` }];
      if (i % 3 === 1)
        return [
          `choice_${i}`,
          { type: "choice", instructions: "Which part?", criteria: { api: "HTTP", db: "storage", docs: null } },
        ];
      return [`score_${i}`, { type: "score", instructions: "How risky?", criteria: ["none", "low", "medium", "high"] }];
    }),
  );
  return { ...body, questions };
}

const decide = (h: Harness, payload: unknown = body) =>
  request(h.app)
    .post("/v1/systemone")
    .send(payload as object);

describe("a llama.cpp server's prompts in one /completion call each", () => {
  const open: Harness[] = [];
  async function start(options: HarnessOptions = {}): Promise<Harness> {
    const h = await harness({ flavour: "llama", packing: true, ...options });
    h.fake.script = script;
    open.push(h);
    return h;
  }
  afterEach(async () => {
    for (const h of open.splice(0)) await h.close();
  });

  it("a request is one /completion call in its slot, answered exactly as one chat call per question answers it", async () => {
    const packed = await start();
    const chat = await start({ packPrompts: false });
    const [a, b] = [await decide(packed), await decide(chat)];
    expect(a.status).toBe(200);
    expect(SystemOneResponse.parse(a.body)).toStrictEqual(a.body);
    // The same distributions read the same way: the same answers and the same usage, to the last bit.
    expect(a.body).toStrictEqual(b.body);
    // What the server took from its cache (timings/cache_n, cached_tokens) in X-Cached-Tokens, the same both ways:
    // the second and third probes read the shared prompt from the slot.
    expect(Number(a.headers["x-cached-tokens"])).toBeGreaterThan(0);
    expect(a.headers["x-cached-tokens"]).toBe(b.headers["x-cached-tokens"]);
    expect(packed.fake.completions[0]).toMatchObject({ response_fields: expect.arrayContaining(["timings/cache_n"]) });
    expect([packed.fake.calls, packed.fake.requests.length, packed.fake.completions.length]).toStrictEqual([1, 0, 1]);
    expect([chat.fake.calls, chat.fake.requests.length, chat.fake.completions.length]).toStrictEqual([3, 3, 0]);
    const call = packed.fake.completions[0] as Record<string, unknown>;
    expect(call).toMatchObject({
      n_predict: 1,
      temperature: 0,
      n_probs: 20,
      post_sampling_probs: false,
      cache_prompt: true,
      id_slot: 0,
    });
    // Each prompt: the shared part's token ids (through the last special token), then its own text.
    const prompts = call.prompt as unknown[][];
    expect(prompts.map((p) => p.at(-1))).toStrictEqual([
      'assistant\n{"q1":',
      'assistant\n{"q2": "',
      'assistant\n{"q3": ',
    ]);
    const head = prompts[0]?.slice(0, -1);
    expect(head?.every((id) => typeof id === "number")).toBe(true);
    for (const p of prompts) expect(p.slice(0, -1)).toStrictEqual(head);
    // The shared part is rendered and tokenized once for the call, not once per question.
    expect(packed.fake.reported.map((r) => r.name)).toStrictEqual(["urgent", "topic", "severity"]);
  });

  it("100 questions are one call per prompt of 16, answered as the chat path answers them", async () => {
    const packed = await start();
    const chat = await start({ packPrompts: false });
    const [a, b] = [await decide(packed, many(100)), await decide(chat, many(100))];
    expect(a.status).toBe(200);
    expect(a.body).toStrictEqual(b.body);
    expect(packed.fake.calls).toBe(7);
    expect(packed.fake.completions.map((c) => (c.prompt as unknown[]).length)).toStrictEqual([
      16, 16, 16, 16, 16, 16, 4,
    ]);
    expect(chat.fake.calls).toBe(100);
  });

  it("the start-up check says the prompts are packed, and where the template's prompt is cut", async () => {
    const { logger, lines } = capturingLogger("info");
    const h = await start({ logger });
    expect((await request(h.app).get("/ready")).status).toBe(200);
    expect(lines.find((l) => l.message.startsWith("llama.cpp prompts packed"))).toMatchObject({
      cutAfter: "<|im_start|>",
      tail: "assistant\n",
    });
  });

  it("a /completion whose logprobs differ from the chat call's by float noise (a GPU's other batch shapes) is packed", async () => {
    const { logger, lines } = capturingLogger("info");
    const h = await start({ logger });
    // What llama.cpp's CUDA build moves a logprob by between batch shapes: hundredths of a nat.
    h.fake.completionSkew = 0.05;
    const res = await decide(h);
    expect(res.status).toBe(200);
    expect([h.fake.requests.length, h.fake.completions.length]).toStrictEqual([0, 1]);
    const packed = lines.find((l) => l.message.startsWith("llama.cpp prompts packed"));
    expect(packed?.largestDifference).toBeCloseTo(0.05, 9);
  });

  it.each([
    [
      "an older server without /apply-template",
      (h: Harness) => (h.fake.packing = false),
      "HTTP 404 to llama.cpp's own endpoints",
    ],
    [
      "a template that writes something after the prefill",
      (h: Harness) => (h.fake.afterPrefill = "<|im_end|>\n"),
      "the chat template does not end the prompt with the assistant's prefill as it is",
    ],
    [
      "a /completion that answers otherwise than the chat endpoint",
      (h: Harness) => (h.fake.completionSkew = 0.5),
      "/completion answered otherwise than the chat call",
    ],
  ])("%s: not packed, with the reason in a warning; each question is a chat call", async (_case, arrange, reason) => {
    const { logger, lines } = capturingLogger("info");
    const h = await start({ logger });
    arrange(h);
    const res = await decide(h);
    expect(res.status).toBe(200);
    expect([h.fake.requests.length, h.fake.completions.length]).toStrictEqual([3, 0]);
    const warning = lines.find((l) => l.message.startsWith("llama.cpp prompts not packed"));
    expect(String(warning?.reason)).toContain(reason);
    // Answered all the same, from the chat calls.
    expect(res.body.answers.urgent.noul).toBeCloseTo(0.7, 12);
  });

  it("a prompt the template renders otherwise at request time is asked as chat calls, with the same answers", async () => {
    const h = await start();
    const first = await decide(h);
    expect(h.fake.completions).toHaveLength(1);
    // The check found the seam; now the server's template (say, after a reload) writes after the prefill.
    h.fake.afterPrefill = " ";
    const again = await decide(h);
    expect(again.status).toBe(200);
    expect(h.fake.completions).toHaveLength(1);
    expect(h.fake.requests).toHaveLength(3);
    expect(again.body.answers).toStrictEqual(first.body.answers);
  });

  it("a greedy token that is a piece of a UTF-8 character (no probabilities) is asked again alone with a grammar", async () => {
    const h = await start();
    const clean = await decide(h);
    h.fake.faults = ["piece"];
    const res = await decide(h);
    expect(res.status).toBe(200);
    expect(res.body.answers).toStrictEqual(clean.body.answers);
    const [, packed, again] = h.fake.completions as [unknown, Record<string, unknown>, Record<string, unknown>];
    expect((packed.prompt as unknown[]).length).toBe(3);
    expect((again.prompt as unknown[][]).map((p) => p.at(-1))).toStrictEqual(['assistant\n{"q1":']);
    expect(again.grammar).toBe('root ::= [ \\t\\n\\r]* ("true" | "false") [^\\x00]*');
  });

  it("a prompt over the context is a 400 context_too_long; the shared-context 500 is retried alone", async () => {
    const h = await start();
    h.fake.faults = ["contextTooLong"];
    const tooLong = await decide(h);
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.code).toBe("context_too_long");
    h.fake.faults = ["sharedContext"];
    const calls = h.fake.calls;
    const together = await decide(h);
    expect(together.status).toBe(200);
    expect(h.fake.calls - calls).toBe(2);
  });

  it("a call answered with fewer results than prompts is malformed and asked again; usage counts what was read", async () => {
    const h = await start();
    h.fake.faults = ["malformed"];
    const res = await decide(h);
    expect(res.status).toBe(200);
    expect(h.observer.retries).toBe(1);
    expect(h.fake.calls).toBe(2);
    expect(res.body.answers.urgent.noul).toBeCloseTo(0.7, 12);
  });

  it("alternatives of which none begins an outcome are asked again, then 502 upstream_malformed naming where the mass went", async () => {
    const h = await start({ malformedRetries: 1 });
    h.fake.faults = ["junkOnly", "junkOnly"];
    const res = await decide(h);
    expect(res.status).toBe(502);
    expect(res.body.code).toBe("upstream_malformed");
    expect(res.body.error).toContain("no reported alternative begins an outcome; the model put its probability on");
    expect(h.fake.calls).toBe(2);
  });

  it("a connection cut as a packed call goes out is sent once more; cut again, the request is a 502 upstream_unreachable", async () => {
    const h = await start();
    expect((await request(h.app).get("/ready")).status).toBe(200);
    h.fake.faults = ["drop"];
    const once = await decide(h);
    expect(once.status).toBe(200);
    expect(h.fake.completions).toHaveLength(2);
    h.fake.faults = ["drop", "drop"];
    const twice = await decide(h);
    expect(twice.status).toBe(502);
    expect(twice.body).toStrictEqual({ error: "inference backend unreachable", code: "upstream_unreachable" });
  });

  it("a call that hangs past the deadline is a 504, and the server sees the call go away", async () => {
    const h = await start({ timeoutSeconds: 0.5 });
    expect((await request(h.app).get("/ready")).status).toBe(200);
    h.fake.faults = ["hang"];
    const res = await decide(h);
    expect(res.status).toBe(504);
    expect(res.body).toStrictEqual({ error: "the decision did not complete within 0.5 s", code: "upstream_timeout" });
    for (let i = 0; i < 200 && h.fake.aborted === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(h.fake.aborted).toBe(1);
  });

  it("sends the upstream key to llama.cpp's own endpoints too", async () => {
    const h = await start({ upstreamApiKey: "sk-local-123" });
    const res = await decide(h);
    expect(res.status).toBe(200);
    expect(h.fake.completions).toHaveLength(1);
    expect(new Set(h.fake.authorizations)).toStrictEqual(new Set(["Bearer sk-local-123"]));
  });
});
