import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { ConfigError, loadConfig } from "@localdecider/service-kit";
import { metricSample, validateOpenApi31 } from "@localdecider/service-kit/test-utils";
import type { Express } from "express";
import { base64url, exportJWK, generateKeyPair, type JWK, type JWTPayload, type KeyLike, SignJWT } from "jose";
import request from "supertest";
import { configSchema } from "../src/config";
import { AUTH_MESSAGES, authFromConfig, createJwtAuth, type TodosAuth } from "../src/http/auth";
import { fetchKeySet } from "../src/http/key-set";
import type { TodoRepository } from "../src/storage/repository";
import { todosOpenApi } from "./setup/openapi-responses";
import { MAIN, startService } from "./support/service-process";
import {
  appWith,
  buildApp,
  pgliteMode,
  postgresMode,
  STORAGE_MODES,
  type StorageLocation,
} from "./support/storage-modes";

const ISSUER = "https://issuer.test/realms/todos";
const AUDIENCE = "todos-api";
const ADMIN_CLAIM = "todos_admin";
const SECRET = randomBytes(32).toString("base64url"); // 43 ASCII characters: over the 32-byte minimum

const MISSING = 'Bearer realm="todos"';
const INVALID = 'Bearer realm="todos", error="invalid_token"';

// ---------------------------------------------------------------------------------------------------------
// Keys and tokens, all made here

interface SigningKey {
  alg: string;
  kid: string | undefined;
  privateKey: KeyLike | Uint8Array;
  /** The public half as a key set publishes it (none for a shared secret). */
  jwk: JWK | undefined;
}

async function keyPair(alg: "ES256" | "RS256" | "EdDSA", kid: string): Promise<SigningKey> {
  const { publicKey, privateKey } = await generateKeyPair(alg);
  return { alg, kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: "sig" } };
}

/** The published form of a key pair made by keyPair. */
const published = (key: SigningKey): JWK => key.jwk as JWK;

function hmacKey(secret: string, alg = "HS256"): SigningKey {
  return { alg, kid: undefined, privateKey: new TextEncoder().encode(secret), jwk: undefined };
}

const now = () => Math.floor(Date.now() / 1000);
const DAY = 86_400;
const YEAR = 365 * DAY;

/** A token for `sub` with the service's iss and aud, valid for 5 minutes; `claims` override or drop (undefined). */
function token(key: SigningKey, sub: string | undefined, claims: JWTPayload = {}): Promise<string> {
  const payload: JWTPayload = { iss: ISSUER, aud: AUDIENCE, sub, iat: now(), exp: now() + 300, ...claims };
  return new SignJWT(payload)
    .setProtectedHeader({ alg: key.alg, typ: "JWT", ...(key.kid === undefined ? {} : { kid: key.kid }) })
    .sign(key.privateKey);
}

/** An unsecured JWT (`alg: none`, empty signature) with otherwise valid claims. */
function unsignedToken(sub: string): string {
  const part = (value: object) => base64url.encode(JSON.stringify(value));
  return `${part({ alg: "none", typ: "JWT" })}.${part({ iss: ISSUER, aud: AUDIENCE, sub, exp: now() + 300 })}.`;
}

// ---------------------------------------------------------------------------------------------------------
// A JSON Web Key Set server on a loopback port, as an OpenID Connect provider serves one

interface KeyServer {
  url: URL;
  /** What it serves now; replace it to rotate. */
  keys: JWK[];
  /**
   * Answer this status instead of the set; "hang" never answers; "stall" sends 200 and the headers, then the
   * start of the body, and never the rest; "huge" sends the set padded with spaces to 4 MiB, in chunks;
   * "html" sends 200 with an HTML page.
   */
  failure: number | "hang" | "stall" | "huge" | "html" | undefined;
  /** Requests received. */
  fetches: number;
  close(): Promise<void>;
}

async function startKeyServer(keys: JWK[]): Promise<KeyServer> {
  const hanging: ServerResponse[] = [];
  const state: KeyServer = {
    url: new URL("http://127.0.0.1"),
    keys,
    failure: undefined,
    fetches: 0,
    close: async () => {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    state.fetches++;
    if (req.url !== "/.well-known/jwks.json") res.writeHead(404).end();
    else if (state.failure === "hang") hanging.push(res);
    else if (state.failure === "stall") {
      res.writeHead(200, { "content-type": "application/json" }).write('{"keys":[');
      hanging.push(res);
    } else if (state.failure === "huge") {
      const set = JSON.stringify({ keys: state.keys });
      res.writeHead(200, { "content-type": "application/json" });
      const chunk = " ".repeat(64 * 1024);
      for (let sent = set.length; sent < 4 * 1024 * 1024; sent += chunk.length) res.write(chunk);
      res.end(set);
    } else if (state.failure === "html") res.writeHead(200, { "content-type": "text/html" }).end("<html></html>");
    else if (state.failure !== undefined) res.writeHead(state.failure).end("provider down");
    else {
      const set = JSON.stringify({ keys: state.keys });
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(set) }).end(set);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`);
  return state;
}

function jwksAuth(
  server: KeyServer,
  options: { cooldownMs?: number; timeoutMs?: number; maxBytes?: number } = {},
): TodosAuth {
  return createJwtAuth({
    keys: { jwksUrl: server.url, ...options },
    issuer: ISSUER,
    audience: AUDIENCE,
    adminClaim: ADMIN_CLAIM,
  });
}

const secretAuth = () => createJwtAuth({ keys: { secret: SECRET }, issuer: ISSUER, audience: AUDIENCE });

const list = (app: Express, userId: string, bearer?: string) => {
  const req = request(app).get(`/users/${encodeURIComponent(userId)}/todos`);
  return bearer === undefined ? req : req.set("authorization", `Bearer ${bearer}`);
};

// Keys shared by every suite: k1 (ES256) and k2 (RS256) are published; `stranger` is not.
let k1: SigningKey;
let k2: SigningKey;
let stranger: SigningKey;
let provider: KeyServer;

beforeAll(async () => {
  [k1, k2, stranger] = await Promise.all([keyPair("ES256", "k1"), keyPair("RS256", "k2"), keyPair("ES256", "k1")]);
  provider = await startKeyServer([published(k1), published(k2)]);
});

afterAll(async () => {
  await provider?.close();
});

// ---------------------------------------------------------------------------------------------------------

describe.each(STORAGE_MODES)("sign-in with a JSON Web Key Set on $name", (mode) => {
  let location: StorageLocation;
  let repository: TodoRepository;
  let app: Express;

  beforeAll(async () => {
    location = await mode.locate();
    ({ repository } = await buildApp(location.options));
    app = appWith(repository, { auth: jwksAuth(provider) });
  });

  afterAll(async () => {
    await repository?.close();
    await location?.dispose();
  });

  describe("a valid token for the path's user", () => {
    it("when it is signed by a published key (ES256 or RS256), serves every per-user route", async () => {
      const alice = await token(k1, "alice");
      const created = await request(app)
        .post("/users/alice/todos")
        .set("authorization", `Bearer ${alice}`)
        .send({ title: "signed in" })
        .expect(201);
      const item = created.body.todoItem;
      const viaRsa = await token(k2, "alice");
      expect((await list(app, "alice", viaRsa).expect(200)).body).toStrictEqual({ todoItems: [item] });
      await request(app).get("/v1/user/alice/todos").set("authorization", `Bearer ${alice}`).expect(200, [item]);
      await request(app).get(`/users/alice/todos/${item.id}`).set("authorization", `Bearer ${alice}`).expect(200, item);
      const updated = await request(app)
        .put(`/users/alice/todos/${item.id}`)
        .set("authorization", `Bearer ${alice}`)
        .send({ completed: true })
        .expect(200);
      expect(updated.body.todoItem.completed).toBe(true);
      await request(app)
        .delete(`/users/alice/todos/${item.id}`)
        .set("authorization", `Bearer ${alice}`)
        .expect(200, { message: "Todo item deleted successfully" });
    });

    it("when the scheme is written in lower case or aud is an array holding ours, is accepted", async () => {
      const t = await token(k1, "alice", { aud: ["other-api", AUDIENCE] });
      await request(app).get("/users/alice/todos").set("authorization", `bearer ${t}`).expect(200);
    });

    it("when its lifetime is exactly 24 h, or its iat up to 60 s ahead of this host's clock, is accepted", async () => {
      await list(app, "alice", await token(k1, "alice", { exp: now() + DAY })).expect(200);
      await list(app, "alice", await token(k1, "alice", { iat: now() - DAY + 300, exp: now() + 300 })).expect(200);
      await list(app, "alice", await token(k1, "alice", { iat: now() + 50, exp: now() + 350 })).expect(200);
    });

    it("when the userId needs percent-encoding, compares sub with the decoded path", async () => {
      await list(app, "a b/é", await token(k1, "a b/é")).expect(200, { todoItems: [] });
    });
  });

  describe("401", () => {
    it("when no Authorization header is sent, answers 401 with WWW-Authenticate and no error code", async () => {
      const res = await list(app, "alice").expect(401);
      expect(res.body).toStrictEqual({ error: AUTH_MESSAGES.missing });
      expect(res.headers["www-authenticate"]).toBe(MISSING);
    });

    it("when the Authorization header uses another scheme, answers as for no token", async () => {
      const res = await request(app).get("/users/alice/todos").set("authorization", "Basic YWxpY2U6cHc=").expect(401);
      expect(res.body).toStrictEqual({ error: AUTH_MESSAGES.missing });
      expect(res.headers["www-authenticate"]).toBe(MISSING);
    });

    it("when the header names Bearer but is malformed (a tab before the token, two tokens, a list), answers 401 invalid_token", async () => {
      const t = await token(k1, "alice");
      for (const header of [
        `Bearer\t${t}`,
        `Bearer ${t} ${t}`,
        `Bearer ${t},${t}`,
        `Bearer ${t}, Basic YWxpY2U6cHc=`,
      ]) {
        const res = await request(app).get("/users/alice/todos").set("authorization", header).expect(401);
        expect([header, res.body, res.headers["www-authenticate"]]).toStrictEqual([
          header,
          { error: AUTH_MESSAGES.invalid },
          INVALID,
        ]);
      }
    });

    const invalid: [string, () => Promise<string>][] = [
      ["is not a JWT", async () => "not-a-jwt"],
      ["is empty after Bearer", async () => ""],
      ["has expired", () => token(k1, "alice", { iat: now() - 600, exp: now() - 60 })],
      ["is not yet valid (nbf)", () => token(k1, "alice", { nbf: now() + 600 })],
      ["has no exp", () => token(k1, "alice", { exp: undefined })],
      ["has no iat", () => token(k1, "alice", { iat: undefined })],
      ["expires 100 years from now", () => token(k1, "alice", { exp: now() + 100 * YEAR })],
      ["was issued a year in the future", () => token(k1, "alice", { iat: now() + YEAR, exp: now() + YEAR + 300 })],
      ["declares a lifetime one second over 24 h", () => token(k1, "alice", { exp: now() + DAY + 1 })],
      ["was issued 61 s in the future", () => token(k1, "alice", { iat: now() + 61, exp: now() + 361 })],
      ["has no sub", () => token(k1, undefined)],
      ["has a sub that is not a string", () => token(k1, undefined, { sub: 42 as unknown as string })],
      ["is for another audience", () => token(k1, "alice", { aud: "some-other-api" })],
      ["has no audience", () => token(k1, "alice", { aud: undefined })],
      ["is from another issuer", () => token(k1, "alice", { iss: "https://evil.test/" })],
      ["is unsigned (alg none)", async () => unsignedToken("alice")],
      ["is HS256-signed (a shared secret where a key set is configured)", () => token(hmacKey(SECRET), "alice")],
      ["is signed by an unpublished key under a published kid", () => token(stranger, "alice")],
      ["is signed by a key whose kid the set does not have", () => token({ ...stranger, kid: "nope" }, "alice")],
      [
        "has its payload altered after signing",
        async () => {
          const [header, , signature] = (await token(k1, "mallory")).split(".");
          const forged = base64url.encode(
            JSON.stringify({ iss: ISSUER, aud: AUDIENCE, sub: "alice", exp: now() + 300 }),
          );
          return `${header}.${forged}.${signature}`;
        },
      ],
    ];
    it.each(invalid)("when the token %s, answers 401 invalid_token", async (_situation, make) => {
      const t = await make();
      const res = await request(app).get("/users/alice/todos").set("authorization", `Bearer ${t}`).expect(401);
      expect(res.body).toStrictEqual({ error: AUTH_MESSAGES.invalid });
      expect(res.headers["www-authenticate"]).toBe(INVALID);
    });

    it("when a request has no token, answers 401 before reading its body (no 500 for bad JSON, no 413)", async () => {
      await request(app)
        .post("/users/alice/todos")
        .set("content-type", "application/json")
        .send("{nope")
        .expect(401, { error: AUTH_MESSAGES.missing });
      await request(app)
        .post("/users/alice/todos")
        .send({ title: "x".repeat(70 * 1024) })
        .expect(401, { error: AUTH_MESSAGES.missing });
    });
  });

  describe("403", () => {
    it("when the token is another user's, answers 403 on every per-user route and changes nothing", async () => {
      const alice = await token(k1, "owner");
      const created = await request(app)
        .post("/users/owner/todos")
        .set("authorization", `Bearer ${alice}`)
        .send({ title: "mine" })
        .expect(201);
      const id = created.body.todoItem.id as string;
      const before = (await list(app, "owner", alice).expect(200)).body;

      const bob = `Bearer ${await token(k1, "bob")}`;
      const forbidden = { error: AUTH_MESSAGES.forbidden };
      await request(app).get("/users/owner/todos").set("authorization", bob).expect(403, forbidden);
      await request(app).get("/v1/user/owner/todos").set("authorization", bob).expect(403, forbidden);
      await request(app).get(`/users/owner/todos/${id}`).set("authorization", bob).expect(403, forbidden);
      await request(app)
        .post("/users/owner/todos")
        .set("authorization", bob)
        .send({ title: "x" })
        .expect(403, forbidden);
      await request(app)
        .put(`/users/owner/todos/${id}`)
        .set("authorization", bob)
        .send({ title: "stolen", completed: true })
        .expect(403, forbidden);
      await request(app).delete(`/users/owner/todos/${id}`).set("authorization", bob).expect(403, forbidden);

      expect((await list(app, "owner", alice).expect(200)).body).toStrictEqual(before);
    });

    it("when the subject differs only in case, is another user (403)", async () => {
      await list(app, "Alice", await token(k1, "alice")).expect(403, { error: AUTH_MESSAGES.forbidden });
    });
  });

  describe("the admin claim (TODOS_JWT_ADMIN_CLAIM)", () => {
    it("when it is true, lets the token read and write another user's list", async () => {
      const admin = `Bearer ${await token(k1, "ops", { [ADMIN_CLAIM]: true })}`;
      const created = await request(app)
        .post("/users/managed/todos")
        .set("authorization", admin)
        .send({ title: "from ops" })
        .expect(201);
      const owner = await token(k1, "managed");
      expect((await list(app, "managed", owner).expect(200)).body).toStrictEqual({
        todoItems: [created.body.todoItem],
      });
      await request(app).get("/users/managed/todos").set("authorization", admin).expect(200);
    });

    it.each([
      ['the string "true"', "true"],
      ["1", 1],
      ["false", false],
    ])("when it is %s rather than true, grants nothing (403)", async (_label, value) => {
      await list(app, "managed", await token(k1, "ops", { [ADMIN_CLAIM]: value })).expect(403);
    });

    it("when no admin claim is configured, a token carrying one is still only its subject's", async () => {
      const plain = appWith(repository, { auth: secretAuth() });
      const t = await token(hmacKey(SECRET), "ops", { [ADMIN_CLAIM]: true });
      await list(plain, "managed", t).expect(403, { error: AUTH_MESSAGES.forbidden });
      await list(plain, "ops", t).expect(200);
    });
  });

  describe("what stays open", () => {
    it("when no token is sent, /health, /ready, /metrics, /openapi.json and /docs still answer, and an unknown path is 404", async () => {
      await request(app).get("/health").expect(200, { status: "ok" });
      await request(app).get("/ready").expect(200, { status: "ready", storage: mode.name });
      const doc = await request(app).get("/openapi.json").expect(200);
      expect(doc.body.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
      await request(app).get("/docs").expect(200);
      await request(app).get("/nowhere").expect(404, { error: "Not found" });
      const metrics = await request(app).get("/metrics").expect(200);
      const refused = metricSample(metrics.text, "http_requests_total", {
        method: "GET",
        route: "/users/:userId/todos",
        status: "401",
      });
      expect(refused).toBeGreaterThan(0);
    });
  });

  describe("the key set", () => {
    it("when keys rotate (new kid), accepts the new key after a refetch and rejects the removed one", async () => {
      const [before, after] = await Promise.all([keyPair("ES256", "2026-a"), keyPair("EdDSA", "2026-b")]);
      const rotating = await startKeyServer([published(before)]);
      try {
        // No cooldown, so each unknown kid refetches: the order of events, not the clock, decides.
        const rotated = appWith(repository, { auth: jwksAuth(rotating, { cooldownMs: 0 }) });
        await list(rotated, "alice", await token(before, "alice")).expect(200);
        expect(rotating.fetches).toBe(1);
        await list(rotated, "alice", await token(before, "alice")).expect(200);
        expect(rotating.fetches).toBe(1); // cached

        rotating.keys = [published(after)];
        await list(rotated, "alice", await token(after, "alice")).expect(200);
        expect(rotating.fetches).toBe(2); // unknown kid: refetched, found
        await list(rotated, "alice", await token(after, "alice")).expect(200);
        expect(rotating.fetches).toBe(2);

        const old = await list(rotated, "alice", await token(before, "alice")).expect(401);
        expect(old.headers["www-authenticate"]).toBe(INVALID);
        expect(rotating.fetches).toBe(3); // unknown kid again: refetched, gone
      } finally {
        await rotating.close();
      }
    });

    it("when tokens with unknown kids arrive within the cooldown, refuses them without refetching the set", async () => {
      const [current, next] = await Promise.all([keyPair("ES256", "current"), keyPair("ES256", "next")]);
      const server = await startKeyServer([published(current)]);
      try {
        const cooled = appWith(repository, { auth: jwksAuth(server, { cooldownMs: 600_000 }) });
        await list(cooled, "alice", await token(current, "alice")).expect(200);
        server.keys = [published(current), published(next)];
        for (let i = 0; i < 5; i++) await list(cooled, "alice", await token(next, "alice")).expect(401);
        await list(cooled, "alice", await token(stranger, "alice", {})).expect(401);
        expect(server.fetches).toBe(1);
      } finally {
        await server.close();
      }
    });

    it("when a token has no kid, is verified by the one key of its type, and refused when the set has several", async () => {
      const [only, twin] = await Promise.all([keyPair("ES256", "only"), keyPair("ES256", "twin")]);
      const server = await startKeyServer([published(only)]);
      try {
        const single = appWith(repository, { auth: jwksAuth(server) });
        await list(single, "alice", await token({ ...only, kid: undefined }, "alice")).expect(200);
        server.keys = [published(only), published(twin)];
        const ambiguous = appWith(repository, { auth: jwksAuth(server) });
        await list(ambiguous, "alice", await token({ ...only, kid: undefined }, "alice")).expect(401);
      } finally {
        await server.close();
      }
    });

    it("when the provider answers 500, is unreachable or too slow, answers 503 (not 401) with Retry-After, then recovers", async () => {
      const server = await startKeyServer([published(k1)]);
      try {
        const flaky = appWith(repository, { auth: jwksAuth(server, { timeoutMs: 200 }) });
        const t = await token(k1, "alice");
        const unavailable = { error: AUTH_MESSAGES.keysUnavailable };
        server.failure = 500;
        const refused = await list(flaky, "alice", t).expect(503, unavailable);
        expect(refused.headers["retry-after"]).toBe("1"); // the 200 ms deadline, in whole seconds
        server.failure = "hang";
        await list(flaky, "alice", t).expect(503, unavailable);
        server.failure = undefined;
        await list(flaky, "alice", t).expect(200); // a failed fetch starts no cooldown
      } finally {
        await server.close();
      }
      const gone = appWith(repository, { auth: jwksAuth(server) }); // its port is closed now
      const res = await list(gone, "alice", await token(k1, "alice")).expect(503, {
        error: AUTH_MESSAGES.keysUnavailable,
      });
      expect(res.headers["retry-after"]).toBe("5"); // the default 5 s deadline
    });

    // Bounded without the deadline under test: a request that hangs fails here instead of waiting for Jest.
    const BOUND = { deadline: 10_000 };

    it("when the provider sends its headers and then stalls the body, answers 503 with Retry-After, and the next request after it recovers fetches again", async () => {
      const server = await startKeyServer([published(k1)]);
      try {
        const stalled = appWith(repository, { auth: jwksAuth(server, { timeoutMs: 300 }) });
        const t = await token(k1, "alice");
        server.failure = "stall";
        // Three requests at once share the one fetch, and all get the 503 when its deadline passes.
        const answers = await Promise.all([1, 2, 3].map(() => list(stalled, "alice", t).timeout(BOUND)));
        for (const res of answers) {
          expect({ status: res.status, body: res.body, retryAfter: res.headers["retry-after"] }).toStrictEqual({
            status: 503,
            body: { error: AUTH_MESSAGES.keysUnavailable },
            retryAfter: "1",
          });
        }
        expect(server.fetches).toBe(1);

        server.failure = undefined;
        await list(stalled, "alice", t).timeout(BOUND).expect(200, { todoItems: [] });
        expect(server.fetches).toBe(2); // a new fetch: nothing left waiting on the stalled one
      } finally {
        await server.close();
      }
    });

    it("when the key set is over the size cap (a valid set padded to 4 MiB), answers 503, then recovers", async () => {
      const server = await startKeyServer([published(k1)]);
      try {
        const capped = appWith(repository, { auth: jwksAuth(server) }); // the default 256 KiB cap
        const t = await token(k1, "alice");
        server.failure = "huge";
        const res = await list(capped, "alice", t).timeout(BOUND).expect(503, { error: AUTH_MESSAGES.keysUnavailable });
        expect(res.headers["retry-after"]).toBe("5");
        server.failure = undefined;
        await list(capped, "alice", t).timeout(BOUND).expect(200, { todoItems: [] });
        expect(server.fetches).toBe(2);
      } finally {
        await server.close();
      }
    });

    it("when the key set declares a Content-Length over the cap, answers 503", async () => {
      const server = await startKeyServer([published(k1)]);
      try {
        const small = appWith(repository, { auth: jwksAuth(server, { maxBytes: 64 }) });
        await list(small, "alice", await token(k1, "alice"))
          .timeout(BOUND)
          .expect(503, { error: AUTH_MESSAGES.keysUnavailable });
      } finally {
        await server.close();
      }
    });

    it("when the provider serves something that is not a key set, answers 503", async () => {
      const server = await startKeyServer([]);
      try {
        server.keys = "not keys" as unknown as JWK[];
        const broken = appWith(repository, { auth: jwksAuth(server) });
        await list(broken, "alice", await token(k1, "alice")).expect(503, { error: AUTH_MESSAGES.keysUnavailable });
      } finally {
        await server.close();
      }
    });
  });
});

describe("fetchKeySet (one fetch of the provider's key set)", () => {
  let server: KeyServer;
  beforeEach(async () => {
    server = await startKeyServer([published(k1)]);
  });
  afterEach(async () => {
    await server.close();
  });
  const unavailable = (problem: string) => ({
    name: "KeySetUnavailable",
    message: `JSON Web Key Set unavailable: ${problem}`,
  });
  const fetchFrom = (options: { timeoutMs?: number; maxBytes?: number } = {}) =>
    fetchKeySet({ url: server.url, timeoutMs: options.timeoutMs ?? 5_000, maxBytes: options.maxBytes ?? 256 * 1024 });

  it("when the server answers the set, resolves to it", async () => {
    await expect(fetchFrom()).resolves.toStrictEqual({ keys: [published(k1)] });
  });

  it("when the server stalls after the headers, rejects at the deadline", async () => {
    server.failure = "stall";
    await expect(fetchFrom({ timeoutMs: 200 })).rejects.toMatchObject(
      unavailable("no complete answer within the deadline"),
    );
  });

  it("when the server never answers, rejects at the deadline", async () => {
    server.failure = "hang";
    await expect(fetchFrom({ timeoutMs: 200 })).rejects.toMatchObject(
      unavailable("no complete answer within the deadline"),
    );
  });

  it("when the body declares more bytes than the cap, rejects naming both", async () => {
    const size = Buffer.byteLength(JSON.stringify({ keys: [published(k1)] }));
    await expect(fetchFrom({ maxBytes: 64 })).rejects.toMatchObject(
      unavailable(`the body declares ${size} bytes, over 64`),
    );
  });

  it("when a body without Content-Length grows past the cap, rejects", async () => {
    server.failure = "huge";
    await expect(fetchFrom()).rejects.toMatchObject(unavailable(`the body is over ${256 * 1024} bytes`));
  });

  it("when the server answers another status, rejects naming it", async () => {
    server.failure = 502;
    await expect(fetchFrom()).rejects.toMatchObject(unavailable("the server answered 502"));
  });

  it("when the body is not JSON, rejects", async () => {
    server.failure = "html";
    await expect(fetchFrom()).rejects.toMatchObject(unavailable("the body is not JSON"));
  });
});

describe("sign-in with an HS256 shared secret", () => {
  let location: StorageLocation;
  let repository: TodoRepository;
  let app: Express;

  beforeAll(async () => {
    location = await pgliteMode.locate(); // storage plays no part in what differs here
    ({ repository } = await buildApp(location.options));
    app = appWith(repository, { auth: secretAuth() });
  });

  afterAll(async () => {
    await repository?.close();
    await location?.dispose();
  });

  it("when the token is HS256 with the secret, serves the user's routes", async () => {
    const t = await token(hmacKey(SECRET), "sam");
    await request(app).post("/users/sam/todos").set("authorization", `Bearer ${t}`).send({ title: "s" }).expect(201);
    expect((await list(app, "sam", t).expect(200)).body.todoItems).toHaveLength(1);
  });

  it.each<[string, () => Promise<string>]>([
    ["signed with another secret", () => token(hmacKey(randomBytes(32).toString("hex")), "sam")],
    ["HS384 with the same secret", () => token(hmacKey(SECRET, "HS384"), "sam")],
    ["ES256 (a key set's algorithm)", () => token(k1, "sam")],
    ["unsigned (alg none)", async () => unsignedToken("sam")],
    ["expired", () => token(hmacKey(SECRET), "sam", { exp: now() - 60 })],
    ["valid for 100 years", () => token(hmacKey(SECRET), "sam", { exp: now() + 100 * YEAR })],
    ["issued a year in the future", () => token(hmacKey(SECRET), "sam", { iat: now() + YEAR, exp: now() + YEAR + 60 })],
    ["for another audience", () => token(hmacKey(SECRET), "sam", { aud: "x" })],
  ])("when the token is %s, answers 401 invalid_token", async (_situation, make) => {
    const res = await list(app, "sam", await make()).expect(401, { error: AUTH_MESSAGES.invalid });
    expect(res.headers["www-authenticate"]).toBe(INVALID);
  });

  it("when the token is another user's, answers 403", async () => {
    await list(app, "sam", await token(hmacKey(SECRET), "pat")).expect(403, { error: AUTH_MESSAGES.forbidden });
  });
});

// ---------------------------------------------------------------------------------------------------------

describe("/openapi.json with sign-in on", () => {
  const operations = (doc: ReturnType<typeof todosOpenApi>) =>
    Object.entries(doc.paths)
      .flatMap(([p, ops]) =>
        Object.entries(ops).map(
          ([method, op]) =>
            `${method.toUpperCase()} ${p} ${Object.keys(op.responses as object).join(",")} ${JSON.stringify(op.security ?? null)}`,
        ),
      )
      .sort();

  it("with a key set, declares the bearer scheme, requires it on the per-user routes and documents 401/403/503", async () => {
    const doc = todosOpenApi({ auth: jwksAuth(provider) });
    const bearer = '[{"bearerAuth":[]}]';
    expect(operations(doc)).toStrictEqual([
      `DELETE /users/{userId}/todos/{itemId} 200,400,401,403,404,500,503 ${bearer}`,
      "GET /health 200 null",
      "GET /ready 200,503 null",
      `GET /users/{userId}/todos 200,400,401,403,500,503 ${bearer}`,
      `GET /users/{userId}/todos/{itemId} 200,400,401,403,404,500,503 ${bearer}`,
      `GET /v1/user/{userId}/todos 200,400,401,403,500,503 ${bearer}`,
      `POST /users/{userId}/todos 201,400,401,403,409,413,415,500,503 ${bearer}`,
      `PUT /users/{userId}/todos/{itemId} 200,400,401,403,404,413,415,500,503 ${bearer}`,
    ]);
    expect(doc.components?.securitySchemes).toStrictEqual({
      bearerAuth: expect.objectContaining({ type: "http", scheme: "bearer", bearerFormat: "JWT" }),
    });
    const listResponses = (doc.paths["/users/{userId}/todos"]?.get?.responses ?? {}) as Record<
      string,
      { headers?: object }
    >;
    expect(Object.keys(listResponses["401"]?.headers ?? {})).toStrictEqual(["WWW-Authenticate"]);
    const validation = await validateOpenApi31(doc);
    expect(validation).toStrictEqual({ valid: true, report: expect.anything() });
  });

  it("with a shared secret, documents no 503 (no provider to reach)", () => {
    const doc = todosOpenApi({ auth: secretAuth() });
    expect(operations(doc).find((o) => o.startsWith("GET /users/{userId}/todos"))).toBe(
      'GET /users/{userId}/todos 200,400,401,403,500 [{"bearerAuth":[]}]',
    );
  });

  it("with sign-in off, declares no security at all (the document is as before)", () => {
    const doc = todosOpenApi();
    expect(doc.components?.securitySchemes).toBeUndefined();
    expect(operations(doc).every((o) => o.endsWith(" null") && !/40[13]/.test(o))).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------------------

describe("TODOS_AUTH and TODOS_JWT_* configuration", () => {
  const JWKS = "https://issuer.test/.well-known/jwks.json";
  const base = { TODOS_AUTH: "jwt", TODOS_JWT_ISSUER: ISSUER, TODOS_JWT_AUDIENCE: AUDIENCE };

  function problems(env: Record<string, string>): string[] {
    try {
      loadConfig(configSchema, env);
    } catch (err) {
      if (err instanceof ConfigError) return err.problems;
      throw err;
    }
    throw new Error("the config was accepted");
  }

  it("when nothing is set, sign-in is off and nothing is verified", () => {
    const config = loadConfig(configSchema, {});
    expect(config.TODOS_AUTH).toBe("off");
    expect(authFromConfig(config)).toBeUndefined();
  });

  it("when jwt with a key set URL, issuer and audience, builds a key-set verifier with the admin claim", () => {
    const config = loadConfig(configSchema, { ...base, TODOS_JWT_JWKS_URL: JWKS, TODOS_JWT_ADMIN_CLAIM: ADMIN_CLAIM });
    expect(config).toMatchObject({ TODOS_AUTH: "jwt", TODOS_JWT_JWKS_URL: JWKS, TODOS_JWT_ADMIN_CLAIM: ADMIN_CLAIM });
    expect(authFromConfig(config)).toMatchObject({ keySource: "jwks", adminClaim: ADMIN_CLAIM });
  });

  it("when jwt with a secret, builds a verifier that accepts that secret's HS256 tokens", async () => {
    const auth = authFromConfig(loadConfig(configSchema, { ...base, TODOS_JWT_SECRET: SECRET }));
    expect(auth).toMatchObject({ keySource: "secret", adminClaim: undefined });
    await expect(auth?.verify(await token(hmacKey(SECRET), "sam"))).resolves.toMatchObject({ sub: "sam" });
  });

  it("when TODOS_JWT_MAX_LIFETIME and TODOS_JWT_MAX_FUTURE_IAT are unset, bounds tokens to 24 h and 60 s", () => {
    const auth = authFromConfig(loadConfig(configSchema, { ...base, TODOS_JWT_SECRET: SECRET }));
    expect(auth?.tokenTimes).toStrictEqual({ maxLifetimeSeconds: 86_400, maxFutureIatSeconds: 60 });
  });

  it("when TODOS_JWT_MAX_LIFETIME=300 and TODOS_JWT_MAX_FUTURE_IAT=0, refuses a 301 s token and one issued ahead, accepts one of 300 s", async () => {
    const auth = authFromConfig(
      loadConfig(configSchema, {
        ...base,
        TODOS_JWT_SECRET: SECRET,
        TODOS_JWT_MAX_LIFETIME: "300",
        TODOS_JWT_MAX_FUTURE_IAT: "0",
      }),
    ) as TodosAuth;
    const issued = now();
    const key = hmacKey(SECRET);
    await expect(auth.verify(await token(key, "sam", { iat: issued, exp: issued + 300 }))).resolves.toMatchObject({
      sub: "sam",
    });
    await expect(auth.verify(await token(key, "sam", { iat: issued, exp: issued + 301 }))).rejects.toMatchObject({
      status: 401,
      message: AUTH_MESSAGES.invalid,
      cause: expect.objectContaining({ message: "token lifetime (exp - iat) over 300 s" }),
    });
    await expect(auth.verify(await token(key, "sam", { iat: now() + 30, exp: now() + 60 }))).rejects.toMatchObject({
      status: 401,
      cause: expect.objectContaining({ message: '"iat" claim timestamp check failed (more than 0 s in the future)' }),
    });
  });

  it.each([
    ["TODOS_JWT_MAX_LIFETIME", "59", "TODOS_JWT_MAX_LIFETIME: must be 60-31536000 seconds"],
    ["TODOS_JWT_MAX_LIFETIME", "31536001", "TODOS_JWT_MAX_LIFETIME: must be 60-31536000 seconds"],
    ["TODOS_JWT_MAX_LIFETIME", "24h", "TODOS_JWT_MAX_LIFETIME: must be a whole number of seconds (60-31536000)"],
    ["TODOS_JWT_MAX_LIFETIME", "1.5e3", "TODOS_JWT_MAX_LIFETIME: must be a whole number of seconds (60-31536000)"],
    ["TODOS_JWT_MAX_FUTURE_IAT", "3601", "TODOS_JWT_MAX_FUTURE_IAT: must be 0-3600 seconds"],
    ["TODOS_JWT_MAX_FUTURE_IAT", "-1", "TODOS_JWT_MAX_FUTURE_IAT: must be a whole number of seconds (0-3600)"],
  ])("when %s=%s, refuses it naming the range", (name, value, message) => {
    expect(problems({ ...base, TODOS_JWT_SECRET: SECRET, [name]: value })).toStrictEqual([message]);
  });

  it("when a time bound is set while TODOS_AUTH is off, refuses naming TODOS_AUTH", () => {
    expect(problems({ TODOS_JWT_MAX_LIFETIME: "3600" })).toStrictEqual([
      'TODOS_AUTH: must be "jwt" when TODOS_JWT_MAX_LIFETIME is set (it is "off")',
    ]);
  });

  it("when jwt has neither key source, refuses naming TODOS_JWT_JWKS_URL", () => {
    expect(problems(base)).toStrictEqual([
      "TODOS_JWT_JWKS_URL: is required when TODOS_AUTH=jwt, unless TODOS_JWT_SECRET is set instead",
    ]);
  });

  it("when jwt has both key sources, refuses naming TODOS_JWT_SECRET", () => {
    expect(problems({ ...base, TODOS_JWT_JWKS_URL: JWKS, TODOS_JWT_SECRET: SECRET })).toStrictEqual([
      "TODOS_JWT_SECRET: must not be set together with TODOS_JWT_JWKS_URL: choose one key source",
    ]);
  });

  it("when the secret is under 32 bytes, refuses without echoing it; 32 bytes (16 two-byte characters) pass", () => {
    const short = "s3cret-but-only-31-bytes-long!!";
    expect(Buffer.byteLength(short)).toBe(31);
    const found = problems({ ...base, TODOS_JWT_SECRET: short });
    expect(found).toStrictEqual(["TODOS_JWT_SECRET: must be at least 32 bytes"]);
    expect(found.join()).not.toContain(short);
    expect(loadConfig(configSchema, { ...base, TODOS_JWT_SECRET: "é".repeat(16) }).TODOS_JWT_SECRET).toBe(
      "é".repeat(16),
    );
  });

  it("when jwt has no issuer or audience, refuses naming each", () => {
    expect(problems({ TODOS_AUTH: "jwt", TODOS_JWT_SECRET: SECRET })).toStrictEqual([
      "TODOS_JWT_ISSUER: is required when TODOS_AUTH=jwt",
      "TODOS_JWT_AUDIENCE: is required when TODOS_AUTH=jwt",
    ]);
  });

  it.each(["http://issuer.test/jwks", "ftp://issuer.test/jwks", "issuer.test/jwks"])(
    "when the key set URL is %s (not https, not loopback http), refuses it",
    (url) => {
      expect(problems({ ...base, TODOS_JWT_JWKS_URL: url })).toStrictEqual([
        "TODOS_JWT_JWKS_URL: must be an https:// URL (http:// only to localhost, 127.0.0.1 or [::1])",
      ]);
    },
  );

  it("when the key set URL is http:// on loopback, accepts it", () => {
    for (const url of ["http://127.0.0.1:9000/jwks", "http://localhost/jwks", "http://[::1]:1/jwks"]) {
      expect(loadConfig(configSchema, { ...base, TODOS_JWT_JWKS_URL: url }).TODOS_JWT_JWKS_URL).toBe(url);
    }
  });

  it("when a TODOS_JWT_* variable is set but TODOS_AUTH is not jwt, refuses naming TODOS_AUTH", () => {
    expect(problems({ TODOS_JWT_SECRET: SECRET })).toStrictEqual([
      'TODOS_AUTH: must be "jwt" when TODOS_JWT_SECRET is set (it is "off")',
    ]);
  });

  it("when TODOS_AUTH is neither off nor jwt, or the admin claim is a registered claim, refuses naming it", () => {
    expect(problems({ TODOS_AUTH: "yes" })).toStrictEqual(['TODOS_AUTH: must be "off" or "jwt"']);
    expect(problems({ ...base, TODOS_JWT_SECRET: SECRET, TODOS_JWT_ADMIN_CLAIM: "sub" })).toStrictEqual([
      "TODOS_JWT_ADMIN_CLAIM: must not be a registered claim (iss, sub, aud, exp, nbf, iat, jti)",
    ]);
  });
});

// ---------------------------------------------------------------------------------------------------------

/** The built service (dist/main.js, built by `pnpm test` before Jest runs) as its image runs it. */

describe("the built service process with sign-in", () => {
  const baseEnv = () => ({ PATH: process.env.PATH ?? "", LOG_LEVEL: "info", TODOS_PORT: "0" });

  it("when TODOS_AUTH=jwt has no key source, exits 1 naming the variable", async () => {
    const outcome = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        [MAIN],
        { env: { ...baseEnv(), TODOS_AUTH: "jwt", TODOS_JWT_ISSUER: ISSUER, TODOS_JWT_AUDIENCE: AUDIENCE } },
        (_err, _stdout, stderr) => resolve({ code: child.exitCode, stderr }),
      );
    });
    expect(outcome.code).toBe(1);
    expect(outcome.stderr).toContain("TODOS_JWT_JWKS_URL: is required when TODOS_AUTH=jwt");
  });

  it("when TODOS_AUTH=jwt with a secret, refuses a request without a token and serves one with", async () => {
    // PostgreSQL: the process starts in well under a second (PGlite's first start runs initdb, seconds).
    const location = await postgresMode.locate();
    const service = await startService({
      ...baseEnv(),
      DATABASE_URL: location.options.databaseUrl ?? "",
      TODOS_AUTH: "jwt",
      TODOS_JWT_SECRET: SECRET,
      TODOS_JWT_ISSUER: ISSUER,
      TODOS_JWT_AUDIENCE: AUDIENCE,
    });
    try {
      const { lines, port } = service;
      expect(lines.find((l) => String(l.message).startsWith("sign-in on"))).toMatchObject({
        keySource: "secret",
        issuer: ISSUER,
        audience: AUDIENCE,
      });
      expect(JSON.stringify(lines)).not.toContain(SECRET);
      const base = `http://127.0.0.1:${port}`;
      const res = await request(base).get("/users/sam/todos").expect(401);
      expect(res.headers["www-authenticate"]).toBe(MISSING);
      const t = await token(hmacKey(SECRET), "sam");
      await request(base).get("/users/sam/todos").set("authorization", `Bearer ${t}`).expect(200, { todoItems: [] });
    } finally {
      service.child.kill("SIGTERM");
      expect(await service.exited).toBe(0);
      await location.dispose();
    }
  });
});
