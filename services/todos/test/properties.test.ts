import fc from "fast-check";
import request from "supertest";
import { buildApp, STORAGE_MODES, type StorageLocation, type TestApp } from "./support/storage-modes";

/**
 * Bad input from every side: arbitrary JSON values, odd and huge strings, odd path parameters. Whatever
 * arrives, the service never crashes, answers no 5xx but the seed's malformed-JSON 500, and a rejected
 * request changes nothing. numRuns is bounded so the suite stays fast.
 */
const RUNS = { numRuns: 100 };
const INTERNAL = { error: "Internal server error" };
const JSON_TYPE = { "content-type": "application/json" };
// Node's HTTP parser answers 431 itself when the request line and headers pass 16 KiB (a very long URL).
const HEADERS_TOO_LARGE = 431;

const isJson = (raw: string) => {
  try {
    JSON.parse(raw);
    return true;
  } catch {
    return false;
  }
};

/** Percent-encodes every UTF-8 byte, so any string (unpaired surrogates become U+FFFD) is a valid segment. */
const encodeAll = (s: string) => [...Buffer.from(s, "utf8")].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("");

const oddString = fc.oneof(
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.string({ unit: "grapheme", minLength: 120, maxLength: 140 }),
  fc.string({ minLength: 490, maxLength: 510 }),
  fc.integer({ min: 0, max: 80_000 }).map((n) => "x".repeat(n)),
  fc.constantFrom("", " ", "\u0000", "\ud800", "\udc00x", "😀", "\u202e", "null", "<script>", "'; DROP TABLE x;--"),
);

const anyBody = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.record(
    { title: fc.oneof(oddString, fc.jsonValue({ maxDepth: 1 })), completed: fc.jsonValue({ maxDepth: 1 }) },
    { requiredKeys: [] },
  ),
  fc.dictionary(fc.string({ unit: "binary", maxLength: 8 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 4 }),
);

const rawBody = fc.oneof(
  anyBody.map((v) => JSON.stringify(v) ?? "null"),
  fc.string({ unit: "binary", maxLength: 60 }),
);

const oddSegment = fc.oneof(
  oddString.filter((s) => s.length < 2000).map(encodeAll),
  fc.stringMatching(/^[A-Za-z0-9%._~!$&'()*+,;=:@-]{1,300}$/),
  fc.constantFrom("%", "%zz", "%E0%A4%A", "..", ".", "%2F", "%00", "a%2Fb", "%FF", "%C0%AF", "%ED%A0%80"),
);

describe.each(STORAGE_MODES)("bad input on $name", (mode) => {
  let location: StorageLocation;
  let t: TestApp;
  const watched = `watched-${mode.name}`;
  let watchedItemId: string;

  beforeAll(async () => {
    location = await mode.locate();
    t = await buildApp(location.options);
    const res = await request(t.app).post(`/users/${watched}/todos`).send({ title: "watched" }).expect(201);
    watchedItemId = res.body.todoItem.id;
  });

  afterAll(async () => {
    await t?.repository.close();
    await location?.dispose();
  });

  const watchedList = async () => (await request(t.app).get(`/users/${watched}/todos`).expect(200)).body;

  /** Sends a raw body and checks the outcome is one the contract allows. */
  const send = async (method: "post" | "put", path: string, raw: string, allowed: number[]) => {
    const res = await request(t.app)[method](path).set("content-type", "application/json").send(raw);
    if (res.status === 500) {
      expect({ body: res.body, parseable: isJson(raw) }).toStrictEqual({ body: INTERNAL, parseable: false });
    } else {
      expect(allowed).toContain(res.status);
    }
    return res;
  };

  describe("POST /users/:userId/todos", () => {
    it("with arbitrary bodies: 201 or a 4xx (500 only for unparseable JSON), and nothing stored when rejected", async () => {
      await fc.assert(
        fc.asyncProperty(rawBody, async (raw) => {
          const before = await watchedList();
          const res = await send("post", `/users/${watched}/todos`, raw, [201, 400, 413]);
          if (res.status === 201) {
            await request(t.app).delete(`/users/${watched}/todos/${res.body.todoItem.id}`).expect(200);
          }
          expect(await watchedList()).toStrictEqual(before);
        }),
        RUNS,
      );
    });
  });

  describe("PUT /users/:userId/todos/:itemId", () => {
    it("with arbitrary bodies: 200 or a 4xx (500 only for unparseable JSON), and nothing changed when rejected", async () => {
      await fc.assert(
        fc.asyncProperty(rawBody, async (raw) => {
          const before = await watchedList();
          const res = await send("put", `/users/${watched}/todos/${watchedItemId}`, raw, [200, 400, 413]);
          if (res.status === 200) {
            // Put the watched item back the way it was, so every run starts from the same state.
            const [original] = before.todoItems;
            await request(t.app)
              .put(`/users/${watched}/todos/${watchedItemId}`)
              .send({ title: original.title, completed: original.completed })
              .expect(200);
            return;
          }
          expect(await watchedList()).toStrictEqual(before);
        }),
        RUNS,
      );
    });
  });

  describe("every route with odd path parameters", () => {
    it("answers only documented statuses and changes nothing when it rejects", async () => {
      const methods = fc.constantFrom("get", "getV1", "post", "put", "delete");
      await fc.assert(
        fc.asyncProperty(methods, oddSegment, oddSegment, anyBody, async (method, userSeg, itemSeg, body) => {
          const listPath = `/users/${userSeg}/todos`;
          const snapshot = async () => {
            const res = await request(t.app).get(listPath);
            return { status: res.status, body: res.body };
          };
          const before = { target: await snapshot(), watched: await watchedList() };
          let status: number;
          let created: string | undefined;
          switch (method) {
            case "get":
              status = (await request(t.app).get(listPath)).status;
              expect([200, 400, 404, HEADERS_TOO_LARGE]).toContain(status);
              break;
            case "getV1":
              status = (await request(t.app).get(`/v1/user/${userSeg}/todos`)).status;
              expect([200, 400, 404, HEADERS_TOO_LARGE]).toContain(status);
              break;
            case "post": {
              const res = await request(t.app).post(listPath).set(JSON_TYPE).send(JSON.stringify(body));
              status = res.status;
              expect([201, 400, 404, 413, HEADERS_TOO_LARGE]).toContain(status);
              if (status === 201) created = res.body.todoItem.id;
              break;
            }
            case "put":
              status = (await request(t.app).put(`${listPath}/${itemSeg}`).set(JSON_TYPE).send(JSON.stringify(body)))
                .status;
              // An empty itemId leaves `${listPath}/`, the list's path, which takes no PUT or DELETE: 405.
              expect([400, 404, 413, HEADERS_TOO_LARGE, ...(itemSeg === "" ? [405] : [])]).toContain(status);
              break;
            default:
              status = (await request(t.app).delete(`${listPath}/${itemSeg}`)).status;
              expect([400, 404, HEADERS_TOO_LARGE, ...(itemSeg === "" ? [405] : [])]).toContain(status);
          }
          if (created !== undefined) {
            await request(t.app).delete(`${listPath}/${created}`).expect(200);
          }
          expect({ target: await snapshot(), watched: await watchedList() }).toStrictEqual(before);
        }),
        RUNS,
      );
    });

    it("with arbitrary query parameters on the list: 200 or 400, never more", async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.dictionary(
            fc.constantFrom("limit", "page", "x"),
            fc.oneof(oddString.map(encodeAll), fc.nat().map(String)),
            {
              maxKeys: 3,
            },
          ),
          async (query) => {
            const qs = Object.entries(query)
              .map(([k, v]) => `${k}=${v}`)
              .join("&");
            const res = await request(t.app).get(`/users/${watched}/todos?${qs}`);
            expect([200, 400, HEADERS_TOO_LARGE]).toContain(res.status);
          },
        ),
        RUNS,
      );
    });
  });
});
