import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { streamHugeAnswer } from "../huge-body";
import { closeAbruptly, listenOnLoopback } from "../loopback-server";

/**
 * A fake native System One server on a real port: llama.cpp's `llama-server` serving a decision model, as its
 * published contract describes it (read 2026-11, facts only, none of its code):
 *
 * - [README] ggml-org/llama.cpp `tools/server/README.md`, "POST /v1/systemone" and "GET /models";
 * - [TESTS] `tools/server/tests/unit/test_systemone.py` (ERROR_CONTRACT, ANSWER_KEYS, the 413 and 429 gates);
 * - [SOURCE] `tools/server/server-decision.cpp` (parse_questions, parse_state: the validation messages).
 *
 * Ollama's flavour (0.35+, per the project's SYSTEMONE.md notes) publishes `decision` in `POST /api/show` capabilities
 * instead, and a `silent` server publishes nothing (only the probe tells). Each behaviour below names its source.
 *
 * vLLM's flavour (0.32's `/v1/systemone`, vllm/entrypoints/generate/structured_decisions/, per the project's
 * DECISIONS.md notes) [VLLM]: options labelled A–Z, so 26 per question, 10 levels, 64 questions; every fault
 * of a body is a 400 in its OpenAI-style envelope `{"error":{"message","type":"BadRequestError","param","code"}}`,
 * the too-many-options text worded two ways across versions ("… at most 26 options for this model", earlier
 * "… alternatives …"); unknown question fields are refused; answers carry `id`, `object`, `created` and
 * `diagnostics`, a noul answer `probabilities {yes, no}` and `confidence` too; its /v1/models has no
 * `architecture` (owned_by `vllm`).
 */
export type SystemOneFlavour = "llama" | "ollama" | "silent" | "vllm";

/** [VLLM] the two wordings of its too-many-options refusal. */
export type VllmWording = "options" | "alternatives";

/** Faults applied to the next calls of POST /v1/systemone, one each, in order. */
export type SystemOneFault =
  | "http500"
  /** Never answers (until the client goes away). */
  | "hang"
  /** Cuts the connection without an answer. */
  | "drop"
  /** 429 rate_limit_error with Retry-After (the decision queue full). */
  | "busy"
  /** 413 request_too_large_error (the prompt-token budget). */
  | "tooLarge"
  /** 501 not_supported_error: not a decision model. */
  | "notDecision"
  /** A 200 whose answers lack the first question. */
  | "missingAnswer"
  /** A 200 whose first choice or score names a label that was not asked (beside every label asked). */
  | "unknownLabel"
  /** A 200 whose first distribution sums to 0.9. */
  | "badSum"
  /** A 200 whose first probability is a string. */
  | "notNumber"
  /** A 200 whose first answer has another type. */
  | "wrongType"
  /** A 200 whose body is not JSON. */
  | "notJson"
  /** A 200 of `hugeBytes` bytes, streamed (an answer no decision needs: the decider must stop reading it). */
  | "huge"
  /**
   * A 200 whose first answer is `{type: "refusal"}`: how every native adapter reports a question its server
   * declined (a Decisions server's refusal, mapped by its adapter; upstream/types.ts NativeResult).
   */
  | "refusal";

/** One question as the fake read it from a call. */
export interface AskedNativeQuestion {
  key: string;
  type: "noul" | "choice" | "score" | "box";
  /** noul: "true", "false"; choice: its labels; score: "0".."N-1". */
  labels: string[];
  instructions: unknown;
  criteria: unknown;
}

/** Weights per label (normalised by the fake); a script that throws makes the call a 500. */
export type NativeScript = (q: AskedNativeQuestion, body: Record<string, unknown>) => Record<string, number>;

/** A deterministic, uneven default: weight from a hash of question key and label. */
export const hashedNativeScript: NativeScript = (q) =>
  Object.fromEntries(q.labels.map((label) => [label, 1 + (hash(`${q.key}\u0000${label}`) % 97)]));

function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0;
  return h;
}

/** The server's refusal, always in this envelope [TESTS: contract_of; README]: `code` is the HTTP status. */
class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** [SOURCE: DECISION_MAX_IMAGES] */
const MAX_IMAGES = 8;
/** [TESTS: test_systemone_too_many_questions_is_413] more than this many questions is a 413. */
const MAX_QUESTIONS = 4096;

export class FakeSystemOne {
  flavour: SystemOneFlavour;
  /** Decision models it serves; the first is the one loaded in single-model mode. */
  models: string[];
  /** Models it lists that are not decision models (router mode beside decision ones). */
  chatModels: string[] = [];
  /**
   * Router mode [README: "Routing requests"]: `model` picks the model and an unlisted one is refused; in
   * single-model mode `model` is ignored and the answer names the loaded model [TESTS: test_systemone_model_field].
   */
  router = false;
  /** false: the loaded model is not a decision model, so every call is a 501 [TESTS: not_a_decision_model_is_501]. */
  decision = true;
  /** Takes images (a multimodal projector loaded) [README: "Image input"]. */
  vision = false;
  /**
   * Answers Jev 1.14's `box` questions (a hosted Jev, or a server that has them); llama.cpp's own validation
   * knows choice, score and noul only [SOURCE: parse_questions], so it refuses one with 422.
   */
  boxes = false;
  /** A box answer's edges and confidence; `nested` puts the edges under `box`, else beside `confidence`. */
  box = { top: 0.125, bottom: 0.625, left: 0.25, right: 0.75, confidence: 0.875, nested: false };
  /**
   * Options per question [README: "52 for openjev, 255 for laya..."]; one more is a 422 naming the number
   * [TESTS: test_systemone_option_limit_is_the_models_own; SOURCE: "too many options (%zu), this model supports at most %zu"].
   */
  optionLimit = 255;
  /**
   * Prompt tokens one call may render (--decision-max-prompt-tokens); past it 413 [TESTS: REFUSAL_MESSAGE]. A
   * question renders its state's tokens and its own (a characters/4 estimate here).
   */
  promptBudget: number | undefined;
  /** Decision tasks (questions) queued or running at once (--decision-max-queued); past it 429 [TESTS]. */
  maxQueued: number | undefined;
  /** The Retry-After of a 429 [SYSTEMONE.md: "429 rate_limit_error, with Retry-After: 1"]. */
  retryAfter = "1";
  /** Adds fields no client asked for (top level and in each answer): the decider must not pass them on. */
  extraFields = false;
  /** vLLM's flavour: how its too-many-options refusal is worded [VLLM]. */
  vllmWording: VllmWording = "options";
  /**
   * Questions it refuses with 422, the message naming each as llama.cpp's validation messages do
   * (`questions.<id>: …` [SOURCE: parse_questions]): the client's own text comes back in the server's.
   */
  refused = new Set<string>();
  script: NativeScript = hashedNativeScript;
  faults: SystemOneFault[] = [];
  /** While true, calls wait until release() (or until the client goes away). */
  holding = false;
  /** The size of a `huge` answer. */
  hugeBytes = 64 * 1024 * 1024;
  /** Bytes each `huge` answer got to write before its client closed the connection (or all of them). */
  hugeWritten: number[] = [];
  /** Milliseconds each call takes before it answers (benchmarks). */
  latencyMs = 0;

  /** Bodies of the POST /v1/systemone calls answered (any status), in arrival order. */
  requests: Record<string, unknown>[] = [];
  /** Headers of those calls. */
  headers: Record<string, string | string[] | undefined>[] = [];
  calls = 0;
  inflight = 0;
  maxInflight = 0;
  aborted = 0;
  /** The distributions answered, per question key (what the decider must return exactly without calibration). */
  reported: { key: string; probabilities: Record<string, number> }[] = [];
  /** Every path asked, in order (GET /v1/models, POST /api/show...). */
  paths: string[] = [];
  /** The decider's start-up probes answered (not in `calls`, `requests` or the faults). */
  probes = 0;

  private server: Server | undefined;
  private waiters: (() => void)[] = [];
  private queued = 0;

  constructor(options: { flavour?: SystemOneFlavour; models?: string[] } = {}) {
    this.flavour = options.flavour ?? "llama";
    this.models = options.models ?? ["test-model"];
    // [VLLM] labels A–Z.
    if (this.flavour === "vllm") this.optionLimit = 26;
  }

  async start(port = 0): Promise<string> {
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) send(res, 500, { error: { code: 500, message: String(err), type: "server_error" } });
      });
    });
    return `http://127.0.0.1:${await listenOnLoopback(this.server, port)}`;
  }

  async stop(): Promise<void> {
    this.release();
    await closeAbruptly(this.server);
  }

  /** Dies: connections cut, nothing listens until start() again. */
  async crash(): Promise<void> {
    await closeAbruptly(this.server);
  }

  release(): void {
    this.holding = false;
    for (const w of this.waiters.splice(0)) w();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? "";
    this.paths.push(`${req.method} ${url}`);
    const text = await readBody(req);
    if (req.method === "GET" && url === "/v1/models") return send(res, 200, this.modelList());
    if (req.method === "GET" && url === "/props" && this.flavour === "llama") {
      return send(res, 200, { total_slots: 2, build_info: "b11361-fake" });
    }
    if (req.method === "POST" && url === "/api/show" && this.flavour === "ollama") return this.show(res, text);
    if (req.method === "POST" && url === "/v1/systemone") return this.systemOne(req, res, text);
    // [SOURCE, README] a decision model serves this route only ("Chat endpoints refuse decision models").
    return send(res, 404, { error: { code: 404, message: "File Not Found", type: "not_found_error" } });
  }

  /**
   * GET /v1/models. llama.cpp [README, "GET /models"]: each entry's `architecture.output_modalities` holds
   * `"decisions"` for a decision model, `["text"]` otherwise; `input_modalities` adds `image` with a projector.
   * Ollama's OpenAI layer names its own models `owned_by: "library"` and publishes no architecture.
   */
  private modelList(): unknown {
    const all = [
      ...this.models.map((id) => ({ id, decides: this.decision })),
      ...this.chatModels.map((id) => ({ id, decides: false })),
    ];
    if (this.flavour === "ollama") {
      return { object: "list", data: all.map(({ id }) => ({ id, object: "model", created: 0, owned_by: "library" })) };
    }
    if (this.flavour === "vllm") {
      return {
        object: "list",
        data: all.map(({ id }) => ({ id, object: "model", created: 0, owned_by: "vllm", root: id, parent: null })),
      };
    }
    if (this.flavour === "silent") {
      return { object: "list", data: all.map(({ id }) => ({ id, object: "model", created: 0, owned_by: "someone" })) };
    }
    return {
      object: "list",
      data: all.map(({ id, decides }) => ({
        id,
        object: "model",
        created: 0,
        owned_by: "llamacpp",
        architecture: {
          input_modalities: this.vision ? ["text", "image"] : ["text"],
          output_modalities: decides ? ["decisions"] : ["text"],
        },
      })),
    };
  }

  /** Ollama's POST /api/show: `capabilities` lists `decision` for a decision model (SYSTEMONE.md). */
  private show(res: ServerResponse, text: string): void {
    const body = parseJson(text) as { model?: unknown } | undefined;
    const model = String(body?.model ?? "");
    if (this.models.includes(model)) {
      send(res, 200, { capabilities: this.decision ? ["completion", "decision"] : ["completion"] });
    } else if (this.chatModels.includes(model)) {
      send(res, 200, { capabilities: ["completion"] });
    } else {
      send(res, 404, { error: `model '${model}' not found` });
    }
  }

  /** The decider's start-up probe (src/upstream/protocol.ts, PROBE_BODY), told by its state: kept apart from `calls`. */
  static isProbe(body: unknown): boolean {
    return (
      typeof body === "object" &&
      body !== null &&
      (body as { state?: unknown }).state === "This is the decider's start-up check."
    );
  }

  private async systemOne(req: IncomingMessage, res: ServerResponse, text: string): Promise<void> {
    if (FakeSystemOne.isProbe(parseJson(text))) {
      this.probes += 1;
      if (!this.decision) {
        return send(res, 501, {
          error: { code: 501, message: "This model is not a decision model", type: "not_supported_error" },
        });
      }
      const request = parseJson(text) as Record<string, unknown>;
      const questions = parseQuestions(request, this.optionLimit);
      return send(res, 200, {
        model: this.models[0],
        answers: Object.fromEntries(questions.map((q) => [q.key, { type: "noul", noul: 0.5 }])),
        usage: { input_tokens: 20, output_tokens: 0 },
      });
    }
    this.calls += 1;
    this.inflight += 1;
    this.maxInflight = Math.max(this.maxInflight, this.inflight);
    this.headers.push({ ...req.headers });
    let gone = false;
    res.on("close", () => {
      this.inflight -= 1;
      if (!res.writableFinished) {
        gone = true;
        this.aborted += 1;
      }
    });
    const fault = this.faults.shift();
    let tasks = 0;
    try {
      // [TESTS: test_systemone_malformed_body] a body that is not JSON (or none) is a 400 invalid_request_error.
      const body = parseJson(text);
      if (body === undefined || typeof body !== "object" || body === null || Array.isArray(body)) {
        throw new Refusal(400, "invalid_request_error", "Failed to parse the request body as JSON");
      }
      const request = body as Record<string, unknown>;
      this.requests.push(request);
      const model = this.modelOf(request);
      if (fault === "notDecision" || !this.decision) {
        throw new Refusal(501, "not_supported_error", "This model is not a decision model");
      }
      const questions = parseQuestions(request, this.optionLimit, this.boxes, this.vllm());
      const refused = questions.find((q) => this.refused.has(q.key));
      if (refused !== undefined) {
        throw new Refusal(422, "unprocessable_entity_error", `questions.${refused.key}: this model cannot answer it`);
      }
      const images = parseImages(request);
      // [README] "A request with images returns the error 501 if the model does not support image input".
      if (images > 0 && !this.vision) {
        throw new Refusal(501, "not_supported_error", "This model does not support image input");
      }
      this.budget(request, questions, fault);
      // [TESTS: the 429 gate] the cap counts queued decision tasks, one per question; refusals carry Retry-After.
      if (fault === "busy" || (this.maxQueued !== undefined && this.queued + questions.length > this.maxQueued)) {
        throw new Refusal(429, "rate_limit_error", "The server is busy, retry later", {
          "Retry-After": this.retryAfter,
        });
      }
      tasks = questions.length;
      this.queued += tasks;
      if (this.holding || fault === "hang") {
        await new Promise<void>((resolve) => {
          if (fault !== "hang") this.waiters.push(resolve);
          res.on("close", () => resolve());
        });
      }
      if (this.latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, this.latencyMs));
      if (gone) return;
      if (fault === "drop") {
        req.socket.destroy();
        return;
      }
      if (fault === "http500") throw new Refusal(500, "server_error", "internal error");
      if (fault === "huge") {
        this.hugeWritten.push((await streamHugeAnswer(res, this.hugeBytes)).written);
        return;
      }
      if (fault === "notJson") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end("{answers: not json");
        return;
      }
      send(res, 200, this.answer(request, model, questions, fault));
    } catch (err) {
      if (gone) return;
      if (err instanceof Refusal) {
        send(res, ...this.refusalOf(err), err.headers);
        return;
      }
      throw err;
    } finally {
      this.queued -= tasks;
    }
  }

  /** A refusal's status and body: llama.cpp's envelope, or vLLM's, where every fault of a body is a 400 [VLLM]. */
  private refusalOf(err: Refusal): [number, unknown] {
    if (this.flavour !== "vllm")
      return [err.status, { error: { code: err.status, message: err.message, type: err.type } }];
    const status = err.status === 422 ? 400 : err.status;
    const type = status === 400 ? "BadRequestError" : status === 501 ? "NotImplementedError" : "InternalServerError";
    return [status, { error: { message: err.message, type, param: null, code: status } }];
  }

  private vllm(): VllmWording | undefined {
    return this.flavour === "vllm" ? this.vllmWording : undefined;
  }

  /** The model that answers: the loaded one (single-model mode ignores `model`), or the one routed to. */
  private modelOf(request: Record<string, unknown>): string {
    // [TESTS: test_systemone_model_field] a `model` that is not a string is a client error.
    if (request.model !== undefined && typeof request.model !== "string") {
      throw new Refusal(422, "unprocessable_entity_error", '"model" must be a string');
    }
    if (!this.router) return this.models[0] ?? "model";
    const model = String(request.model ?? "");
    if (this.models.includes(model)) return model;
    if (this.chatModels.includes(model)) {
      throw new Refusal(501, "not_supported_error", "This model is not a decision model");
    }
    throw new Refusal(400, "invalid_request_error", `model '${model}' not found`);
  }

  /**
   * [TESTS: the 413 gates] more than 4096 questions names questions; past --decision-max-prompt-tokens the
   * message names what the request renders: `The request renders N prompt tokens, the maximum is B. ...`.
   */
  private budget(
    request: Record<string, unknown>,
    questions: AskedNativeQuestion[],
    fault: SystemOneFault | undefined,
  ): void {
    // [VLLM] 64 questions per call.
    if (this.flavour === "vllm" && questions.length > 64) {
      throw new Refusal(400, "BadRequestError", "questions: at most 64 for this model");
    }
    if (questions.length > MAX_QUESTIONS) {
      throw new Refusal(
        413,
        "request_too_large_error",
        `The request has ${questions.length} questions, the maximum is ${MAX_QUESTIONS}`,
      );
    }
    const total = renderedTokens(request.state, questions);
    if (fault === "tooLarge" || (this.promptBudget !== undefined && total > this.promptBudget)) {
      throw new Refusal(
        413,
        "request_too_large_error",
        `The request renders ${total} prompt tokens, the maximum is ${this.promptBudget ?? 0}. Give a shorter "state", fewer questions, or raise the limit with --decision-max-prompt-tokens`,
      );
    }
  }

  /**
   * The 200 body [README "Response"; TESTS: ANSWER_KEYS, test_systemone_wire_contract]: exactly `model`,
   * `answers`, `usage`; answers in request order, each with exactly its type's keys; `usage` exactly
   * `input_tokens` (the shared prefix once) and `output_tokens` 0 (Ollama's docs show 1).
   */
  private answer(
    request: Record<string, unknown>,
    model: string,
    questions: AskedNativeQuestion[],
    fault: SystemOneFault | undefined,
  ): unknown {
    const answers: Record<string, unknown> = {};
    // A fault spoils the first question it can: an unknown label or a wrong sum needs a choice or a score.
    const spoiled = fault === "unknownLabel" || fault === "badSum" ? questions.findIndex((q) => q.type !== "noul") : 0;
    for (const [i, q] of questions.entries()) {
      if (q.type === "box") {
        const { nested, confidence, ...edges } = this.box;
        const spoil = i === spoiled && fault === "missingAnswer";
        if (!spoil) {
          answers[q.key] = nested
            ? { type: "box", box: edges, confidence: fault === "notNumber" && i === spoiled ? "high" : confidence }
            : { type: "box", ...edges, confidence: fault === "notNumber" && i === spoiled ? "high" : confidence };
        }
        continue;
      }
      const weights = this.script(q, request);
      const total = q.labels.reduce((sum, label) => sum + (weights[label] ?? 0), 0);
      const probabilities = Object.fromEntries(q.labels.map((label) => [label, (weights[label] ?? 0) / total]));
      this.reported.push({ key: q.key, probabilities });
      const first = i === spoiled;
      if (first && fault === "missingAnswer") continue;
      answers[q.key] = this.answerOf(q, probabilities, first ? fault : undefined);
    }
    const usage = {
      input_tokens: renderedTokens(request.state, questions, true),
      output_tokens: this.flavour === "ollama" ? 1 : 0,
    };
    if (this.flavour === "vllm") {
      // [VLLM] its extra response fields.
      const diagnostics = Object.fromEntries(
        questions.map((q) => [q.key, { label_mass: 0.97, argmax_is_label: true }]),
      );
      return {
        id: `decision-${this.calls}`,
        object: "structured_decision",
        created: 1_764_000_000,
        model,
        answers,
        usage,
        diagnostics,
      };
    }
    return this.extraFields
      ? { model, answers, usage, timings: { total_ms: 1.5 }, id: "decision-1" }
      : { model, answers, usage };
  }

  private answerOf(
    q: AskedNativeQuestion,
    probabilities: Record<string, number>,
    fault: SystemOneFault | undefined,
  ): unknown {
    const extra = this.extraFields ? { explanation: "the model's own words", logprobs: [-0.1] } : {};
    if (fault === "wrongType") return { type: q.type === "noul" ? "score" : "noul", noul: 0.5 };
    if (fault === "refusal") return { type: "refusal" };
    if (q.type === "noul") {
      const p = probabilities.true as number;
      // [VLLM] a noul answer also carries its two probabilities and a confidence.
      const vllm =
        this.flavour === "vllm" ? { probabilities: { yes: p, no: 1 - p }, confidence: Math.abs(2 * p - 1) } : {};
      return { type: "noul", noul: fault === "notNumber" ? String(p) : p, ...extra, ...vllm };
    }
    const shown: Record<string, unknown> = { ...probabilities };
    if (fault === "unknownLabel") shown["not-asked"] = 0;
    if (fault === "badSum") for (const label of q.labels) shown[label] = 0.9 * (probabilities[label] as number);
    if (fault === "notNumber") shown[q.labels[0] as string] = String(probabilities[q.labels[0] as string]);
    const values = q.labels.map((label) => probabilities[label] as number);
    const best = values.indexOf(Math.max(...values));
    if (q.type === "choice") {
      return {
        type: "choice",
        choice: q.labels[best],
        probabilities: shown,
        confidence: choiceConfidence(values),
        ...extra,
      };
    }
    const legend = Object.fromEntries((q.criteria as unknown[]).map((c, i) => [String(i), c]));
    const score = values.reduce((sum, p, i) => sum + i * p, 0);
    return { type: "score", score, legend, probabilities: shown, confidence: scoreConfidence(values), ...extra };
  }
}

/**
 * The request's questions, validated as llama.cpp does [SOURCE: parse_questions; TESTS:
 * test_systemone_invalid_request, test_systemone_instructions_must_carry_content]: 422
 * unprocessable_entity_error, the message naming `questions.<id>`.
 */
function parseQuestions(
  request: Record<string, unknown>,
  optionLimit: number,
  boxes = false,
  vllm?: VllmWording,
): AskedNativeQuestion[] {
  const refuse = (message: string) => new Refusal(422, "unprocessable_entity_error", message);
  if (!("state" in request) || request.state === null) throw refuse('"state" must be provided');
  const raw = request.questions;
  if (typeof raw !== "object" || raw === null || Array.isArray(raw) || Object.keys(raw).length === 0) {
    throw refuse('"questions" must be a non-empty object');
  }
  const questions: AskedNativeQuestion[] = [];
  for (const [key, q] of Object.entries(raw)) {
    const err = (message: string) => refuse(`questions.${key}: ${message}`);
    if (typeof q !== "object" || q === null || Array.isArray(q)) throw err("must be an object");
    const question = q as Record<string, unknown>;
    const instructions = question.instructions;
    const hasContent =
      (typeof instructions === "string" && instructions !== "") ||
      (Array.isArray(instructions) && instructions.length > 0) ||
      (typeof instructions === "object" &&
        instructions !== null &&
        !Array.isArray(instructions) &&
        Object.keys(instructions).length > 0);
    if (!hasContent) throw err('"instructions" must be a non-empty string, object or array');
    const criteria = question.criteria;
    let labels: string[];
    if (question.type === "choice") {
      if (
        typeof criteria !== "object" ||
        criteria === null ||
        Array.isArray(criteria) ||
        Object.keys(criteria).length === 0
      ) {
        throw err('"criteria" must be a non-empty object');
      }
      labels = Object.keys(criteria);
    } else if (question.type === "score") {
      if (!Array.isArray(criteria) || criteria.length < 2 || criteria.length > 10) {
        throw err('"criteria" must be an array of 2 to 10 levels');
      }
      labels = criteria.map((_, i) => String(i));
    } else if (question.type === "noul") {
      if (criteria !== undefined && criteria !== null && (typeof criteria !== "object" || Array.isArray(criteria))) {
        throw err('"criteria" must be an object');
      }
      labels = ["true", "false"];
    } else if (question.type === "box" && boxes) {
      labels = [];
    } else {
      throw err('"type" must be one of: choice, score, noul');
    }
    if (vllm !== undefined) {
      // [VLLM] unknown question fields are refused; 10 levels; the option limit in its own words.
      const unknown = Object.keys(question).find((k) => !["type", "instructions", "criteria"].includes(k));
      if (unknown !== undefined) throw refuse(`question '${key}': unknown field '${unknown}'`);
      if (labels.length > optionLimit) {
        throw refuse(`question '${key}': at most ${optionLimit} ${vllm} for this model`);
      }
    } else if (labels.length > optionLimit) {
      throw err(`too many options (${labels.length}), this model supports at most ${optionLimit}`);
    }
    questions.push({ key, type: question.type, labels, instructions, criteria });
  }
  return questions;
}

/** [SOURCE: parse_state] `files` and its alias `images`: arrays of data URLs, at most 8 in all. */
function parseImages(request: Record<string, unknown>): number {
  let count = 0;
  for (const key of ["files", "images"]) {
    const list = request[key];
    if (list === undefined || list === null) continue;
    if (!Array.isArray(list)) throw new Refusal(422, "unprocessable_entity_error", `"${key}" must be an array`);
    for (const url of list) {
      if (typeof url !== "string" || !url.startsWith("data:")) {
        throw new Refusal(422, "unprocessable_entity_error", "images must be data URLs (data:image/...;base64,...)");
      }
      if (count >= MAX_IMAGES) {
        throw new Refusal(422, "unprocessable_entity_error", `too many images, the maximum is ${MAX_IMAGES}`);
      }
      count += 1;
    }
  }
  return count;
}

/**
 * Prompt tokens a call renders (a characters/4 estimate): each question with the state (the budget counts every
 * task [TESTS]), or, for `usage`, the state once and each question's own (the shared prefix is read once [TESTS:
 * test_systemone_shared_prompt]).
 */
function renderedTokens(state: unknown, questions: AskedNativeQuestion[], shared = false): number {
  const stateTokens = Math.ceil((JSON.stringify(state) ?? "").length / 4) + 8;
  const own = questions.map((q) => Math.ceil(JSON.stringify([q.instructions, q.criteria ?? null]).length / 4) + 4);
  const sum = own.reduce((a, b) => a + b, 0);
  return shared ? stateTokens + sum : questions.length * stateTokens + sum;
}

/** [SYSTEMONE.md, TESTS: choice_confidence] max(0, (p_max − 1/n) / (1 − 1/n)); 1 for one option. */
function choiceConfidence(p: number[]): number {
  const n = p.length;
  if (n < 2) return 1;
  return Math.max(0, (Math.max(...p) - 1 / n) / (1 - 1 / n));
}

/** [TESTS: score_confidence] 1 − mean distance to the mode / the same for a uniform distribution, at least 0. */
function scoreConfidence(p: number[]): number {
  const n = p.length;
  const mode = p.indexOf(Math.max(...p));
  const dist = p.reduce((sum, q, i) => sum + q * Math.abs(i - mode), 0);
  let uniform = 0;
  for (let i = 0; i < n; i++) uniform += Math.abs(i - (n - 1) / 2);
  return Math.max(0, 1 - dist / (uniform / n));
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}
