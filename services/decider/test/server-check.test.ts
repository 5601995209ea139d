import request from "supertest";
import { FakeUpstream, type Flavour } from "./fake-upstream/server";
import { capturingLogger, type DeciderUnderTest, deciderFor } from "./helpers";

/**
 * The start-up check of a model server (src/upstream/server-check.ts and server-profile.ts), against the
 * fake on a real port: what kind of server answers, and whether it can be read at all.
 */
describe("the model server's start-up check", () => {
  let fake: FakeUpstream;
  let d: DeciderUnderTest | undefined;
  afterEach(async () => {
    await d?.close();
    d = undefined;
    await fake.stop();
  });

  async function start(flavour: Flavour, options: Parameters<typeof deciderFor>[1] = {}) {
    fake = new FakeUpstream({ flavour });
    const url = await fake.start();
    const captured = capturingLogger("info");
    d = deciderFor(url, { logger: captured.logger, ...options });
    return { d, lines: captured.lines };
  }

  const decide = (app: DeciderUnderTest["app"]) =>
    request(app)
      .post("/v1/systemone")
      .send({ model: "localdecider", state: "s", questions: { a: { type: "noul", instructions: "Is it?" } } });

  it.each<[Flavour, Record<string, unknown>]>([
    ["llama", { kind: "llama.cpp", prefixCache: "slot", slots: 2, templateKwargs: true }],
    ["vllm", { kind: "vllm", prefixCache: "shared", templateKwargs: true }],
    ["ollama", { kind: "ollama", prefixCache: "slot", templateKwargs: false }],
  ])("reads a %s server's kind from its model list, and sends it only what it takes", async (flavour, profile) => {
    const { d, lines } = await start(flavour);
    expect((await request(d.app).get("/ready")).status).toBe(200);
    expect(lines.find((l) => l.message === "model server inspected")).toMatchObject(profile);
    expect((await decide(d.app)).status).toBe(200);
    const call = fake.requests[0] as Record<string, unknown>;
    expect(call.chat_template_kwargs).toStrictEqual(profile.templateKwargs ? { enable_thinking: false } : undefined);
    expect(call.id_slot).toStrictEqual(flavour === "llama" ? 0 : undefined);
  });

  it("warns when LOCALDECIDER_MAX_INFLIGHT differs from a llama.cpp server's slots", async () => {
    const { d, lines } = await start("llama", { maxInflight: 3 });
    expect((await request(d.app).get("/ready")).status).toBe(200);
    expect(lines.find((l) => l.message.includes("MAX_INFLIGHT differs"))).toMatchObject({
      level: "warn",
      maxInflight: 3,
      serverSlots: 2,
    });
  });

  it("a server that closes a prefilled assistant message and opens a new turn is not ready, and decisions get 503 saying why", async () => {
    const { d } = await start("vllm");
    fake.continuesPrefill = false;
    const message =
      "the model server does not continue a prefilled assistant message (it closes it and starts a new turn), so answers cannot be read at the right position; use llama.cpp, vLLM or SGLang, or an Ollama model whose template leaves the last message open";
    const ready = await request(d.app).get("/ready");
    expect(ready.status).toBe(503);
    expect(ready.body.error).toBe(message);
    const res = await decide(d.app);
    expect(res.status).toBe(503);
    expect(res.body).toStrictEqual({ error: message, code: "model_unavailable" });
    expect(fake.calls).toBe(0);
  });

  it("a server whose top_logprobs change with the temperature (not the raw distribution) is not ready", async () => {
    const { d } = await start("llama");
    fake.rawLogprobs = false;
    const ready = await request(d.app).get("/ready");
    expect(ready.status).toBe(503);
    expect(ready.body.error).toMatch(/^the model server's top_logprobs are not the model's raw distribution/);
    expect((await decide(d.app)).status).toBe(503);
  });

  it("a server that reports no logprobs is not ready, unless LOCALDECIDER_ALLOW_NO_LOGPROBS is set", async () => {
    const { d } = await start("vllm");
    fake.inspectionLogprobs = false;
    const ready = await request(d.app).get("/ready");
    expect(ready.status).toBe(503);
    expect(ready.body.error).toMatch(/^the model server reports no token probabilities \(top_logprobs\)/);
    await d.close();
    await fake.stop();
    const allowed = await start("vllm", { allowNoLogprobs: true });
    fake.inspectionLogprobs = false;
    expect((await request(allowed.d.app).get("/ready")).status).toBe(200);
  });
});
