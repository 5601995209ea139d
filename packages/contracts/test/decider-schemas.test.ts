import { ImageAsset, Instructions, SystemOneRequest } from "../src/decider";

/** A 1×1 PNG file's base64. */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const photo = { type: "image", format: "png", data_base64: PNG } as const;

const issues = (result: { success: boolean; error?: { issues: { path: PropertyKey[]; message: string }[] } }) =>
  result.error?.issues.map((i) => [i.path.join("."), i.message]) ?? [];

describe("Instructions", () => {
  it.each([["Is it?"], [{ ask: "Is it?" }], [["Is it?"]]])("accepts %j", (value) => {
    expect(Instructions.parse(value)).toStrictEqual(value);
  });

  it.each([
    [undefined, "instructions are required: the question put to the model, as text (or a JSON object or array)"],
    [null, "instructions are required: the question put to the model, as text (or a JSON object or array)"],
    [7, "instructions must be text, a JSON object or a JSON array"],
    ["", "instructions must not be empty"],
    ["  \n", "instructions must not be empty"],
    [{}, "instructions must not be empty"],
    [[], "instructions must not be empty"],
  ])("refuses %j", (value, message) => {
    expect(issues(Instructions.safeParse(value))).toStrictEqual([["", message]]);
  });
});

describe("SystemOneRequest's assets", () => {
  const request = (state: unknown, question: Record<string, unknown>, assets: Record<string, unknown>) => ({
    model: "jev",
    state,
    questions: { q: { type: "choice", instructions: "Which?", ...question } },
    assets,
  });

  it.each([
    ["the state's text", request("see photo", { criteria: { a: null } }, { photo })],
    ["a key of the state", request({ photo: "kitchen" }, { criteria: { a: null } }, { photo })],
    ["the instructions, as JSON", request(null, { instructions: { in: ["photo"] }, criteria: { a: null } }, { photo })],
    ["a label", request(null, { criteria: { "like photo": null } }, { photo })],
    ["a description", request(null, { criteria: { a: { looks: "like photo" } } }, { photo })],
  ])("takes an asset named in %s", (_where, body) => {
    expect(SystemOneRequest.safeParse(body).success).toBe(true);
  });

  it("refuses each asset no text names, by its path", () => {
    const body = request("photo", { criteria: { a: null } }, { photo, spare: photo, other: photo });
    expect(issues(SystemOneRequest.safeParse(body))).toStrictEqual([
      [
        "assets.spare",
        'asset "spare" is not referenced: name it in the state, an instructions or a criteria text, or leave it out',
      ],
      [
        "assets.other",
        'asset "other" is not referenced: name it in the state, an instructions or a criteria text, or leave it out',
      ],
    ]);
  });
});

describe("ImageAsset", () => {
  it("takes a PNG labelled png, and refuses it labelled jpg", () => {
    expect(ImageAsset.parse(photo)).toStrictEqual(photo);
    expect(issues(ImageAsset.safeParse({ ...photo, format: "jpg" }))).toStrictEqual([
      [
        "data_base64",
        `the file is not a JPEG image (its first bytes are not JPEG's signature) although format is "jpg"`,
      ],
    ]);
  });

  it("refuses base64 with a data: prefix, unpadded, or empty, and a type other than image", () => {
    const base64 = "data_base64 must be standard base64 (A-Z, a-z, 0-9, + and /, padded with =) without a data: prefix";
    expect(issues(ImageAsset.safeParse({ ...photo, data_base64: `data:image/png;base64,${PNG}` }))).toStrictEqual([
      ["data_base64", base64],
    ]);
    expect(issues(ImageAsset.safeParse({ ...photo, data_base64: PNG.replace(/=+$/, "") }))).toStrictEqual([
      ["data_base64", base64],
    ]);
    expect(issues(ImageAsset.safeParse({ ...photo, data_base64: "" }))).toStrictEqual([
      ["data_base64", "data_base64 must hold the image file"],
    ]);
    expect(issues(ImageAsset.safeParse({ ...photo, type: "video" }))).toStrictEqual([
      ["type", 'Invalid input: expected "image"'],
    ]);
  });
});
