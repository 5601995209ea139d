import { ConfigError, loadConfig } from "@localdecider/service-kit";
import request from "supertest";
import { configSchema } from "../src/config";
import { FakeUpstream } from "./fake-upstream/server";
import { capturingLogger, deciderFor, harness } from "./helpers";
import { nativeHarness } from "./native/harness";

const PASSWORD = "p@ss-w0rd-secret";
const UPSTREAM_KEY = "upstream-key-secret";
const CLIENT_KEY = "client-key-secret";
const SECRETS = [PASSWORD, encodeURIComponent(PASSWORD), UPSTREAM_KEY, CLIENT_KEY];

const decision = { model: "localdecider", state: "s", questions: { a: { type: "noul", instructions: "Is it?" } } };

describe("secrets", () => {
  let fake: FakeUpstream;
  let base: string;
  beforeEach(async () => {
    fake = new FakeUpstream({ flavour: "llama" });
    base = await fake.start();
  });
  afterEach(async () => {
    await fake.stop();
  });

  it("credentials in LOCALDECIDER_UPSTREAM are sent as basic auth, and /ready shows the key holder the address without them", async () => {
    const withCredentials = base.replace("http://", `http://decider:${encodeURIComponent(PASSWORD)}@`);
    const d = deciderFor(withCredentials, { apiKey: CLIENT_KEY });
    const auth = { authorization: `Bearer ${CLIENT_KEY}` };
    try {
      expect((await request(d.app).post("/v1/systemone").set(auth).send(decision)).status).toBe(200);
      const ready = await request(d.app).get("/ready").set(auth);
      expect(ready.status).toBe(200);
      expect(ready.body).toStrictEqual({
        status: "ready",
        upstream: base,
        model: "test-model",
        protocol: "chat",
        limits: "this process",
      });
      const basic = `Basic ${Buffer.from(`decider:${PASSWORD}`).toString("base64")}`;
      expect(fake.authorizations.length).toBeGreaterThanOrEqual(3);
      for (const header of fake.authorizations) expect(header).toBe(basic);
    } finally {
      await d.close();
    }
  });

  // docs/configuration.md, LOCALDECIDER_UPSTREAM_API_KEY: unset (and no credentials in the URL), the decider
  // sends no Authorization header at all, to any kind of model server: no placeholder key for a proxy to log.
  it.each([
    ["a chat server (one chat call per question)", "vllm", false],
    ["a llama.cpp server (packed /completion calls)", "llama", true],
  ] as const)("with no upstream key, sends no Authorization header to %s", async (_kind, flavour, packing) => {
    const h = await harness({ flavour, packing });
    const two = { ...decision, questions: { a: decision.questions.a, b: { type: "noul", instructions: "Or not?" } } };
    try {
      expect((await request(h.app).post("/v1/systemone").send(two)).status).toBe(200);
      expect((await request(h.app).get("/ready")).status).toBe(200);
      // Both paths really ran: the packed one sent both questions in one /completion call, the other
      // one chat call each.
      expect([h.fake.completions.length, h.fake.requests.length]).toStrictEqual(packing ? [1, 0] : [0, 2]);
      expect(h.fake.authorizations.length).toBeGreaterThanOrEqual(3);
      expect(h.fake.authorizations.filter((header) => header !== undefined)).toStrictEqual([]);
    } finally {
      await h.close();
    }
  });

  it("with no upstream key, sends no Authorization header to a native System One server", async () => {
    const h = await nativeHarness();
    try {
      expect(
        (
          await request(h.app)
            .post("/v1/systemone")
            .send({ ...decision, model: "test-model" })
        ).status,
      ).toBe(200);
      expect(h.fake.headers.length).toBeGreaterThanOrEqual(1);
      expect(h.fake.headers.map((headers) => headers.authorization)).toStrictEqual(h.fake.headers.map(() => undefined));
    } finally {
      await h.close();
    }
  });

  it("credentials in the URL and an upstream API key together are refused at boot, naming the variable only", () => {
    let error: unknown;
    try {
      loadConfig(configSchema, {
        LOCALDECIDER_UPSTREAM: `http://decider:${encodeURIComponent(PASSWORD)}@127.0.0.1:8081`,
        LOCALDECIDER_UPSTREAM_API_KEY: UPSTREAM_KEY,
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toStrictEqual([
      "LOCALDECIDER_UPSTREAM: carries credentials (sent as basic auth) while LOCALDECIDER_UPSTREAM_API_KEY is set too (sent as a bearer): keep one of them",
    ]);
    for (const secret of SECRETS) expect((error as Error).message).not.toContain(secret);
  });

  it("no secret and no upstream detail reaches a client, and no secret any log line, whatever happens", async () => {
    const { logger, lines: infos } = capturingLogger("silly");
    const withCredentials = base.replace("http://", `http://decider:${encodeURIComponent(PASSWORD)}@`);
    const d = deciderFor(withCredentials, { logger, apiKey: CLIENT_KEY, malformedRetries: 0 });
    const keyed = deciderFor(base, { logger, upstreamApiKey: UPSTREAM_KEY });
    const responses: string[] = [];
    const record = (res: request.Response) => {
      responses.push(JSON.stringify({ status: res.status, headers: res.headers, body: res.body }));
      return res;
    };
    const auth = { authorization: `Bearer ${CLIENT_KEY}` };
    try {
      for (const app of [d.app, keyed.app]) {
        record(await request(app).post("/v1/systemone").set(auth).send(decision));
        record(await request(app).get("/ready"));
        record(await request(app).get("/metrics"));
        fake.faults = ["http500"];
        record(await request(app).post("/v1/systemone").set(auth).send(decision));
        fake.faults = ["malformed"];
        record(await request(app).post("/v1/systemone").set(auth).send(decision));
      }
      record(await request(d.app).post("/v1/systemone").set("authorization", "Bearer wrong").send(decision));
      record(await request(d.app).post("/v1/systemone").send(decision));
      await fake.stop();
      for (const app of [d.app, keyed.app]) {
        record(await request(app).get("/ready"));
        record(await request(app).post("/v1/systemone").set(auth).send(decision));
      }
    } finally {
      await d.close();
      await keyed.close();
    }
    const port = new URL(base).port;
    for (const text of responses) {
      for (const secret of SECRETS) expect(text).not.toContain(secret);
      // The model server's own error text and its address stay in the log.
      expect(text).not.toContain("internal error");
      expect(text).not.toContain(`:${port}/v1`);
      expect(text).not.toContain("ECONNREFUSED");
    }
    const lines = infos.map((info) => JSON.stringify(info));
    for (const line of lines) for (const secret of SECRETS) expect(line).not.toContain(secret);
    expect(lines.some((l) => l.includes("internal error"))).toBe(true);
    expect(lines.some((l) => l.includes("ECONNREFUSED"))).toBe(true);
    expect(responses.filter((r) => r.includes('"status":502'))).not.toHaveLength(0);
  });
});
