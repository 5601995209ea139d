import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { ApiError, ApiRequestError, createClient, type RouteContracts } from "../src";

/** A real server on a loopback port whose answer each test sets; it records what it was sent. */
let server: Server;
let baseUrl: string;
let answer: (req: IncomingMessage, res: ServerResponse) => void;
const seen: { method: string; url: string; headers: IncomingMessage["headers"]; body: string }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      answer(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  seen.length = 0;
});

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}) =>
  (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  };

const routes = {
  rename: {
    method: "put",
    path: "/things/:thingId/name",
    summary: "Renames a thing",
    auth: "bearer",
    params: z.object({ thingId: z.string() }),
    query: z.object({ dryRun: z.enum(["yes", "no"]).optional(), n: z.string().transform(Number).optional() }),
    body: z.object({ name: z.string() }),
    responses: { 200: { description: "Renamed", schema: z.object({ name: z.string(), at: z.iso.datetime() }) } },
  },
  ping: { method: "get", path: "/ping", summary: "Ping", auth: "none", responses: { 204: { description: "Up" } } },
} satisfies RouteContracts;

describe("createClient", () => {
  it("sends method, encoded path, query, JSON body and bearer, and resolves to the parsed body", async () => {
    answer = json(200, { name: "b", at: "2026-11-24T12:00:00.000Z", extra: 1 });
    const client = createClient(routes, { baseUrl, token: "t0k", headers: { "x-app": "1" } });
    const result = await client.rename({ params: { thingId: "a/b c" }, query: { n: 5 }, body: { name: "b" } });
    expect(result).toStrictEqual({ name: "b", at: "2026-11-24T12:00:00.000Z" });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: "PUT", url: "/api/things/a%2Fb%20c/name?n=5", body: '{"name":"b"}' });
    expect(seen[0]?.headers).toMatchObject({
      authorization: "Bearer t0k",
      "content-type": "application/json",
      "x-app": "1",
    });
    answer = (_req, res) => res.writeHead(204).end();
    expect(await client.ping()).toBeUndefined();
  });

  it("throws ApiError with the body's fields, or the status text when the body is not JSON", async () => {
    answer = json(
      429,
      { error: "Busy", code: "queue_full", details: [{ path: "x", message: "y" }] },
      { "x-request-id": "r-1", "retry-after": "3" },
    );
    const client = createClient(routes, { baseUrl });
    const error = (await client.ping().catch((e) => e)) as ApiError;
    expect(error).toBeInstanceOf(ApiError);
    expect([error.status, error.message, error.code, error.details, error.requestId, error.operation]).toStrictEqual([
      429,
      "Busy",
      "queue_full",
      [{ path: "x", message: "y" }],
      "r-1",
      "GET /ping",
    ]);
    expect(error.headers.get("retry-after")).toBe("3");
    answer = (_req, res) => res.writeHead(502, { "content-type": "text/html" }).end("<h1>Bad gateway</h1>");
    const proxy = (await client.ping().catch((e) => e)) as ApiError;
    expect([proxy.status, proxy.message, proxy.code, proxy.body]).toStrictEqual([
      502,
      "HTTP 502 Bad Gateway",
      undefined,
      "<h1>Bad gateway</h1>",
    ]);
  });

  it("throws ApiRequestError invalid_response for a success body that breaks the contract", async () => {
    answer = json(200, { name: 5 });
    const error = (await createClient(routes, { baseUrl })
      .rename({ params: { thingId: "a" }, body: { name: "b" } })
      .catch((e) => e)) as ApiRequestError;
    expect(error).toBeInstanceOf(ApiRequestError);
    expect(error.reason).toBe("invalid_response");
    expect(error.message).toBe("PUT /things/:thingId/name: HTTP 200 body breaks the contract");
  });

  it("throws ApiRequestError timeout after timeoutMs, and aborted for the caller's signal", async () => {
    answer = () => {}; // never answers; afterAll closes the connections
    const client = createClient(routes, { baseUrl, timeoutMs: 50 });
    expect(((await client.ping().catch((e) => e)) as ApiRequestError).reason).toBe("timeout");
    const controller = new AbortController();
    const pending = createClient(routes, { baseUrl })
      .ping({ signal: controller.signal })
      .catch((e) => e);
    controller.abort();
    expect(((await pending) as ApiRequestError).reason).toBe("aborted");
  });

  it("refuses a route list whose path parameters have no schema, and a bad base URL", () => {
    const broken = { get: { ...routes.rename, path: "/things/:thingId/:part" } } satisfies RouteContracts;
    expect(() => createClient(broken, { baseUrl })).toThrow("get: path parameter :part has no schema in params");
    expect(() => createClient(routes, { baseUrl: "not a url" })).toThrow();
  });
});
