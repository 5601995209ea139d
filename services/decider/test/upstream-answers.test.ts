import { createServer, type Server } from "node:http";
import request from "supertest";
import { BodyTooLargeError } from "../src/upstream/body-limit";
import { createHttpTransport } from "../src/upstream/http-fetch";
import { ModelListProbe } from "../src/upstream/readiness";
import { deciderFor, type Harness, harness, waitFor } from "./helpers";
import { streamHugeAnswer } from "./huge-body";
import { closeAbruptly, listenOnLoopback } from "./loopback-server";
import { mixedQuestions, type NativeHarness, nativeHarness } from "./native/harness";

/**
 * Review four, items 2 and 7: every answer of a model server is read only up to LOCALDECIDER_UPSTREAM_MAX_BODY
 * (a 300 MB answer was read whole and held), past it the call is 502 upstream_malformed and the server stays
 * in rotation; and the checks follow no redirect, as the decisions follow none.
 */
const CAP = 1024 * 1024;
const HUGE = 64 * 1024 * 1024;

/** A loopback server whose every answer is `answer`'s. */
async function rawServer(answer: Parameters<typeof createServer>[1]): Promise<{ url: string; server: Server }> {
  const server = createServer(answer);
  return { url: `http://127.0.0.1:${await listenOnLoopback(server, 0)}`, server };
}

describe("the transport stops reading an answer at the cap", () => {
  let raw: { url: string; server: Server } | undefined;
  afterEach(async () => {
    await closeAbruptly(raw?.server);
    raw = undefined;
  });

  it("a streamed answer past the cap is refused with BodyTooLargeError, its connection closed before the server wrote it all", async () => {
    const written: number[] = [];
    raw = await rawServer((_req, res) => {
      void streamHugeAnswer(res, HUGE).then((w) => written.push(w.written));
    });
    const { request: send } = createHttpTransport({ maxBodyBytes: CAP });
    await expect(send(`${raw.url}/v1/systemone`, { method: "POST", headers: {}, body: "{}" })).rejects.toBeInstanceOf(
      BodyTooLargeError,
    );
    await waitFor(() => written.length > 0, "the server's write to end");
    expect(written[0]).toBeLessThan(HUGE);
  });

  it("a declared Content-Length past the cap is refused before its body is read", async () => {
    raw = await rawServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": String(CAP + 1) });
      res.write("{");
    });
    const { request: send } = createHttpTransport({ maxBodyBytes: CAP });
    await expect(send(`${raw.url}/x`, { method: "GET", headers: {} })).rejects.toBeInstanceOf(BodyTooLargeError);
  });

  it("an answer of exactly the cap is read whole", async () => {
    const body = `"${"y".repeat(CAP - 2)}"`;
    raw = await rawServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(body);
    });
    const { request: send } = createHttpTransport({ maxBodyBytes: CAP });
    const res = await send(`${raw.url}/x`, { method: "GET", headers: {} });
    expect(res.body.byteLength).toBe(CAP);
  });
});

describe("an oversized answer to a decision", () => {
  let h: Harness | NativeHarness;
  afterEach(async () => {
    await h.close();
  });

  it("native server: 502 upstream_malformed, and the server stays in rotation (the next request is answered, /ready stays 200)", async () => {
    const nh = await nativeHarness({ upstreamMaxBody: CAP, malformedRetries: 0 });
    h = nh;
    nh.fake.hugeBytes = HUGE;
    nh.fake.faults = ["huge"];
    const body = { model: "localdecider", state: "A ticket.", questions: mixedQuestions(3) };
    const res = await request(h.app).post("/v1/systemone").send(body);
    expect(res.status).toBe(502);
    expect(res.body.code).toBe("upstream_malformed");
    expect(JSON.stringify(res.body)).not.toContain("xxxx");
    await waitFor(() => nh.fake.hugeWritten.length > 0, "the fake's write to end");
    expect(nh.fake.hugeWritten[0]).toBeLessThan(HUGE);
    const again = await request(h.app).post("/v1/systemone").send(body);
    expect(again.status).toBe(200);
    expect((await request(h.app).get("/ready")).status).toBe(200);
  });

  it("chat server: 502 upstream_malformed, and the server stays in rotation", async () => {
    const ch = await harness({ upstreamMaxBody: CAP, malformedRetries: 0 });
    h = ch;
    ch.fake.hugeBytes = HUGE;
    const body = {
      model: "localdecider",
      state: "A ticket.",
      questions: { q0: { type: "noul", instructions: "Is it urgent?" } },
    };
    expect((await request(h.app).get("/ready")).status).toBe(200);
    ch.fake.faults = ["huge"];
    const res = await request(h.app).post("/v1/systemone").send(body);
    expect(res.status).toBe(502);
    expect(res.body.code).toBe("upstream_malformed");
    await waitFor(() => ch.fake.hugeWritten.length > 0, "the fake's write to end");
    expect(ch.fake.hugeWritten[0]).toBeLessThan(HUGE);
    const again = await request(h.app).post("/v1/systemone").send(body);
    expect(again.status).toBe(200);
  });
});

describe("a 200 whose body is not JSON (review four, item 6)", () => {
  let h: NativeHarness;
  afterEach(async () => {
    await h.close();
  });

  it("answers 502 upstream_malformed in the decider's words: none of the server's text reaches the client", async () => {
    h = await nativeHarness({ malformedRetries: 0 });
    h.fake.faults = ["notJson"];
    const res = await request(h.app)
      .post("/v1/systemone")
      .send({ model: "localdecider", state: "A ticket.", questions: mixedQuestions(1) });
    expect(res.status).toBe(502);
    expect(res.body).toStrictEqual({
      error: "inference backend returned malformed output 1 time(s); last: the body is not JSON",
      code: "upstream_malformed",
    });
  });
});

describe("the model list check", () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await closeAbruptly(s);
  });

  it("a /v1/models that redirects elsewhere is not ready, naming the redirect; the other host is never asked", async () => {
    let otherAsked = 0;
    const other = await rawServer((_req, res) => {
      otherAsked += 1;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "test-model", object: "model" }] }));
    });
    const redirecting = await rawServer((_req, res) => {
      res.writeHead(302, { location: `${other.url}/v1/models` });
      res.end();
    });
    servers.push(other.server, redirecting.server);
    const probe = new ModelListProbe({
      baseURL: `${redirecting.url}/v1`,
      model: "test-model",
      authorization: undefined,
      timeoutMs: 5000,
    });
    const result = await probe.check();
    expect(result).toMatchObject({ ready: false, modelMissing: false });
    expect(result.ready === false && result.message).toContain("redirect (HTTP 302)");
    expect(otherAsked).toBe(0);
  });

  it("a Decisions server whose start-up probe redirects elsewhere is not ready; the other host is never asked", async () => {
    let otherAsked = 0;
    const other = await rawServer((_req, res) => {
      otherAsked += 1;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({ model: "test-model", answers: [{ type: "predicate", name: "check", probability: 0.5 }] }),
      );
    });
    const redirecting = await rawServer((req, res) => {
      if (req.url === "/v1/models") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ object: "list", data: [{ id: "test-model", object: "model", owned_by: "someone" }] }));
        return;
      }
      res.writeHead(307, { location: `${other.url}${req.url}` });
      res.end();
    });
    servers.push(other.server, redirecting.server);
    const d = deciderFor(redirecting.url, { protocol: "decisions" });
    try {
      const ready = await request(d.app).get("/ready");
      expect(ready.status).toBe(503);
      expect(JSON.stringify(ready.body)).toContain("HTTP 307");
      expect(otherAsked).toBe(0);
    } finally {
      await d.close();
    }
  });

  it("a model list past the cap is not ready, and is not read whole", async () => {
    const written: number[] = [];
    const huge = await rawServer((_req, res) => {
      void streamHugeAnswer(res, HUGE).then((w) => written.push(w.written));
    });
    servers.push(huge.server);
    const probe = new ModelListProbe({
      baseURL: `${huge.url}/v1`,
      model: "test-model",
      authorization: undefined,
      timeoutMs: 5000,
      maxBodyBytes: CAP,
    });
    const result = await probe.check();
    expect(result.ready === false && result.message).toContain("LOCALDECIDER_UPSTREAM_MAX_BODY");
    await waitFor(() => written.length > 0, "the server's write to end");
    expect(written[0]).toBeLessThan(HUGE);
  });
});
