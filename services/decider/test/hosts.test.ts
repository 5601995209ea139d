import { hostPolicy, parseAllowedHosts } from "@localdecider/service-kit";
import request from "supertest";
import { HOST_NOT_ALLOWED_MESSAGE } from "../src/app";
import { type Harness, harness } from "./helpers";
import { processesInFrontOfFake } from "./shared/processes";

// DNS rebinding: a page on the attacker's name, its DNS record switched to 127.0.0.1, sends decisions
// through the user's browser and reads the answers. The browser sends the attacker's name as Host.
const REBOUND = "rebind.attacker.example";
const REFUSED = { error: HOST_NOT_ALLOWED_MESSAGE, code: "host_not_allowed" };
const decision = { model: "localdecider", state: "s", questions: { a: { type: "noul", instructions: "Is it?" } } };

describe("the Host check without an API key (the default)", () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness();
  });
  afterEach(async () => {
    await h.close();
  });

  it("when a page on a rebound name asks for a decision, answers 421 and calls no model server", async () => {
    for (const host of [REBOUND, `${REBOUND}:8080`]) {
      const res = await request(h.app).post("/v1/systemone").set("Host", host).send(decision);
      expect({ host, status: res.status, body: res.body }).toStrictEqual({ host, status: 421, body: REFUSED });
    }
    expect({ calls: h.fake.calls, requests: h.fake.requests }).toStrictEqual({ calls: 0, requests: [] });
  });

  it("refuses /v1/models, /openapi.json and /docs to a rebound name too", async () => {
    for (const path of ["/v1/models", "/openapi.json", "/docs"]) {
      const res = await request(h.app).get(path).set("Host", REBOUND);
      expect({ path, status: res.status, body: res.body }).toStrictEqual({ path, status: 421, body: REFUSED });
    }
  });

  it("answers the loopback names with any port", async () => {
    for (const host of ["localhost:8080", "127.0.0.1", "[::1]:8080"]) {
      const res = await request(h.app).post("/v1/systemone").set("Host", host).send(decision);
      expect({ host, status: res.status }).toStrictEqual({ host, status: 200 });
    }
  });

  it("answers /health, /ready and /metrics whatever the Host (a kubelet probe sends the pod's IP)", async () => {
    for (const path of ["/health", "/ready", "/metrics"]) {
      const res = await request(h.app).get(path).set("Host", "10.244.1.7:8080");
      expect({ path, status: res.status }).toStrictEqual({ path, status: 200 });
    }
  });
});

describe("the Host check with LOCALDECIDER_API_KEY set", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("when LOCALDECIDER_ALLOWED_HOSTS is unset, checks no Host: the key is what a rebound page lacks", async () => {
    h = await harness({ apiKey: "k" });
    const res = await request(h.app)
      .get("/v1/models")
      .set("Host", "decider.example.com")
      .set("authorization", "Bearer k");
    expect(res.status).toBe(200);
    const anonymous = await request(h.app).get("/v1/models").set("Host", REBOUND);
    expect({ status: anonymous.status, body: anonymous.body }).toStrictEqual({
      status: 401,
      body: { error: "Missing API key", code: "unauthorized" },
    });
  });

  it("when LOCALDECIDER_ALLOWED_HOSTS is set, applies it as configured, before the key is looked at", async () => {
    const configured = parseAllowedHosts("decider.example.com");
    if ("problem" in configured) throw new Error(configured.problem);
    h = await harness({
      apiKey: "k",
      allowedHosts: hostPolicy({ configured: configured.hosts, listenHost: "0.0.0.0", authenticated: true }),
    });
    const models = (host: string) =>
      request(h.app).get("/v1/models").set("Host", host).set("authorization", "Bearer k");
    expect([(await models("decider.example.com")).status, (await models("localhost:8080")).status]).toStrictEqual([
      200, 200,
    ]);
    const refused = await models(REBOUND);
    expect({ status: refused.status, body: refused.body }).toStrictEqual({ status: 421, body: REFUSED });
  });
});

describe("the built service process", () => {
  const start = processesInFrontOfFake();

  it("with the default config, refuses a rebound name and answers its loopback names, saying so at start", async () => {
    const decider = await start({});
    const refused = await request(decider.url).get("/v1/models").set("Host", REBOUND);
    expect({ status: refused.status, body: refused.body }).toStrictEqual({ status: 421, body: REFUSED });
    await request(decider.url).get("/v1/models").set("Host", "localhost").expect(200);
    expect(decider.lines.find((l) => l.message === "decider listening")).toMatchObject({
      allowedHosts: ["localhost", "127.0.0.1", "[::1]"],
    });
  });

  it("with LOCALDECIDER_ALLOWED_HOSTS, answers the names listed too, and any name with *", async () => {
    const listed = await start({ LOCALDECIDER_HOST: "0.0.0.0", LOCALDECIDER_ALLOWED_HOSTS: "decider" });
    const any = await start({ LOCALDECIDER_ALLOWED_HOSTS: "*" });
    await request(listed.url).get("/v1/models").set("Host", "decider:8080").expect(200);
    await request(listed.url).get("/v1/models").set("Host", REBOUND).expect(421);
    await request(any.url).get("/v1/models").set("Host", REBOUND).expect(200);
    expect(any.lines.find((l) => l.message === "decider listening")).toMatchObject({
      allowedHosts: "any (LOCALDECIDER_ALLOWED_HOSTS=*)",
    });
  });
});
