import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import request from "supertest";
import { embeddedBackend } from "../../src/backend";
import { DEMO_FILE, DEMO_LABEL } from "../../src/engine/demo/demo-model";
import { EmbeddedUpstream } from "../../src/engine/embedded-upstream";
import { parseModelSource } from "../../src/engine/model-source";
import { capturingLogger, deciderOver } from "../helpers";
import { DeciderProcess } from "../shared/processes";

/**
 * LOCALDECIDER_MODEL=demo: the tests' tiny model (random weights, the real tokenizer), written into the models
 * directory at start and run by the embedded engine, labelled wherever the model is named; the whole API works
 * on it. The built service too, as `LOCALDECIDER_MODEL=demo pnpm start` runs it.
 */

jest.setTimeout(120_000);

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "decider-demo-"));
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const QUESTIONS = {
  urgent: { type: "noul", instructions: "Is this urgent?" },
  topic: { type: "choice", instructions: "What is it about?", criteria: { billing: null, shipping: null } },
  effort: { type: "score", instructions: "How much work is it?", criteria: ["low", "medium", "high"] },
};

function demoEngine(logger = capturingLogger("info")) {
  return new EmbeddedUpstream({
    source: parseModelSource("demo"),
    modelsDir: dir,
    sha256: undefined,
    engine: { gpu: "cpu", sequences: 1, contextSize: 2048, threads: 1 },
    logger: logger.logger,
    progressBar: false,
  });
}

describe("LOCALDECIDER_MODEL=demo", () => {
  it("is its own source; a file of that name is ./demo", () => {
    expect(parseModelSource("demo")).toStrictEqual({ kind: "demo" });
    expect(parseModelSource("./demo", "/srv")).toStrictEqual({ kind: "file", path: "/srv/demo" });
  });

  it("writes the demo model, labels it as meaningless wherever the model is named, answers every question type, and keeps the file for the next start unless it changed", async () => {
    const log = capturingLogger("info");
    const embedded = demoEngine(log);
    const d = deciderOver(embeddedBackend(embedded, DEMO_FILE, capturingLogger().logger));
    try {
      await embedded.start();
      expect(embedded.stateText).toBe("ready");
      const file = path.join(dir, "demo", DEMO_FILE);
      expect(fs.existsSync(file)).toBe(true);
      expect(log.lines.find((l) => l.message.startsWith("demo model"))).toMatchObject({
        level: "warn",
        message: "demo model: random weights, its answers are meaningless",
        file,
        written: true,
      });
      const ready = await request(d.app).get("/ready");
      expect(ready.body).toStrictEqual({
        status: "ready",
        upstream: "embedded demo model (random weights: its answers are meaningless)",
        model: "localdecider-demo-random-weights",
        limits: "this process",
      });
      const models = await request(d.app).get("/v1/models");
      expect(models.body.backend).toMatchObject({ kind: "embedded", source: DEMO_LABEL, state: "ready" });
      expect(DEMO_LABEL).toContain("its answers are meaningless");
      expect(models.body.backend.model).toMatchObject({ context_size: 2048, train_context_size: 32768 });
      const res = await request(d.app)
        .post("/v1/systemone")
        .send({ model: "localdecider", state: "A customer asks where the parcel is.", questions: QUESTIONS });
      expect(res.status).toBe(200);
      expect(res.body.model).toBe("localdecider-0.1.0/localdecider-demo-random-weights");
      expect(res.body.answers.urgent.noul).toBeGreaterThan(0);
      expect(res.body.answers.urgent.noul).toBeLessThan(1);
      expect(["billing", "shipping"]).toContain(res.body.answers.topic.choice);
      expect(Object.keys(res.body.answers.effort.probabilities)).toStrictEqual(["0", "1", "2"]);
    } finally {
      await d.close();
      await embedded.close();
    }
    // The next start keeps the file it wrote; one changed since is written again.
    const again = capturingLogger("info");
    const second = demoEngine(again);
    await second.start();
    await second.close();
    expect(again.lines.find((l) => l.message.startsWith("demo model"))).toMatchObject({ written: false });
    fs.appendFileSync(path.join(dir, "demo", DEMO_FILE), "changed");
    const changed = capturingLogger("info");
    const third = demoEngine(changed);
    await third.start();
    expect(third.stateText).toBe("ready");
    await third.close();
    expect(changed.lines.find((l) => l.message.startsWith("demo model"))).toMatchObject({ written: true });
  });

  it("runs in the built service, one variable away, and answers", async () => {
    const decider = await new DeciderProcess({
      LOCALDECIDER_MODEL: "demo",
      LOCALDECIDER_MODELS_DIR: dir,
      LOCALDECIDER_THREADS: "1",
      LOCALDECIDER_CONTEXT_SIZE: "2048",
    }).start();
    try {
      for (let i = 0; i < 1200 && (await fetch(`${decider.url}/ready`)).status !== 200; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const res = await fetch(`${decider.url}/v1/systemone`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "jev-latest", state: "hello", questions: QUESTIONS }),
      });
      expect(res.status).toBe(200);
      expect(decider.lines).toContainEqual(
        expect.objectContaining({ level: "warn", message: "demo model: random weights, its answers are meaningless" }),
      );
    } finally {
      await decider.stop();
    }
  });
});
