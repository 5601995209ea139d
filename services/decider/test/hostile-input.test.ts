import { DeciderErrorBody, IMAGES_HEADER } from "@localdecider/contracts/decider";
import { createLogger } from "@localdecider/service-kit";
import fc from "fast-check";
import request from "supertest";
import { INPUT_LIMITS } from "../src/routes/input-limits";
import { type Harness, harness } from "./helpers";
import { PNG_ASSET } from "./image-assets";

const nested = (depth: number, open: string, close: string, inner = "0") =>
  `${open.repeat(depth)}${inner}${close.repeat(depth)}`;
const bodyWithState = (stateJson: string) =>
  `{"model":"localdecider","questions":{"a":{"type":"noul","instructions":"?"}},"state":${stateJson}}`;

describe("POST /v1/systemone with hostile bodies", () => {
  let h: Harness;
  const errors: string[] = [];
  beforeAll(async () => {
    const logger = createLogger({ service: "hostile", level: "error" });
    for (const t of logger.transports) t.silent = true;
    // Only error-level lines: anyone who can reach the port must not be able to fill the logs with them.
    logger.on("data", (info: { level: string; message: string }) => {
      if (info.level === "error") errors.push(JSON.stringify(info).slice(0, 600));
    });
    h = await harness({ logger, bodyLimit: "1mb" });
  });
  afterAll(async () => {
    await h.close();
  });
  const post = (text: string, type = "application/json") =>
    request(h.app).post("/v1/systemone").set("content-type", type).send(text);

  it.each([
    ["arrays", nested(5000, "[", "]")],
    ["objects", nested(5000, '{"k":', "}")],
    ["a mix", nested(2500, '[{"k":', "}]")],
  ])("a state of thousands of nested %s gets 422 naming the limit, not a 500", async (_kind, stateJson) => {
    const res = await post(bodyWithState(stateJson));
    expect(res.status).toBe(422);
    expect(res.body).toStrictEqual({
      error: "Invalid request body",
      code: "invalid_request",
      details: [
        { path: expect.stringMatching(/^state/), message: `nested deeper than ${INPUT_LIMITS.maxDepth} levels` },
      ],
    });
    expect(h.fake.calls).toBe(0);
    expect(errors).toStrictEqual([]);
  });

  it("deep nesting in instructions or a description is refused the same way", async () => {
    const deep = nested(3000, "[", "]");
    const res = await post(
      `{"model":"localdecider","state":null,"questions":{"a":{"type":"noul","instructions":${deep}}}}`,
    );
    expect(res.status).toBe(422);
    expect(res.body).toStrictEqual({
      error: "Invalid request body",
      code: "invalid_request",
      details: [{ path: "questions.a.instructions.0", message: `nested deeper than ${INPUT_LIMITS.maxDepth} levels` }],
    });
    expect(errors).toStrictEqual([]);
  });

  it("nesting up to the limit is accepted and answered", async () => {
    const res = await post(bodyWithState(nested(INPUT_LIMITS.maxDepth - 2, "[", "]")));
    expect(res.status).toBe(200);
  });

  it("a body of more than the allowed number of values gets 422", async () => {
    const res = await post(bodyWithState(`[${new Array(INPUT_LIMITS.maxValues).fill("0").join(",")}]`));
    expect(res.status).toBe(422);
    expect(res.body).toStrictEqual({
      error: "Invalid request body",
      code: "invalid_request",
      details: [{ path: "body", message: `the body holds more than ${INPUT_LIMITS.maxValues} JSON values` }],
    });
  });

  it("any JSON body, nesting or header gets a JSON 4xx or an answer, never a 5xx (fast-check)", async () => {
    const deepValue = fc.integer({ min: 1, max: 400 }).map((depth) => nested(depth, "[", "]"));
    // Jev 1.14's parts: an assets map of anything (an image sometimes), beside questions of any kind, box too.
    const asset = fc.oneof(
      fc.jsonValue({ maxDepth: 3 }),
      fc.record({
        type: fc.constantFrom("image", "video"),
        format: fc.constantFrom("png", "jpg", "gif"),
        data_base64: fc.oneof(fc.base64String({ maxLength: 40 }), fc.constant(PNG_ASSET.data_base64), fc.string()),
      }),
    );
    const withImages = fc
      .record({
        model: fc.constantFrom("localdecider", "jev"),
        state: fc.oneof(fc.string({ maxLength: 20 }), fc.jsonValue({ maxDepth: 3 })),
        questions: fc.oneof(
          fc.dictionary(
            fc.string({ maxLength: 8 }),
            fc.record({
              type: fc.constantFrom("noul", "box", "choice"),
              instructions: fc.oneof(fc.string({ maxLength: 20 }), fc.jsonValue({ maxDepth: 2 })),
            }),
          ),
          fc.jsonValue({ maxDepth: 3 }),
        ),
        assets: fc.oneof(fc.dictionary(fc.string({ maxLength: 8 }), asset), fc.jsonValue({ maxDepth: 3 })),
      })
      .map((v) => JSON.stringify(v));
    const body = fc.oneof(
      fc.json({ maxDepth: 6 }),
      deepValue.map(bodyWithState),
      fc.jsonValue({ maxDepth: 4 }).map((v) => bodyWithState(JSON.stringify(v))),
      fc.string({ maxLength: 200 }),
      withImages,
    );
    const contentType = fc.constantFrom(
      "application/json",
      "application/json; charset=utf-8",
      "text/plain",
      "application/x-www-form-urlencoded",
      "application/json; charset=latin1",
    );
    await fc.assert(
      fc.asyncProperty(body, contentType, fc.boolean(), async (text, type, optIn) => {
        const res = await post(text, type).set(IMAGES_HEADER, String(optIn));
        expect(res.status).toBeLessThan(500);
        if (res.status >= 400) expect(DeciderErrorBody.parse(res.body)).toStrictEqual(res.body);
      }),
      { numRuns: 150 },
    );
    expect(errors).toStrictEqual([]);
  });
});
