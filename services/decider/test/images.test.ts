import {
  BoxAnswer,
  IMAGES_HEADER,
  SystemOneRequest,
  type SystemOneRequest as SystemOneRequestBody,
  SystemOneResponse,
} from "@localdecider/contracts/decider";
import { AppError } from "@localdecider/service-kit";
import request from "supertest";
import { buildDeciderOpenApi } from "../src/app";
import { CHAT_SERVER_ACCEPTS, EMBEDDED_ACCEPTS } from "../src/backend";
import { admitImages } from "../src/routes/images";
import { type Harness, harness } from "./helpers";
import { JPEG_ASSET, PNG_ASSET } from "./image-assets";

/** Jev 1.14's example: a box question and a noul about one photo, sent as an asset. */
const withImages = {
  model: "localdecider",
  state: { room: "kitchen", photo: "`photo`" },
  questions: {
    has_mug: { type: "noul", instructions: "Is there a coffee mug in `photo`?" },
    mug: { type: "box", instructions: "the coffee mug in `photo`" },
  },
  assets: { photo: PNG_ASSET },
};

const OPT_IN = "images and box questions are opt-in: send the header TypeSafe-Danger-Zone-Images: true";
const CHAT_SERVER_REFUSAL = {
  error:
    "images and box questions need a native System One upstream; this decider runs a chat model server (OpenAI-compatible, answers read from token logprobs)",
  code: "images_unsupported",
};

describe("POST /v1/systemone with Jev 1.14's images and box questions", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness();
  });
  afterAll(async () => {
    await h.close();
  });
  beforeEach(() => {
    h.fake.requests.length = 0;
  });
  const decide = (body: unknown, header?: string) => {
    const req = request(h.app).post("/v1/systemone");
    return (header === undefined ? req : req.set(IMAGES_HEADER, header)).send(body as object);
  };

  it.each([
    ["without the header", undefined],
    ["with the header false", "false"],
    ["with the header empty", ""],
  ])("%s, assets and a box question get 422 invalid_request naming each and the header", async (_name, header) => {
    const res = await decide(withImages, header);
    expect(res.status).toBe(422);
    expect(res.body).toStrictEqual({
      error: OPT_IN,
      code: "invalid_request",
      details: [
        { path: "assets", message: OPT_IN },
        { path: "questions.mug.type", message: OPT_IN },
      ],
    });
    expect(h.fake.requests).toHaveLength(0);
  });

  it("without the header, assets alone (referenced from a criteria text) get the same 422", async () => {
    const res = await decide({
      model: "localdecider",
      state: "a kitchen",
      questions: { pick: { type: "choice", instructions: "Which fits?", criteria: { a: "like `ref`", b: null } } },
      assets: { ref: JPEG_ASSET },
    });
    expect(res.status).toBe(422);
    expect(res.body).toStrictEqual({
      error: OPT_IN,
      code: "invalid_request",
      details: [{ path: "assets", message: OPT_IN }],
    });
  });

  it("without the header, a box question alone gets the same 422", async () => {
    const res = await decide({
      model: "localdecider",
      state: null,
      questions: { mug: { type: "box", instructions: "the mug" } },
    });
    expect(res.status).toBe(422);
    expect(res.body).toStrictEqual({
      error: OPT_IN,
      code: "invalid_request",
      details: [{ path: "questions.mug.type", message: OPT_IN }],
    });
  });

  it.each(["true", "TRUE", " True "])(
    "opted in (%j) in front of a chat model server, they get 422 images_unsupported naming the backend",
    async (header) => {
      const res = await decide(withImages, header);
      expect(res.status).toBe(422);
      expect(res.body).toStrictEqual(CHAT_SERVER_REFUSAL);
      expect(h.fake.requests).toHaveLength(0);
    },
  );

  it("opted in, an asset no text names is still refused as invalid (422 invalid_request), before the backend", async () => {
    const res = await decide({ ...withImages, assets: { photo: PNG_ASSET, other: PNG_ASSET } }, "true");
    expect(res.status).toBe(422);
    expect(res.body).toStrictEqual({
      error: "Invalid request body",
      code: "invalid_request",
      details: [
        {
          path: "assets.other",
          message:
            'asset "other" is not referenced: name it in the state, an instructions or a criteria text, or leave it out',
        },
      ],
    });
  });

  it("the header alone changes nothing: a text request is answered as usual", async () => {
    const res = await decide(
      { model: "localdecider", state: "s", questions: { a: { type: "noul", instructions: "Is it?" } }, assets: {} },
      "true",
    );
    expect(res.status).toBe(200);
    expect(SystemOneResponse.parse(res.body)).toStrictEqual(res.body);
    expect(h.fake.requests).toHaveLength(1);
  });
});

describe("admitImages: the one check a native System One upstream passes", () => {
  const body = SystemOneRequest.parse(withImages);

  it("lets images and box questions through when the backend's upstream accepts images, opted in", () => {
    expect(() => admitImages(body, "true", { images: true, runs: "a native System One server" })).not.toThrow();
  });

  it("still wants the opt-in header when the upstream accepts images", () => {
    const refused = catchError(() =>
      admitImages(body, undefined, { images: true, runs: "a native System One server" }),
    );
    expect([refused.status, refused.code, refused.message]).toStrictEqual([422, "invalid_request", OPT_IN]);
  });

  it("names the embedded engine when it runs", () => {
    const refused = catchError(() => admitImages(body, "true", EMBEDDED_ACCEPTS));
    expect([refused.status, refused.code, refused.message]).toStrictEqual([
      422,
      "images_unsupported",
      "images and box questions need a native System One upstream; this decider runs the embedded engine (node-llama-cpp)",
    ]);
  });

  it("passes a request without images or box questions whatever the backend and header", () => {
    const text: SystemOneRequestBody = {
      model: "localdecider",
      state: null,
      questions: { a: { type: "noul", instructions: "Is it?" } },
    };
    expect(() => admitImages(text, undefined, CHAT_SERVER_ACCEPTS)).not.toThrow();
    expect(() => admitImages(text, "true", EMBEDDED_ACCEPTS)).not.toThrow();
  });
});

describe("the box answer's contract", () => {
  const answer = { type: "box", box: { top: 0.25, bottom: 0.82, left: 0.44, right: 0.84 }, confidence: 0.92 };

  it("accepts Jev 1.14's published example, as an answer in a response", () => {
    expect(BoxAnswer.parse(answer)).toStrictEqual(answer);
    const response = { model: "jev-1.14.0", answers: { mug: answer }, usage: { input_tokens: 9, output_tokens: 0 } };
    expect(SystemOneResponse.parse(response)).toStrictEqual(response);
  });

  it.each([
    ["an edge past the image", { ...answer, box: { ...answer.box, right: 1.2 } }, ["box", "right"]],
    ["an edge missing", { ...answer, box: { top: 0, bottom: 1, left: 0 } }, ["box", "right"]],
    ["no confidence", { type: "box", box: answer.box }, ["confidence"]],
  ])("refuses %s", (_name, value, path) => {
    const parsed = BoxAnswer.safeParse(value);
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map((i) => i.path)).toStrictEqual([path]);
  });
});

describe("the OpenAPI document", () => {
  const operation = buildDeciderOpenApi({ hostCheck: false }).paths["/v1/systemone"]?.post as {
    description: string;
    requestBody: { content: { "application/json": { schema: JsonSchema } } };
    responses: Record<string, { content: { "application/json": { schema: JsonSchema } } }>;
  };
  const request = operation.requestBody.content["application/json"].schema;
  const response = operation.responses["200"]?.content["application/json"].schema as JsonSchema;

  it("takes a box question with required instructions, and an assets map of PNG or JPEG images", () => {
    const questions = request.properties?.questions?.additionalProperties?.oneOf ?? [];
    const box = questions.find((q) => q.properties?.type?.const === "box");
    expect(box?.required).toStrictEqual(["type", "instructions"]);
    expect(questions.map((q) => q.required?.includes("instructions"))).toStrictEqual([true, true, true, true]);
    const asset = request.properties?.assets?.additionalProperties;
    expect(asset?.required).toStrictEqual(["type", "format", "data_base64"]);
    expect(asset?.properties?.format?.enum).toStrictEqual(["png", "jpg"]);
  });

  it("answers a box with its four edges and a confidence", () => {
    const answers = response.properties?.answers?.additionalProperties?.oneOf ?? [];
    const box = answers.find((a) => a.properties?.type?.const === "box");
    expect(box?.required).toStrictEqual(["type", "box", "confidence"]);
    expect(box?.properties?.box?.required).toStrictEqual(["top", "bottom", "left", "right"]);
  });

  it("documents the opt-in header and the 413 and 422 refusals", () => {
    expect(operation.description).toContain(`${IMAGES_HEADER}: true`);
    expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining(["400", "413", "422"]));
  });
});

/** The parts of a JSON Schema these checks read. */
interface JsonSchema {
  properties?: Record<string, JsonSchema>;
  additionalProperties?: JsonSchema;
  oneOf?: JsonSchema[];
  required?: string[];
  const?: string;
  enum?: string[];
}

function catchError(run: () => void): AppError {
  try {
    run();
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}
