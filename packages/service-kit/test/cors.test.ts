import express from "express";
import request from "supertest";
import { z } from "zod";
import { cors, corsOriginsSchema } from "../src";

const APP = "https://app.example.com";

function app(origins: string[]) {
  const a = express();
  a.use(cors({ origins }));
  a.get("/items", (_req, res) => {
    res.set("x-request-id", "r1").json({ ok: true });
  });
  a.options("/items", (_req, res) => {
    res.set("Allow", "GET, OPTIONS").status(204).end();
  });
  return a;
}

describe("corsOriginsSchema", () => {
  const parse = (text: string) => z.object({ O: corsOriginsSchema() }).safeParse({ O: text });

  it("reads a comma list of origins, normalised and without repeats", () => {
    expect(parse(" https://app.example.com/ , http://localhost:5173,HTTPS://APP.example.com").data).toStrictEqual({
      O: ["https://app.example.com", "http://localhost:5173"],
    });
  });

  it.each([
    ["*"],
    ["app.example.com"],
    ["https://app.example.com/path"],
    ["ftp://x.example"],
    ["https://a.example?x=1"],
  ])("refuses %j: only explicit origins", (text) => {
    expect(parse(text).success).toBe(false);
  });
});

describe("cors", () => {
  it("lets a listed origin read the answer and the exposed headers", async () => {
    const res = await request(app([APP]))
      .get("/items")
      .set("origin", APP)
      .expect(200);
    expect(res.headers["access-control-allow-origin"]).toBe(APP);
    expect(res.headers["access-control-expose-headers"]).toBe(
      "x-request-id, location, retry-after, www-authenticate, allow",
    );
    expect(res.headers.vary).toBe("Origin");
    expect(res.headers["access-control-allow-credentials"]).toBeUndefined();
  });

  it("answers a listed origin's preflight 204 with the methods, headers and max age", async () => {
    const res = await request(app([APP]))
      .options("/items")
      .set("origin", APP)
      .set("access-control-request-method", "POST")
      .set("access-control-request-headers", "authorization, content-type")
      .expect(204);
    expect({
      origin: res.headers["access-control-allow-origin"],
      methods: res.headers["access-control-allow-methods"],
      headers: res.headers["access-control-allow-headers"],
      maxAge: res.headers["access-control-max-age"],
    }).toStrictEqual({
      origin: APP,
      methods: "GET, HEAD, POST, PUT, DELETE",
      headers: "authorization, content-type, x-request-id",
      maxAge: "600",
    });
  });

  it("sends no CORS header to an unlisted origin, nor without an Origin; its preflight gets the route's own answer", async () => {
    const other = await request(app([APP]))
      .get("/items")
      .set("origin", "https://evil.example")
      .expect(200);
    expect(other.headers["access-control-allow-origin"]).toBeUndefined();
    const none = await request(app([APP]))
      .get("/items")
      .expect(200);
    expect(none.headers["access-control-allow-origin"]).toBeUndefined();
    const preflight = await request(app([APP]))
      .options("/items")
      .set("origin", "https://evil.example")
      .set("access-control-request-method", "POST")
      .expect(204);
    expect(preflight.headers["access-control-allow-origin"]).toBeUndefined();
    expect(preflight.headers["access-control-allow-methods"]).toBeUndefined();
    expect(preflight.headers.allow).toBe("GET, OPTIONS");
  });
});
