import request from "supertest";
import { FakeSystemOne, type SystemOneFlavour } from "../fake-systemone/server";
import { FakeUpstream } from "../fake-upstream/server";
import { capturingLogger, type DeciderUnderTest, deciderFor, type HarnessOptions } from "../helpers";

/**
 * Which protocol each model server speaks, found at its start-up check (LOCALDECIDER_UPSTREAM_PROTOCOL):
 * what it publishes first (llama.cpp's model list, Ollama's capabilities), a probe last; shown on /ready and
 * /v1/models.
 */
describe("the protocol a model server speaks", () => {
  let d: DeciderUnderTest;
  let stop: () => Promise<void>;
  afterEach(async () => {
    await d.close();
    await stop();
  });

  const one = { model: "localdecider", state: "s", questions: { a: { type: "noul", instructions: "Is it?" } } };

  async function native(flavour: SystemOneFlavour, options: HarnessOptions = {}) {
    const fake = new FakeSystemOne({ flavour });
    const url = await fake.start();
    const captured = capturingLogger("info");
    d = deciderFor(url, { logger: captured.logger, ...options });
    stop = () => fake.stop();
    return { fake, url, lines: captured.lines };
  }

  async function chat(options: HarnessOptions = {}, setup: (fake: FakeUpstream) => void = () => undefined) {
    const fake = new FakeUpstream({ flavour: "llama" });
    setup(fake);
    const url = await fake.start();
    const captured = capturingLogger("info");
    d = deciderFor(url, { logger: captured.logger, ...options });
    stop = () => fake.stop();
    return { fake, url, lines: captured.lines };
  }

  it.each<[SystemOneFlavour, string, number, string[]]>([
    // llama.cpp names a decision model in its model list: nothing else is asked.
    ["llama", "model list", 0, ["GET /v1/models", "GET /props"]],
    // Ollama says so in its capabilities.
    ["ollama", "ollama capabilities", 0, ["POST /api/show"]],
    // A server that publishes neither is asked once.
    ["silent", "probe", 1, []],
  ])(
    "a %s server that answers System One is found from its %s, and asked natively",
    async (flavour, how, probes, asked) => {
      const { fake, lines } = await native(flavour);
      const ready = await request(d.app).get("/ready");
      expect(ready.status).toBe(200);
      expect(ready.body).toStrictEqual({
        status: "ready",
        upstream: "server 1",
        model: "test-model",
        protocol: "systemone",
        limits: "this process",
      });
      expect(lines.find((l) => l.message === "model server protocol")).toMatchObject({ protocol: "systemone", how });
      expect(fake.probes).toBe(probes);
      for (const path of asked) expect(fake.paths).toContain(path);
      const models = await request(d.app).get("/v1/models").expect(200);
      expect(models.body.backend).toStrictEqual({
        kind: "server",
        address: "server 1",
        model: "test-model",
        protocol: "systemone",
      });
      const res = await request(d.app).post("/v1/systemone").send(one);
      expect(res.status).toBe(200);
      expect(fake.calls).toBe(1);
      expect(res.body.answers.a.noul).toBe(fake.reported[0]?.probabilities.true);
    },
  );

  it("a chat server (the probe finds no route) is asked through chat logprobs, as before", async () => {
    const { fake } = await chat();
    const ready = await request(d.app).get("/ready");
    expect(ready.body.protocol).toBe("chat");
    expect((await request(d.app).post("/v1/systemone").send(one)).status).toBe(200);
    expect(fake.calls).toBe(1);
  });

  it("a server whose model is not a decision model (501) but chats with logprobs takes the chat path", async () => {
    const { fake, lines } = await chat({}, (f) => (f.notDecisionModel = true));
    const ready = await request(d.app).get("/ready");
    expect(ready.status).toBe(200);
    expect(ready.body.protocol).toBe("chat");
    expect(fake.systemOneCalls).toBe(1);
    expect(lines.find((l) => l.message === "model server protocol")).toMatchObject({ protocol: "chat", how: "probe" });
    expect((await request(d.app).post("/v1/systemone").send(one)).status).toBe(200);
    expect(fake.calls).toBe(1);
  });

  it("a server that neither decides (501) nor reports logprobs is not ready, saying both", async () => {
    await chat({}, (f) => {
      f.notDecisionModel = true;
      f.inspectionLogprobs = false;
    });
    const ready = await request(d.app).get("/ready");
    expect(ready.status).toBe(503);
    expect(ready.body.error).toMatch(
      /^the model server's model is not a decision model \(it answered POST \/v1\/systemone with HTTP 501\), and its chat path cannot be used either: the model server reports no token probabilities/,
    );
    const res = await request(d.app).post("/v1/systemone").send(one);
    expect(res.status).toBe(503);
    expect(res.body.code).toBe("model_unavailable");
  });

  it("LOCALDECIDER_UPSTREAM_PROTOCOL=chat asks nothing of /v1/systemone", async () => {
    const { fake } = await native("llama", { protocol: "chat" });
    const ready = await request(d.app).get("/ready");
    // The native fake does not chat: the chat checks fail, and nothing was sent to the decision route.
    expect(ready.status).toBe(503);
    expect(fake.probes + fake.calls).toBe(0);
  });

  it("LOCALDECIDER_UPSTREAM_PROTOCOL=systemone in front of a chat server is not ready, naming why", async () => {
    await chat({ protocol: "systemone" });
    const ready = await request(d.app).get("/ready");
    expect(ready.status).toBe(503);
    expect(ready.body.error).toBe(
      "LOCALDECIDER_UPSTREAM_PROTOCOL is systemone but the model server does not answer POST /v1/systemone (HTTP 404)",
    );
    expect((await request(d.app).post("/v1/systemone").send(one)).status).toBe(503);
  });

  it("LOCALDECIDER_UPSTREAM_PROTOCOL=systemone in front of a model that cannot decide is not ready, naming the 501", async () => {
    await chat({ protocol: "systemone" }, (f) => (f.notDecisionModel = true));
    const ready = await request(d.app).get("/ready");
    expect(ready.status).toBe(503);
    expect(ready.body.error).toBe(
      "LOCALDECIDER_UPSTREAM_PROTOCOL is systemone but the model server's model is not a decision model (it answered POST /v1/systemone with HTTP 501); set it to auto to use the server's chat path",
    );
  });

  it("LOCALDECIDER_UPSTREAM_PROTOCOL=systemone skips what is published but still checks with one probe", async () => {
    const { fake } = await native("llama", { protocol: "systemone" });
    expect((await request(d.app).get("/ready")).body.protocol).toBe("systemone");
    expect(fake.probes).toBe(1);
  });

  it("an Ollama server lists its other decision models for clients to name", async () => {
    const { fake } = await native("ollama");
    fake.models = ["test-model", "clef-flash"];
    fake.chatModels = ["qwen2.5:1.5b"];
    const models = await request(d.app).get("/v1/models").expect(200);
    expect(models.body.models.map((m: { name: string }) => m.name)).toStrictEqual([
      "localdecider",
      "jev-latest",
      "jev",
      "test-model",
      "clef-flash",
    ]);
  });
});
