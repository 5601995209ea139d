import { request as httpRequest } from "node:http";
import { connect } from "node:net";
import express from "express";
import request from "supertest";
import { z } from "zod";
import {
  type AllowedHosts,
  AppError,
  allowedHostsSchema,
  buildOpenApiDocument,
  createLogger,
  describeHostPolicy,
  errorHandler,
  hostAllowed,
  hostCheck,
  hostName,
  hostPolicy,
  jsonBody,
  loadConfig,
  parseAllowedHosts,
  requestId,
  serve,
} from "../src";
import { captureLogger } from "./capture-logger";

const REFUSED = { error: "Host not allowed", code: "host_not_allowed" };

/** An app with a route that changes state, a probe, the check and the one error middleware; its log kept. */
function appWith(allowed: AllowedHosts) {
  const { logger, lines } = captureLogger();
  const items: string[] = [];
  const app = express();
  app.use(requestId());
  app.use(hostCheck({ allowed, reject: (cause) => new AppError(421, REFUSED.error, { code: REFUSED.code, cause }) }));
  app.use(jsonBody({ limit: "1kb" }));
  app.get("/items", (_req, res) => {
    res.json({ items });
  });
  app.post("/items", (req, res) => {
    items.push(String(req.body.name));
    res.status(201).json({ items });
  });
  for (const probe of ["/health", "/ready", "/metrics"]) app.get(probe, (_req, res) => res.json({ status: "ok" }));
  app.use(errorHandler({ logger }));
  return { app, items, lines };
}

const loopbackOnly = hostPolicy({ configured: undefined, listenHost: "127.0.0.1", authenticated: false });

describe("hostCheck with the default policy (no authentication, no list configured)", () => {
  it.each([
    "localhost",
    "localhost:3000",
    "LOCALHOST:8080",
    "127.0.0.1",
    "127.0.0.1:65535",
    "[::1]",
    "[::1]:8080",
    "[0:0:0:0:0:0:0:1]:8080",
  ])("answers a request for the loopback name %s", async (host) => {
    const { app } = appWith(loopbackOnly as AllowedHosts);
    const res = await request(app).get("/items").set("Host", host);
    expect({ status: res.status, body: res.body }).toStrictEqual({ status: 200, body: { items: [] } });
  });

  it.each([
    "rebind.attacker.example",
    "rebind.attacker.example:3000",
    "localhost.attacker.example",
    "127.0.0.1.nip.io:3000",
    "10.0.0.5:3000",
    "localhost.",
    "evil@localhost",
    "[::1",
    "::1",
    "",
  ])("refuses %j with the service's 421 and changes nothing", async (host) => {
    const { app, items } = appWith(loopbackOnly as AllowedHosts);
    const res = await request(app).post("/items").set("Host", host).send({ name: "x" });
    expect({ status: res.status, body: res.body }).toStrictEqual({ status: 421, body: REFUSED });
    expect(items).toStrictEqual([]);
  });

  it("reads no body of a refused request: one over the body limit still gets the 421", async () => {
    const { app } = appWith(loopbackOnly as AllowedHosts);
    const res = await request(app)
      .post("/items")
      .set("Host", "rebind.attacker.example")
      .send({ name: "x".repeat(4096) });
    expect({ status: res.status, body: res.body }).toStrictEqual({ status: 421, body: REFUSED });
  });

  it("logs the refused Host at info, quoted and cut to 200 characters, with the request id", async () => {
    const { app, lines } = appWith(loopbackOnly as AllowedHosts);
    await request(app).get("/items").set("Host", "rebind.attacker.example:3000").set("x-request-id", "r-1");
    await request(app)
      .get("/items")
      .set("Host", `${"a".repeat(300)}.example`);
    expect(lines.filter((l) => l.message === "request failed")).toStrictEqual([
      expect.objectContaining({
        level: "info",
        requestId: "r-1",
        status: 421,
        code: "host_not_allowed",
        cause: 'Host "rebind.attacker.example:3000" is not among the allowed hosts',
      }),
      expect.objectContaining({
        level: "info",
        cause: `Host "${"a".repeat(200)}…" is not among the allowed hosts`,
      }),
    ]);
  });

  it("answers the probe endpoints whatever the Host (a kubelet sends the pod's IP), also as Express routes them", async () => {
    const { app } = appWith(loopbackOnly as AllowedHosts);
    for (const path of ["/health", "/ready", "/metrics", "/READY", "/ready/"]) {
      const res = await request(app).get(path).set("Host", "10.1.2.3:8080");
      expect({ path, status: res.status }).toStrictEqual({ path, status: 200 });
    }
    const other = await request(app).get("/readyz").set("Host", "10.1.2.3:8080");
    expect(other.status).toBe(421);
  });

  it("refuses a request with no Host at all (HTTP/1.0), over a real socket", async () => {
    const { app } = appWith(loopbackOnly as AllowedHosts);
    const running = await serve(app, {
      host: "127.0.0.1",
      port: 0,
      logger: createLogger({ service: "t", level: "silent" }),
    });
    try {
      const reply = await new Promise<string>((resolve, reject) => {
        const socket = connect(running.port, "127.0.0.1", () => socket.end("GET /items HTTP/1.0\r\n\r\n"));
        let text = "";
        socket.on("data", (chunk) => {
          text += String(chunk);
        });
        socket.on("end", () => resolve(text));
        socket.on("error", reject);
      });
      expect(reply.split("\r\n")[0]).toBe("HTTP/1.1 421 Misdirected Request");
      expect(JSON.parse(reply.slice(reply.indexOf("\r\n\r\n") + 4))).toStrictEqual(REFUSED);
      // The same server answers its own loopback name (node:http, to set Host as a browser would).
      const status = await new Promise<number | undefined>((resolve, reject) => {
        httpRequest(
          { port: running.port, host: "127.0.0.1", path: "/items", headers: { host: "localhost" }, agent: false },
          (r) => {
            r.resume();
            resolve(r.statusCode);
          },
        )
          .on("error", reject)
          .end();
      });
      expect(status).toBe(200);
    } finally {
      await running.close();
    }
  });
});

describe("hostPolicy", () => {
  const parsed = (text: string) => {
    const result = parseAllowedHosts(text);
    if ("problem" in result) throw new Error(result.problem);
    return result.hosts;
  };

  it("allows the loopback names and a specific listen address, not a wildcard one", () => {
    expect(hostPolicy({ configured: undefined, listenHost: "0.0.0.0", authenticated: false })).toStrictEqual({
      any: false,
      names: ["localhost", "127.0.0.1", "[::1]"],
      domains: [],
    });
    expect(hostPolicy({ configured: undefined, listenHost: "::", authenticated: false })?.names).toStrictEqual([
      "localhost",
      "127.0.0.1",
      "[::1]",
    ]);
    expect(
      hostPolicy({ configured: undefined, listenHost: "192.168.1.20", authenticated: false })?.names,
    ).toStrictEqual(["localhost", "127.0.0.1", "[::1]", "192.168.1.20"]);
    expect(hostPolicy({ configured: undefined, listenHost: "FD00::0:1", authenticated: false })?.names).toStrictEqual([
      "localhost",
      "127.0.0.1",
      "[::1]",
      "[fd00::1]",
    ]);
  });

  it("adds the configured names and domains to the loopback names", () => {
    const policy = hostPolicy({
      configured: parsed(" todos , Todos.Example.COM,.svc.cluster.local,,10.0.0.5, ::1 ,[FD00::1]"),
      listenHost: "0.0.0.0",
      authenticated: false,
    }) as AllowedHosts;
    expect(policy).toStrictEqual({
      any: false,
      names: ["localhost", "127.0.0.1", "[::1]", "todos", "todos.example.com", "10.0.0.5", "[fd00::1]"],
      domains: ["svc.cluster.local"],
    });
    const allowed = (host: string) => hostAllowed(policy, host);
    expect(
      ["todos:3000", "TODOS.example.com", "svc.cluster.local", "todos.ns.svc.cluster.local:80", "[fd00::1]:3000"].map(
        allowed,
      ),
    ).toStrictEqual([true, true, true, true, true]);
    expect(
      ["example.com", "xsvc.cluster.local", "todos.example.com.attacker.example", "10.0.0.6", "[fd00::2]"].map(allowed),
    ).toStrictEqual([false, false, false, false, false]);
  });

  it("turns the check off with authentication and nothing configured, or with *", () => {
    expect(hostPolicy({ configured: undefined, listenHost: "0.0.0.0", authenticated: true })).toBeUndefined();
    expect(hostPolicy({ configured: parsed("*"), listenHost: "0.0.0.0", authenticated: false })).toBeUndefined();
    expect(
      hostPolicy({ configured: parsed("a.example,*"), listenHost: "0.0.0.0", authenticated: true }),
    ).toBeUndefined();
  });

  it("applies a configured list with authentication too", () => {
    expect(
      hostPolicy({ configured: parsed("api.example.com"), listenHost: "0.0.0.0", authenticated: true }),
    ).toStrictEqual({ any: false, names: ["localhost", "127.0.0.1", "[::1]", "api.example.com"], domains: [] });
  });

  it("ignores empty entries (a compose file that appends an unset variable after a comma leaves one)", () => {
    expect(parseAllowedHosts("decider,")).toStrictEqual({ hosts: { any: false, names: ["decider"], domains: [] } });
    expect(parseAllowedHosts(" , ")).toStrictEqual({ hosts: { any: false, names: [], domains: [] } });
  });
});

describe("hostName", () => {
  it("takes the name of a Host header with or without port, canonical and lower case", () => {
    expect(["Example.COM:80", "example.com", "[::1]:1", "[0::1]", "127.0.0.1:"].map(hostName)).toStrictEqual([
      "example.com",
      "example.com",
      "[::1]",
      "[::1]",
      "127.0.0.1",
    ]);
    expect(["a b", "a/b", "a:b:c", "[zz::1]", "[fe80::1%25eth0]", "x:123456"].map(hostName)).toStrictEqual(
      new Array(6).fill(undefined),
    );
  });
});

describe("allowedHostsSchema", () => {
  const schema = z.object({ X_ALLOWED_HOSTS: allowedHostsSchema().optional() });

  it.each([
    ["http://todos.example.com", '"http://todos.example.com" is not a host name or address'],
    ["todos.example.com:3000", '"todos.example.com:3000" is not a host name or address'],
    ["a.example, b example", '"b example" is not a host name or address'],
    [".[::1]", '".[::1]" is not a host name or address'],
    ["*.example.com", '"*.example.com" is not a host name or address'],
  ])("refuses %j at boot naming the variable and the entry", (value, start) => {
    expect(() => loadConfig(schema, { X_ALLOWED_HOSTS: value })).toThrow(
      `X_ALLOWED_HOSTS: ${start}: write host names or addresses without scheme or port (todos.example.com, 10.0.0.5, [fd00::1]), .example.com for a domain and every name under it, or * for any host`,
    );
  });

  it("leaves the variable undefined when unset or empty", () => {
    expect(loadConfig(schema, {})).toStrictEqual({});
    expect(loadConfig(schema, { X_ALLOWED_HOSTS: "" })).toStrictEqual({});
  });
});

describe("buildOpenApiDocument with shared responses", () => {
  it("adds them to every operation but those on the excepted paths", () => {
    const doc = buildOpenApiDocument({
      info: { title: "t", version: "1" },
      routes: {
        health: {
          method: "get",
          path: "/health",
          summary: "h",
          auth: "none",
          responses: { 200: { description: "up" } },
        },
        list: { method: "get", path: "/items", summary: "l", auth: "none", responses: { 200: { description: "ok" } } },
      },
      shared: { responses: { 421: { description: "Host not allowed" } }, exceptPaths: ["/health"] },
    });
    expect(Object.keys(doc.paths["/health"]?.get?.responses as object)).toStrictEqual(["200"]);
    expect(Object.keys(doc.paths["/items"]?.get?.responses as object)).toStrictEqual(["200", "421"]);
  });
});

/** A `*_ALLOWED_HOSTS` value, parsed as the config does. */
function hostsOf(text: string): AllowedHosts {
  const parsed = parseAllowedHosts(text);
  if ("problem" in parsed) throw new Error(parsed.problem);
  return parsed.hosts;
}

describe("describeHostPolicy (what the start's log line says)", () => {
  const names = { variable: "X_ALLOWED_HOSTS", authentication: "sign-in on" };
  it("lists the names and domains answered, or says why any name is", () => {
    const configured = hostsOf("todos,.example.com");
    const allowed = hostPolicy({ configured, listenHost: "127.0.0.1", authenticated: false });
    expect(describeHostPolicy(allowed, configured, names)).toStrictEqual([
      "localhost",
      "127.0.0.1",
      "[::1]",
      "todos",
      ".example.com",
    ]);
    const any = hostsOf("*");
    expect(describeHostPolicy(undefined, any, names)).toBe("any (X_ALLOWED_HOSTS=*)");
    expect(describeHostPolicy(undefined, undefined, names)).toBe("any (sign-in on)");
  });
});
