import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { IMAGES_HEADER, type TextQuestion } from "@localdecider/contracts/decider";
import { serve } from "@localdecider/service-kit";
import request from "supertest";
import { embeddedBackend } from "../../src/backend";
import { EmbeddedUpstream } from "../../src/engine/embedded-upstream";
import { LlamaEngine } from "../../src/engine/llama-engine";
import type { ProbeOptions, ProbeRequest, ProbeResult, Upstream } from "../../src/upstream/types";
import { ANSWER_MODEL } from "../engine/answer-model";
import { openEngine, type TinyEngine } from "../engine/engine";
import { renderChatML } from "../engine/engine-upstream";
import { chooser, probedName, QUESTIONS, RecordingUpstream, STATE } from "../engine/expectations";
import { THINKING_TEMPLATE, tinyModelPath } from "../engine/tiny-model";
import { capturingLogger, type DeciderUnderTest, deciderOver, waitFor } from "../helpers";
import { PNG_ASSET } from "../image-assets";
import { distributionOf, exactDistribution } from "./exact";

/** The embedded upstream with its calls recorded: each probeMany call's probes, and every probe. */
class RecordingMany implements Upstream {
  calls: ProbeRequest[][] = [];
  readonly probes: ProbeRequest[] = [];
  /** Called as each call begins, before the engine sees it. */
  onCall: () => void = () => undefined;
  constructor(private readonly inner: EmbeddedUpstream) {}
  get outcomesPerPart(): number {
    return this.inner.outcomesPerPart;
  }
  get prefixCache(): Upstream["prefixCache"] {
    return this.inner.prefixCache;
  }
  probe(request: ProbeRequest, options: ProbeOptions): Promise<ProbeResult> {
    this.record([request]);
    return this.inner.probe(request, options);
  }
  probeMany(requests: readonly ProbeRequest[], options: ProbeOptions): Promise<ProbeResult[]> {
    this.record(requests);
    return this.inner.probeMany(requests, options);
  }
  private record(requests: readonly ProbeRequest[]): void {
    this.calls.push([...requests]);
    this.probes.push(...requests);
    this.onCall();
  }
}

/**
 * The embedded engine (node-llama-cpp in this process, no model server) behind the real app, over the
 * tiny GGUF the tests write. The expected answers come from the engine's own full distribution, computed
 * independently (exact.ts).
 */

// Loading a model and reading the whole vocabulary's distribution take seconds.
jest.setTimeout(120_000);

const SAME = 1e-6;
const CONTEXT = 8192;

describe("the embedded engine", () => {
  let engine: TinyEngine;
  let embedded: EmbeddedUpstream;
  let recorder: RecordingUpstream;
  let d: DeciderUnderTest;
  const modelFile = tinyModelPath(ANSWER_MODEL);

  beforeAll(async () => {
    // A 255-label choice is one prompt of ~4,000 tokens here: more than the tiny model's trained 4,096 with the state.
    engine = await openEngine(modelFile, { contextSize: CONTEXT });
    embedded = new EmbeddedUpstream({
      source: { kind: "file", path: modelFile },
      modelsDir: path.join(os.tmpdir(), "unused"),
      sha256: undefined,
      engine: { gpu: "cpu", sequences: 2, contextSize: CONTEXT, threads: 1 },
      logger: capturingLogger().logger,
    });
    await embedded.start();
    recorder = new RecordingUpstream(embedded);
    d = deciderOver(embeddedBackend(embedded, modelFile, capturingLogger().logger, recorder), { maxInflight: 2 });
  }, 120_000);

  afterAll(async () => {
    await d?.close();
    await embedded?.close();
    await engine?.close();
  });

  beforeEach(() => {
    recorder.probes = [];
  });

  const decide = (app: DeciderUnderTest["app"], questions: Record<string, TextQuestion>) =>
    request(app).post("/v1/systemone").send({ model: "localdecider", state: STATE, questions });

  /** Every probe of the last request against the engine's exact distribution for it. */
  async function expectExact(
    questions: Record<string, TextQuestion>,
    answers: Record<string, Record<string, unknown>>,
  ) {
    for (const probe of recorder.probes) {
      const name = probedName(probe);
      const question = questions[name] as TextQuestion;
      const got = distributionOf(question, answers[name] as Record<string, unknown>);
      const want = await exactDistribution(engine, probe);
      expect(got).toHaveLength(want.length);
      for (const [i, p] of want.entries()) expect(Math.abs((got[i] as number) - p)).toBeLessThan(SAME);
    }
  }

  it("renders the prompt with the model's own template, token for token as llama-server does", () => {
    const probe = {
      messages: [
        { role: "system" as const, content: "S" },
        { role: "user" as const, content: "U" },
      ],
    };
    const messages = [...probe.messages, { role: "assistant" as const, content: '{"q1":' }];
    const ready = embedded.current;
    if (ready.phase !== "ready") throw new Error("not loaded");
    expect(ready.engine.tokenize(messages, " true")).toStrictEqual(engine.tokenize(`${renderChatML(messages)} true`));
  });

  it("with a template that thinks, writes the think block closed before the prefill, as llama-server does", async () => {
    const file = tinyModelPath({ ...ANSWER_MODEL, chatTemplate: THINKING_TEMPLATE });
    const thinking = await LlamaEngine.open({
      modelPath: file,
      gpu: "cpu",
      sequences: 1,
      contextSize: 512,
      threads: 1,
    });
    try {
      const messages = [
        { role: "system" as const, content: "S" },
        { role: "user" as const, content: "U" },
        { role: "assistant" as const, content: '{"q1":' },
      ];
      // What llama-server b10573 renders for these messages (checked in deployed.llama-server.test.ts).
      const prompt =
        '<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n{"q1":';
      expect(thinking.tokenize(messages, " true")).toStrictEqual(engine.tokenize(`${prompt} true`));
    } finally {
      await thinking.close();
    }
  });

  it("answers every question type with the engine's exact distribution over the outcomes, within 1e-6", async () => {
    const res = await decide(d.app, QUESTIONS);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body.answers).sort()).toStrictEqual(Object.keys(QUESTIONS).sort());
    // One probe per question: no chunks, no final rounds.
    expect(recorder.probes).toHaveLength(Object.keys(QUESTIONS).length);
    await expectExact(QUESTIONS, res.body.answers);
  });

  it("answers a 255-label choice in one probe, two-letter codes scored as the product of their tokens' probabilities", async () => {
    const labels = Array.from({ length: 255 }, (_, i) => `label-${i}`);
    const questions = { big: chooser(labels) };
    const res = await decide(d.app, questions);
    expect(res.body.error).toBeUndefined();
    expect(res.status).toBe(200);
    expect(recorder.probes).toHaveLength(1);
    expect((recorder.probes[0] as ProbeRequest).continuations.slice(0, 3)).toStrictEqual(["AA", "AB", "AC"]);
    const probabilities = Object.values(res.body.answers.big.probabilities as Record<string, number>);
    expect(probabilities).toHaveLength(255);
    await expectExact(questions, res.body.answers);
  });

  it("runs a request's calls in one sequence, evaluating the shared prompt once; two requests at once use both sequences", async () => {
    const sixteen = (prefix: string) =>
      Object.fromEntries(
        Array.from({ length: 16 }, (_, i) => [
          `${prefix}${i}`,
          { type: "noul", instructions: `Is ${i} odd?` } as TextQuestion,
        ]),
      );
    const res = await decide(d.app, sixteen("q"));
    expect(res.status).toBe(200);
    // One request holds one slot: its calls ran one at a time in the sequence of that slot.
    expect(embedded.sequencesBusy).toMatchObject({ now: 0, peak: 1, waits: 0 });
    // 16 probes of one prompt: the prompt is evaluated once, then a few tokens per probe.
    const promptTokens = engine.tokenize(renderChatML((recorder.probes[0] as ProbeRequest).messages)).length;
    expect(res.body.usage.input_tokens).toBeLessThan(promptTokens + 16 * 20);
    // The engine generates no token: it reads the outcomes' probabilities (usage.output_tokens, README "API").
    expect(res.body.usage.output_tokens).toBe(0);
    expect(new Set(recorder.probes.map((p) => recorder.slots.get(p)))).toStrictEqual(new Set([0]));
    // The limiter admits 2 requests at once and the context has 2 sequences: both are used, no call waits.
    const both = await Promise.all([decide(d.app, sixteen("a")), decide(d.app, sixteen("b"))]);
    expect(both.map((r) => r.status)).toStrictEqual([200, 200]);
    expect(embedded.sequencesBusy).toMatchObject({ now: 0, peak: 2, waits: 0 });
  });

  it("stops a request's remaining calls when its client disconnects", async () => {
    const client = new AbortController();
    let started = 0;
    let finished = 0;
    const cancelling: Upstream = {
      outcomesPerPart: embedded.outcomesPerPart,
      prefixCache: embedded.prefixCache,
      async probe(probe: ProbeRequest, options: ProbeOptions): Promise<ProbeResult> {
        started += 1;
        try {
          return await embedded.probe(probe, options);
        } finally {
          finished += 1;
          if (finished === 1) client.abort();
        }
      },
    };
    const d2 = deciderOver(embeddedBackend(embedded, modelFile, capturingLogger().logger, cancelling), {
      maxInflight: 2,
    });
    const running = await serve(d2.app, { host: "127.0.0.1", port: 0, logger: d2.logger, drainTimeoutMs: 1000 });
    try {
      const questions = Object.fromEntries(
        Array.from({ length: 40 }, (_, i) => [`q${i}`, { type: "noul", instructions: "Is it?" } as TextQuestion]),
      );
      const sent = await fetch(`http://127.0.0.1:${running.port}/v1/systemone`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "localdecider", state: STATE, questions }),
        signal: client.signal,
      }).catch((err: unknown) => err);
      expect(String(sent)).toContain("AbortError");
      await waitFor(() => started === finished && embedded.sequencesBusy?.now === 0, "the calls to settle");
      expect(started).toBeLessThan(40);
    } finally {
      await running.close();
      await d2.close();
    }
  });

  it("refuses images and box questions, opted in, with 422 images_unsupported naming the embedded engine", async () => {
    const res = await request(d.app)
      .post("/v1/systemone")
      .set(IMAGES_HEADER, "true")
      .send({
        model: "localdecider",
        state: "`photo`",
        questions: { mug: { type: "box", instructions: "the mug in `photo`" } },
        assets: { photo: PNG_ASSET },
      });
    expect(res.status).toBe(422);
    expect(res.body).toStrictEqual({
      error:
        "images and box questions need a native System One upstream; this decider runs the embedded engine (node-llama-cpp)",
      code: "images_unsupported",
    });
    expect(recorder.probes).toStrictEqual([]);
  });

  it("answers 400 context_too_long for a prompt longer than a sequence's context, and stays usable", async () => {
    const res = await request(d.app)
      .post("/v1/systemone")
      .send({
        model: "localdecider",
        state: "word ".repeat(CONTEXT + 100),
        questions: { a: { type: "noul", instructions: "Is it?" } },
      });
    expect(res.status).toBe(400);
    expect(res.body).toStrictEqual({
      error:
        "the request does not fit the model's context: send a shorter state, or fewer questions per prompt (LOCALDECIDER_QUESTIONS_PER_CALL), or give the model a larger context (the embedded engine: LOCALDECIDER_CONTEXT_SIZE)",
      code: "context_too_long",
    });
    expect((await decide(d.app, { a: { type: "noul", instructions: "Is it?" } })).status).toBe(200);
  });

  it("on the default context (auto: the model's, at most 8192), answers a 255-label choice with a short description per label", async () => {
    // A model trained on long contexts, as Qwen2.5 (32,768): `auto` gives each sequence 8192 tokens.
    const longFile = tinyModelPath({ ...ANSWER_MODEL, contextLength: 32768 });
    const long = new EmbeddedUpstream({
      source: { kind: "file", path: longFile },
      modelsDir: path.join(os.tmpdir(), "unused"),
      sha256: undefined,
      engine: { gpu: "cpu", sequences: 2, contextSize: "auto", threads: 1 },
      logger: capturingLogger().logger,
    });
    await long.start();
    const backend = embeddedBackend(long, longFile, capturingLogger().logger);
    const onDefaults = deciderOver(backend, { maxInflight: 2 });
    try {
      expect(long.info?.contextSize).toBe(8192);
      const labels = Array.from({ length: 255 }, (_, i) => `label-${i}`);
      const res = await decide(onDefaults.app, { big: chooser(labels) });
      expect(res.body.error).toBeUndefined();
      expect(res.status).toBe(200);
      expect(Object.keys(res.body.answers.big.probabilities)).toHaveLength(255);
    } finally {
      await onDefaults.close();
      await long.close();
    }
  });

  it("answers a prompt's questions in one batched call (probeMany), each with the engine's exact distribution", async () => {
    const many = new RecordingMany(embedded);
    const batched = deciderOver(embeddedBackend(embedded, modelFile, capturingLogger().logger, many), {
      maxInflight: 2,
    });
    try {
      const questions: Record<string, TextQuestion> = {
        ...QUESTIONS,
        ...Object.fromEntries(
          Array.from({ length: 14 }, (_, i) => [`extra${i}`, { type: "noul", instructions: "Is it?" } as TextQuestion]),
        ),
      };
      const count = Object.keys(questions).length;
      const res = await decide(batched.app, questions);
      expect(res.status).toBe(200);
      // Two prompts (16 questions per prompt), each read in one call holding all of its probes.
      expect(many.calls.map((c) => c.length)).toStrictEqual([16, count - 16]);
      recorder.probes = many.probes;
      await expectExact(questions, res.body.answers);
      // Each prompt is evaluated once (the second after the part it shares with the first: the task and the
      // state), then a few tokens per probe.
      const [first, second] = many.calls.map((c) => engine.tokenize(renderChatML((c[0] as ProbeRequest).messages))) as [
        number[],
        number[],
      ];
      let shared = 0;
      while (first[shared] === second[shared]) shared++;
      expect(shared).toBeGreaterThan(100);
      expect(res.body.usage.input_tokens).toBeLessThan(first.length + second.length - shared + count * 5);
    } finally {
      await batched.close();
    }
  });

  it("refuses a 200 KB state with 255 labels (400 context_too_long) after counting a few pieces, while /health is answered", async () => {
    const many = new RecordingMany(embedded);
    const held = deciderOver(embeddedBackend(embedded, modelFile, capturingLogger().logger, many), { maxInflight: 2 });
    // Which responses the server ended, in order.
    const ended: string[] = [];
    const server = http.createServer((req, res) => {
      const end = res.end.bind(res) as (...args: unknown[]) => http.ServerResponse;
      res.end = ((...args: unknown[]) => {
        ended.push(req.url ?? "");
        return end(...args);
      }) as typeof res.end;
      held.app(req, res);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as net.AddressInfo;
    // A connection ready beforehand, so that /health is one write away when the decision reaches the engine.
    const health = net.connect(port, "127.0.0.1");
    await new Promise((resolve) => health.once("connect", resolve));
    const healthAnswer = new Promise<string>((resolve) => {
      let text = "";
      health.on("data", (chunk: Buffer) => {
        text += chunk.toString("utf8");
        if (text.includes("\r\n\r\n")) resolve(text);
      });
    });
    many.onCall = () => {
      health.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    };
    try {
      const words = Array.from({ length: 42_000 }, (_, i) => `w${i % 997}`).join(" "); // ~205 KB
      expect(words.length).toBeGreaterThan(200_000);
      const labels = Array.from({ length: 255 }, (_, i) => `label-${i}`);
      const res = await fetch(`http://127.0.0.1:${port}/v1/systemone`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "localdecider", state: { diff: words }, questions: { big: chooser(labels) } }),
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { code: string }).code).toBe("context_too_long");
      expect(await healthAnswer).toMatch(/^HTTP\/1\.1 200/);
      // /health was sent once the decision had reached the engine, and answered before the decision was.
      expect(many.calls).toHaveLength(1);
      expect(ended).toStrictEqual(["/health", "/v1/systemone"]);
    } finally {
      health.destroy();
      await new Promise((resolve) => server.close(resolve));
      await held.close();
    }
  });

  it("describes the loaded model at GET /v1/models", async () => {
    const res = await request(d.app).get("/v1/models");
    expect(res.status).toBe(200);
    expect(res.body.backend).toStrictEqual({
      kind: "embedded",
      source: modelFile,
      state: "ready",
      phase: "ready",
      gpu: "cpu",
      model: {
        file: path.basename(modelFile),
        architecture: "qwen2",
        quantization: "F16",
        size_bytes: expect.any(Number),
        context_size: CONTEXT,
        sequences: 2,
        train_context_size: 4096,
      },
    });
    const ready = await request(d.app).get("/ready");
    expect(ready.body).toStrictEqual({
      status: "ready",
      upstream: "embedded",
      model: path.basename(modelFile, ".gguf"),
      limits: "this process",
    });
  });
});
