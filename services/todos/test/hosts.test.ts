import { randomBytes } from "node:crypto";
import { TODO_MESSAGES } from "@localdecider/contracts/todos";
import { hostPolicy, parseAllowedHosts } from "@localdecider/service-kit";
import type { Express } from "express";
import { SignJWT } from "jose";
import request from "supertest";
import { createJwtAuth } from "../src/http/auth";
import { startService } from "./support/service-process";
import { appWith, postgresMode, STORAGE_MODES, type StorageLocation, suiteApp } from "./support/storage-modes";

// DNS rebinding: a page on the attacker's name, its DNS record switched to 127.0.0.1, reads and writes
// through the user's browser whatever the service answers. The browser sends the attacker's name as Host.
const REBOUND = "rebind.attacker.example";
const REFUSED = { error: TODO_MESSAGES.hostNotAllowed };

describe.each(STORAGE_MODES)("the Host check with sign-in off (the default), on $name", (mode) => {
  const t = suiteApp(mode);

  const aliceItems = async () => (await request(t.app).get("/users/alice/todos").expect(200)).body.todoItems;

  it("when a page on a rebound name asks for alice's list, answers 421 without any of her items", async () => {
    await request(t.app).post("/users/alice/todos").send({ title: "Buy milk" }).expect(201);
    for (const path of ["/users/alice/todos", "/v1/user/alice/todos"]) {
      for (const host of [REBOUND, `${REBOUND}:3000`]) {
        const res = await request(t.app).get(path).set("Host", host);
        expect({ path, host, status: res.status, body: res.body }).toStrictEqual({
          path,
          host,
          status: 421,
          body: REFUSED,
        });
      }
    }
  });

  it("when a page on a rebound name creates, changes or deletes an item, answers 421 and changes nothing", async () => {
    const before = await aliceItems();
    const id = before[0].id as string;
    const attempts = [
      request(t.app).post("/users/alice/todos").set("Host", REBOUND).send({ title: "pwned" }),
      request(t.app).put(`/users/alice/todos/${id}`).set("Host", REBOUND).send({ completed: true }),
      request(t.app).delete(`/users/alice/todos/${id}`).set("Host", REBOUND),
    ];
    for (const res of await Promise.all(attempts)) {
      expect({ status: res.status, body: res.body }).toStrictEqual({ status: 421, body: REFUSED });
    }
    expect(await aliceItems()).toStrictEqual(before);
  });

  it("answers the loopback names with any port, as a browser on this machine sends them", async () => {
    for (const host of ["localhost:3000", "127.0.0.1", "[::1]:3000"]) {
      const res = await request(t.app).get("/users/alice/todos").set("Host", host);
      expect({ host, status: res.status }).toStrictEqual({ host, status: 200 });
    }
  });

  it("answers /health, /ready and /metrics whatever the Host (a kubelet probe sends the pod's IP)", async () => {
    for (const path of ["/health", "/ready", "/metrics"]) {
      const res = await request(t.app).get(path).set("Host", "10.244.1.7:3000");
      expect({ path, status: res.status }).toStrictEqual({ path, status: 200 });
    }
  });

  it("refuses the API description and its page to a rebound name too", async () => {
    for (const path of ["/openapi.json", "/docs"]) {
      const res = await request(t.app).get(path).set("Host", REBOUND);
      expect({ path, status: res.status, body: res.body }).toStrictEqual({ path, status: 421, body: REFUSED });
    }
  });
});

describe("the Host check with sign-in on", () => {
  const SECRET = randomBytes(32).toString("base64url");
  const ISSUER = "https://issuer.test";
  const AUDIENCE = "todos-api";
  const t = suiteApp(postgresMode);

  const auth = () => createJwtAuth({ keys: { secret: SECRET }, issuer: ISSUER, audience: AUDIENCE });
  const bearer = async (sub: string) => {
    const now = Math.floor(Date.now() / 1000);
    const jwt = await new SignJWT({ iss: ISSUER, aud: AUDIENCE, sub, iat: now, exp: now + 300 })
      .setProtectedHeader({ alg: "HS256" })
      .sign(new TextEncoder().encode(SECRET));
    return `Bearer ${jwt}`;
  };
  const listAs = (app: Express, host: string, authorization: string) =>
    request(app).get("/users/sam/todos").set("Host", host).set("authorization", authorization);

  it("when TODOS_ALLOWED_HOSTS is unset, checks no Host: a token is what a rebound page lacks", async () => {
    const app = appWith(t.repository, { auth: auth() });
    const res = await listAs(app, "todos.example.com", await bearer("sam"));
    expect({ status: res.status, body: res.body }).toStrictEqual({ status: 200, body: { todoItems: [] } });
    const anonymous = await request(app).get("/users/sam/todos").set("Host", REBOUND);
    expect({ status: anonymous.status, body: anonymous.body }).toStrictEqual({
      status: 401,
      body: { error: "Missing bearer token" },
    });
  });

  it("when TODOS_ALLOWED_HOSTS is set, applies it as configured, before the token is looked at", async () => {
    const configured = parseAllowedHosts("todos.example.com");
    if ("problem" in configured) throw new Error(configured.problem);
    const allowedHosts = hostPolicy({ configured: configured.hosts, listenHost: "0.0.0.0", authenticated: true });
    const app = appWith(t.repository, { auth: auth(), allowedHosts });
    const token = await bearer("sam");
    expect((await listAs(app, "todos.example.com:443", token)).status).toBe(200);
    expect((await listAs(app, "localhost:3000", token)).status).toBe(200);
    const refused = await listAs(app, REBOUND, token);
    expect({ status: refused.status, body: refused.body }).toStrictEqual({ status: 421, body: REFUSED });
  });
});

describe("the built service process", () => {
  let location: StorageLocation;

  beforeAll(async () => {
    location = await postgresMode.locate();
  });

  afterAll(async () => {
    await location?.dispose();
  });

  const env = (extra: Record<string, string>) => ({
    PATH: process.env.PATH ?? "",
    LOG_LEVEL: "info",
    TODOS_PORT: "0",
    DATABASE_URL: location.options.databaseUrl ?? "",
    ...extra,
  });

  it("with the default config, refuses a rebound name and answers its loopback names, saying so at start", async () => {
    const service = await startService(env({}));
    try {
      const base = `http://127.0.0.1:${service.port}`;
      const refused = await request(base).get("/users/alice/todos").set("Host", REBOUND);
      expect({ status: refused.status, body: refused.body }).toStrictEqual({ status: 421, body: REFUSED });
      await request(base).get("/users/alice/todos").set("Host", `localhost:${service.port}`).expect(200);
      expect(service.lines.find((l) => l.message === "listening")).toMatchObject({
        allowedHosts: ["localhost", "127.0.0.1", "[::1]"],
      });
      expect(service.lines.find((l) => l.message === "request failed")).toMatchObject({
        level: "info",
        status: 421,
        cause: `Host "${REBOUND}" is not among the allowed hosts`,
      });
    } finally {
      service.child.kill("SIGTERM");
      expect(await service.exited).toBe(0);
    }
  });

  it("with TODOS_ALLOWED_HOSTS, answers the names listed too, and any name with *", async () => {
    const listed = await startService(env({ TODOS_HOST: "0.0.0.0", TODOS_ALLOWED_HOSTS: "todos,.example.com" }));
    const any = await startService(env({ TODOS_ALLOWED_HOSTS: "*" }));
    try {
      const base = `http://127.0.0.1:${listed.port}`;
      for (const host of ["todos:3000", "todos.example.com", "127.0.0.1"]) {
        const res = await request(base).get("/users/alice/todos").set("Host", host);
        expect({ host, status: res.status }).toStrictEqual({ host, status: 200 });
      }
      expect((await request(base).get("/users/alice/todos").set("Host", REBOUND)).status).toBe(421);
      const anyBase = `http://127.0.0.1:${any.port}`;
      expect((await request(anyBase).get("/users/alice/todos").set("Host", REBOUND)).status).toBe(200);
      expect(any.lines.find((l) => l.message === "listening")).toMatchObject({
        allowedHosts: "any (TODOS_ALLOWED_HOSTS=*)",
      });
    } finally {
      listed.child.kill("SIGTERM");
      any.child.kill("SIGTERM");
      expect([await listed.exited, await any.exited]).toStrictEqual([0, 0]);
    }
  });
});

describe.each(STORAGE_MODES)("CORS (TODOS_CORS_ORIGINS), on $name", (mode) => {
  const t = suiteApp(mode);
  const APP = "https://app.example.com";

  it("with an origin listed, a page there may preflight and read a create's answer and its Location", async () => {
    const app = appWith(t.repository, { corsOrigins: [APP] });
    const preflight = await request(app)
      .options("/users/alice/todos")
      .set("origin", APP)
      .set("access-control-request-method", "POST")
      .set("access-control-request-headers", "content-type")
      .expect(204);
    expect(preflight.headers["access-control-allow-origin"]).toBe(APP);
    const created = await request(app).post("/users/alice/todos").set("origin", APP).send({ title: "x" }).expect(201);
    expect(created.headers["access-control-allow-origin"]).toBe(APP);
    expect(created.headers["access-control-expose-headers"]).toContain("location");
  });

  it("off by default: no CORS header for any origin, and another origin gets none when one is listed", async () => {
    const off = await request(appWith(t.repository)).get("/users/alice/todos").set("origin", APP).expect(200);
    expect(off.headers["access-control-allow-origin"]).toBeUndefined();
    const other = await request(appWith(t.repository, { corsOrigins: [APP] }))
      .get("/users/alice/todos")
      .set("origin", "https://evil.example")
      .expect(200);
    expect(other.headers["access-control-allow-origin"]).toBeUndefined();
  });
});
