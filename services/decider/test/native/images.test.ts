import { DECIDER_ERROR_STATUS, IMAGES_HEADER } from "@localdecider/contracts/decider";
import { createLogger } from "@localdecider/service-kit";
import request from "supertest";
import { serversBackend } from "../../src/backend";
import { FakeSystemOne } from "../fake-systemone/server";
import { FakeUpstream } from "../fake-upstream/server";
import { type DeciderUnderTest, deciderFor, deciderOver, modelServer } from "../helpers";
import { type NativeHarness, nativeHarness } from "./harness";

/** A 1×1 PNG (its signature first), standard base64. */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";
const photo = { type: "image", format: "png", data_base64: PNG };

const withImage = {
  model: "localdecider",
  state: "A kitchen, shown in `photo`.",
  assets: { photo },
};

/**
 * Jev 1.14's images (`assets`, opted into with TypeSafe-Danger-Zone-Images) and `box` questions, passed on to a
 * model server that answers System One itself, and to such a server only.
 */
describe("images and box questions through a native System One server", () => {
  let h: NativeHarness;
  afterEach(async () => {
    await h.close();
  });

  const post = (body: Record<string, unknown>) =>
    request(h.app).post("/v1/systemone").set(IMAGES_HEADER, "true").send(body);

  it("passes the assets and the opt-in header on with every call, and on llama.cpp the images as data URLs too", async () => {
    h = await nativeHarness({ questionsPerCall: 1, setup: (fake) => (fake.vision = true) });
    const res = await post({
      ...withImage,
      questions: {
        mug: { type: "noul", instructions: "Is there a mug in `photo`?" },
        colour: { type: "choice", instructions: "Its colour?", criteria: { red: null, blue: null } },
      },
    });
    expect(res.status).toBe(200);
    expect(h.fake.requests).toHaveLength(2);
    for (const [i, sent] of h.fake.requests.entries()) {
      expect(sent.assets).toStrictEqual({ photo });
      expect(sent.images).toStrictEqual([`data:image/png;base64,${PNG}`]);
      expect(h.fake.headers[i]?.["typesafe-danger-zone-images"]).toBe("true");
    }
    expect(res.body.answers.mug.noul).toBe(h.fake.reported[0]?.probabilities.true);
  });

  it.each([false, true])(
    "answers a box question with the server's edges and confidence as they are (edges nested: %s)",
    async (nested) => {
      h = await nativeHarness({
        setup: (fake) => {
          fake.boxes = true;
          fake.vision = true;
          fake.box = { top: 0.1, bottom: 0.45, left: 0.3, right: 0.9, confidence: 0.7, nested };
        },
      });
      const res = await post({
        ...withImage,
        questions: {
          where: { type: "box", instructions: "the mug in `photo`" },
          mug: { type: "noul", instructions: "Is there a mug in `photo`?" },
        },
      });
      expect(res.status).toBe(200);
      expect(res.body.answers.where).toStrictEqual({
        type: "box",
        box: { top: 0.1, bottom: 0.45, left: 0.3, right: 0.9 },
        confidence: 0.7,
      });
      expect((h.fake.requests[0]?.questions as Record<string, unknown> | undefined)?.where).toStrictEqual({
        type: "box",
        instructions: "the mug in `photo`",
      });
    },
  );

  it("a malformed box answer is asked again", async () => {
    h = await nativeHarness({
      setup: (fake) => {
        fake.boxes = true;
        fake.vision = true;
      },
    });
    h.fake.faults = ["notNumber"];
    const res = await post({ ...withImage, questions: { where: { type: "box", instructions: "the mug in `photo`" } } });
    expect(res.status).toBe(200);
    expect(h.observer.retries).toBe(1);
    expect(res.body.answers.where.confidence).toBe(0.875);
  });

  it("a server whose model takes no images (501) or knows no box question (422): the client's 4xx, with its reason", async () => {
    h = await nativeHarness();
    const images = await post({ ...withImage, questions: { mug: { type: "noul", instructions: "A mug?" } } });
    expect(images.status).toBe(DECIDER_ERROR_STATUS.invalid_request);
    expect(images.body).toStrictEqual({
      error: "the model server refused the request: This model does not support image input",
      code: "invalid_request",
    });
    h.fake.vision = true;
    const box = await post({ ...withImage, questions: { where: { type: "box", instructions: "the mug in `photo`" } } });
    expect(box.status).toBe(DECIDER_ERROR_STATUS.invalid_request);
    expect(box.body).toStrictEqual({
      error: 'the model server refused the request: questions.where: "type" must be one of: choice, score, noul',
      code: "invalid_request",
    });
  });

  it("a 501 to a call with a box question but no assets is that request's refusal, never the server's model changing", async () => {
    h = await nativeHarness({ setup: (fake) => (fake.boxes = true) });
    const modelLists = () => h.fake.paths.filter((p) => p === "/v1/models").length;
    const before = modelLists();
    // The server refuses the call as it refuses images a model cannot take (501), here for the box question.
    h.fake.faults = ["notDecision"];
    const box = await post({
      model: "localdecider",
      state: "A kitchen.",
      questions: { where: { type: "box", instructions: "the mug" } },
    });
    expect(box.status).toBe(DECIDER_ERROR_STATUS.invalid_request);
    expect(box.body.code).toBe("invalid_request");
    // Not taken for a model that stopped being a decision model: no check of the server again, still native.
    expect(modelLists()).toBe(before);
    const ready = await request(h.app).get("/ready");
    expect(ready.status).toBe(200);
    expect(ready.body.protocol).toBe("systemone");
  });
});

describe("images and box questions without a native server", () => {
  let d: DeciderUnderTest;
  const stops: (() => Promise<void>)[] = [];
  afterEach(async () => {
    await d.close();
    for (const stop of stops.splice(0)) await stop();
  });

  it("are refused before any call when every model server takes the chat path", async () => {
    const chat = new FakeUpstream({ flavour: "llama" });
    const url = await chat.start();
    stops.push(() => chat.stop());
    d = deciderFor(url);
    const res = await request(d.app)
      .post("/v1/systemone")
      .set(IMAGES_HEADER, "true")
      .send({ ...withImage, questions: { where: { type: "box", instructions: "the mug in `photo`" } } });
    // Before the server was checked the door lets the request in; once it is known to chat, it is refused, with
    // the text the door gives.
    expect(res.status).toBe(DECIDER_ERROR_STATUS.images_unsupported);
    expect(res.body).toStrictEqual({
      error:
        "images and box questions need a native System One upstream; this decider runs a chat model server (OpenAI-compatible, answers read from token logprobs)",
      code: "images_unsupported",
    });
    expect(chat.calls).toBe(0);
    // Asked again, the door itself refuses it.
    const again = await request(d.app)
      .post("/v1/systemone")
      .set(IMAGES_HEADER, "true")
      .send({ ...withImage, questions: { where: { type: "box", instructions: "the mug in `photo`" } } });
    expect(again.body.code).toBe("images_unsupported");
    expect(chat.calls).toBe(0);
  });

  it("go to the native server of a pool that also holds a chat server, however the load falls", async () => {
    const chat = new FakeUpstream({ flavour: "llama" });
    const native = new FakeSystemOne();
    native.vision = true;
    const urls = [await chat.start(), await native.start()];
    stops.push(
      () => chat.stop(),
      () => native.stop(),
    );
    const logger = createLogger({ service: "decider-test", level: "silent" });
    d = deciderOver(
      serversBackend(
        urls.map((url) => modelServer(url, { logger })),
        "test-model",
        logger,
      ),
      { logger },
    );
    const ready = await request(d.app).get("/ready").expect(200);
    expect(ready.body.servers.map((s: { protocol: string }) => s.protocol)).toStrictEqual(["chat", "systemone"]);
    const res = await request(d.app)
      .post("/v1/systemone")
      .set(IMAGES_HEADER, "true")
      .send({ ...withImage, questions: { mug: { type: "noul", instructions: "A mug in `photo`?" } } });
    expect(res.status).toBe(200);
    expect(native.calls).toBe(1);
    expect(chat.calls).toBe(0);
  });
});
