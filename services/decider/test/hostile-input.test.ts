import { DeciderErrorBody } from "@localdecider/contracts/decider";
import { createLogger } from "@localdecider/service-kit";
import fc from "fast-check";
import request from "supertest";
import { INPUT_LIMITS } from "../src/routes/input-limits";
import { type Harness, harness } from "./helpers";

const nested = (depth: number, open: string, close: string, inner = "0") =>
  `${open.repeat(depth)}${inner}${close.repeat(depth)}`;
const bodyWithState = (stateJson: string) =>
  `{"model":"localdecider","questions":{"a":{"type":"noul"}},"state":${stateJson}}`;

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
  ])("a state of thousands of nested %s gets 400 naming the limit, not a 500", async (_kind, stateJson) => {
    const res = await post(bodyWithState(stateJson));
    expect(res.status).toBe(400);
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
    expect(res.status).toBe(400);
    expect(res.body.details[0].message).toBe(`nested deeper than ${INPUT_LIMITS.maxDepth} levels`);
    expect(errors).toStrictEqual([]);
  });

  it("nesting up to the limit is accepted and answered", async () => {
    const res = await post(bodyWithState(nested(INPUT_LIMITS.maxDepth - 2, "[", "]")));
    expect(res.status).toBe(200);
  });

  it("a body of more than the allowed number of values gets 400", async () => {
    const res = await post(bodyWithState(`[${new Array(INPUT_LIMITS.maxValues).fill("0").join(",")}]`));
    expect(res.status).toBe(400);
    expect(res.body.details).toStrictEqual([
      { path: "body", message: `the body holds more than ${INPUT_LIMITS.maxValues} JSON values` },
    ]);
  });

  it("any JSON body, nesting or header gets a JSON 4xx or an answer, never a 5xx (fast-check)", async () => {
    const deepValue = fc.integer({ min: 1, max: 400 }).map((depth) => nested(depth, "[", "]"));
    const body = fc.oneof(
      fc.json({ maxDepth: 6 }),
      deepValue.map(bodyWithState),
      fc.jsonValue({ maxDepth: 4 }).map((v) => bodyWithState(JSON.stringify(v))),
      fc.string({ maxLength: 200 }),
    );
    const contentType = fc.constantFrom(
      "application/json",
      "application/json; charset=utf-8",
      "text/plain",
      "application/x-www-form-urlencoded",
      "application/json; charset=latin1",
    );
    await fc.assert(
      fc.asyncProperty(body, contentType, async (text, type) => {
        const res = await post(text, type);
        expect(res.status).toBeLessThan(500);
        if (res.status >= 400) expect(DeciderErrorBody.parse(res.body)).toStrictEqual(res.body);
      }),
      { numRuns: 150 },
    );
    expect(errors).toStrictEqual([]);
  });
});
