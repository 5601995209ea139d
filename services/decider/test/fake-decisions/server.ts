import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { closeAbruptly, listenOnLoopback } from "../loopback-server";

/**
 * A fake server of OpenAI's Decisions dialect (`POST /v1/decisions`) on a real port, built from its published
 * contract and from what vLLM and SGLang publish about theirs (facts only, none of their code):
 *
 * - [OPENAI] the `openai` npm package 7.59.0, `resources/decisions.d.ts` and `resources/shared.d.ts`: the request
 *   (`model`, `input`, 1–400 `questions` of type predicate, choice — 2–255 unique typed values — or score, an
 *   optional `name`; optional `prompt_cache_key`, `prompt_cache_options`, `safety_identifier`), the answers in
 *   question order (a refusal `{type: "refusal", name}` for one question, the others answered), and `usage`
 *   with `input_tokens_details.cached_tokens`; errors in `{"error":{message,type,param,code}}`;
 * - [VLLM] vLLM 0.33's /v1/decisions (the project's DECISIONS.md notes): unknown fields refused, 1–200
 *   questions at validation and 64 in the engine ("questions: at most 64 for this model"), choices labelled
 *   A–Z so at most 26 ("This model supports at most 26 choices per question"), both 400 with `code` the
 *   integer status and type BadRequestError; 501 for a model it cannot serve; no refusals;
 * - [SGLANG] SGLang's /v1/decisions, a dialect of its own on the same path: `questions:[{id, type:
 *   choice|score|yes_no, question, options|levels}]`, answers keyed by id, `usage {prompt_tokens, total_tokens}`.
 */
export type DecisionsMode = "openai" | "vllm" | "sglang";

/** One question as the fake read it. */
export interface AskedDecision {
  name: string | null;
  type: "predicate" | "choice" | "score";
  /** choice: its values, typed; score: the level indexes; predicate: true and false. */
  values: (string | boolean | number)[];
  /** score: its levels' labels. */
  labels: string[];
  instructions: unknown;
}

/** Weights per value, in the question's order (normalised by the fake); predicate: [true, false]. */
export type DecisionsScript = (q: AskedDecision) => number[];

/** A deterministic, uneven default: weight from a hash of the question's name and the value. */
export const hashedDecisions: DecisionsScript = (q) =>
  q.values.map((v) => 1 + (hash(`${q.name}\u0000${typeof v}:${String(v)}`) % 97));

function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0;
  return h;
}

class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

/** [OPENAI] the request's documented fields, per object; [VLLM] refuses any other. */
const FIELDS = {
  body: ["model", "input", "questions", "prompt_cache_key", "prompt_cache_options", "safety_identifier"],
  predicate: ["type", "instructions", "name"],
  choice: ["type", "instructions", "name", "choices"],
  score: ["type", "instructions", "name", "levels"],
  option: ["value", "description"],
  level: ["label", "description"],
} as const;

export class FakeDecisions {
  mode: DecisionsMode;
  /** The models it serves ([OPENAI]: only gpt-6-luna). */
  models: string[];
  /** Models its list names that its Decisions API cannot serve ([VLLM]: 501). */
  listedOnly: string[] = [];
  /** [VLLM] choices per question (A–Z); [OPENAI] 255. */
  choiceLimit: number;
  /** [VLLM] questions the engine takes per call; [OPENAI] 400. */
  questionLimit: number;
  /** Question names answered `{type: "refusal"}` ([OPENAI]: one question declined, the others answered). */
  refusals = new Set<string>();
  /** `usage.input_tokens_details.cached_tokens` of each answer. */
  cachedTokens = 0;
  script: DecisionsScript = hashedDecisions;
  holding = false;

  /** Bodies of the POST /v1/decisions calls (not the decider's start-up probes), in arrival order. */
  requests: Record<string, unknown>[] = [];
  /** Status of each of those calls. */
  statuses: number[] = [];
  /** Every field outside the documented ones that a call carried, as `object.field`. */
  unknownFields: string[] = [];
  /** The distributions answered, by question name, with each value (typed) and its probability. */
  reported: { name: string | null; probabilities: { value: string | boolean | number; probability: number }[] }[] = [];
  calls = 0;
  inflight = 0;
  probes = 0;
  paths: string[] = [];

  private server: Server | undefined;
  private waiters: (() => void)[] = [];

  constructor(options: { mode?: DecisionsMode; models?: string[] } = {}) {
    this.mode = options.mode ?? "openai";
    this.models = options.models ?? [this.mode === "openai" ? "gpt-6-luna" : "test-model"];
    this.choiceLimit = this.mode === "openai" ? 255 : 26;
    this.questionLimit = this.mode === "vllm" ? 64 : 400;
  }

  async start(port = 0): Promise<string> {
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) this.refuse(res, new Refusal(500, String(err)));
      });
    });
    return `http://127.0.0.1:${await listenOnLoopback(this.server, port)}`;
  }

  async stop(): Promise<void> {
    this.release();
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
    if (req.method === "POST" && url === "/v1/decisions") return this.decisions(res, text);
    return this.refuse(res, new Refusal(404, `Not found: ${req.method} ${url}`));
  }

  /** GET /v1/models: no `architecture` (neither OpenAI nor vLLM publish one); `owned_by` names the server. */
  private modelList(): unknown {
    const owner = this.mode === "openai" ? "system" : this.mode;
    const ids = [...this.models, ...this.listedOnly];
    return { object: "list", data: ids.map((id) => ({ id, object: "model", created: 0, owned_by: owner })) };
  }

  private async decisions(res: ServerResponse, text: string): Promise<void> {
    const body = parseJson(text);
    const probe = isObject(body) && body.input === "This is the decider's start-up check.";
    if (probe) this.probes += 1;
    else {
      this.calls += 1;
      if (isObject(body)) this.requests.push(body);
    }
    try {
      if (!isObject(body)) throw new Refusal(400, "We could not parse the JSON body of your request.");
      if (this.mode === "sglang") return send(res, 200, this.sglang(body));
      this.unknown(body, FIELDS.body, "body");
      const questions = this.validate(body);
      if (!probe && this.holding) {
        this.inflight += 1;
        await new Promise<void>((resolve) => {
          this.waiters.push(resolve);
          res.on("close", () => resolve());
        });
        this.inflight -= 1;
      }
      const answer = this.answer(body.model as string, questions, !probe);
      if (!probe) this.statuses.push(200);
      send(res, 200, answer);
    } catch (err) {
      if (!(err instanceof Refusal)) throw err;
      if (!probe) this.statuses.push(err.status);
      this.refuse(res, err);
    }
  }

  /** [OPENAI] the envelope; [VLLM] `code` is the integer status and `type` BadRequestError for a 400. */
  private refuse(res: ServerResponse, err: Refusal): void {
    const type =
      this.mode === "vllm"
        ? err.status === 400
          ? "BadRequestError"
          : err.status === 501
            ? "NotImplementedError"
            : "NotFoundError"
        : err.status === 404
          ? "invalid_request_error"
          : err.status >= 500
            ? "server_error"
            : "invalid_request_error";
    const code = this.mode === "vllm" ? err.status : err.code;
    send(res, err.status, { error: { message: err.message, type, param: err.param, code } });
  }

  /** Fields beyond the documented ones: recorded, and [VLLM] refused. */
  private unknown(object: Record<string, unknown>, allowed: readonly string[], where: string): void {
    for (const key of Object.keys(object)) {
      if (allowed.includes(key)) continue;
      this.unknownFields.push(`${where}.${key}`);
      if (this.mode === "vllm") throw new Refusal(400, `${where}: extra inputs are not permitted: '${key}'`, key);
      throw new Refusal(400, `Unknown parameter: '${where}.${key}'.`, `${where}.${key}`, "unknown_parameter");
    }
  }

  private validate(body: Record<string, unknown>): AskedDecision[] {
    if (typeof body.model !== "string") throw new Refusal(400, "model: a string is required", "model");
    if (!this.models.includes(body.model)) {
      // [VLLM] a model it cannot serve is a 501; [OPENAI] "Only gpt-6-luna is supported".
      if (this.mode === "vllm") throw new Refusal(501, `The model '${body.model}' cannot serve decisions`);
      throw new Refusal(404, `The model \`${body.model}\` does not exist`, "model", "model_not_found");
    }
    if (typeof body.input !== "string" && !Array.isArray(body.input)) {
      throw new Refusal(400, "input: a string or a list of items is required", "input");
    }
    const raw = body.questions;
    const most = this.mode === "vllm" ? 200 : 400;
    if (!Array.isArray(raw) || raw.length < 1 || raw.length > most) {
      throw new Refusal(400, `questions: between 1 and ${most} questions are required`, "questions");
    }
    if (raw.length > this.questionLimit) {
      throw new Refusal(400, `questions: at most ${this.questionLimit} for this model`, "questions");
    }
    return raw.map((q, i) => this.question(q, i));
  }

  private question(q: unknown, i: number): AskedDecision {
    const where = `questions[${i}]`;
    if (!isObject(q)) throw new Refusal(400, `${where}: an object is required`, where);
    const type = q.type;
    if (type !== "predicate" && type !== "choice" && type !== "score") {
      throw new Refusal(400, `${where}.type: predicate, choice or score is required`, `${where}.type`);
    }
    this.unknown(q, FIELDS[type], where);
    const instructions = q.instructions;
    const valid =
      (typeof instructions === "string" && instructions !== "") ||
      (Array.isArray(instructions) && instructions.length > 0 && instructions.every(isPart));
    if (!valid) throw new Refusal(400, `${where}.instructions: text or a list of parts is required`, where);
    if (q.name !== undefined && typeof q.name !== "string") throw new Refusal(400, `${where}.name: a string`, where);
    const name = typeof q.name === "string" ? q.name : null;
    if (type === "predicate") return { name, type, values: [true, false], labels: [], instructions };
    if (type === "choice") {
      const choices = q.choices;
      if (!Array.isArray(choices) || choices.length < 2 || choices.length > 255) {
        throw new Refusal(400, `${where}.choices: between 2 and 255 choices are required`, where);
      }
      if (choices.length > this.choiceLimit) {
        throw new Refusal(400, `This model supports at most ${this.choiceLimit} choices per question`, where);
      }
      const values: (string | boolean)[] = [];
      for (const [j, c] of choices.entries()) {
        if (!isObject(c)) throw new Refusal(400, `${where}.choices[${j}]: an object is required`, where);
        this.unknown(c, FIELDS.option, `${where}.choices[${j}]`);
        if (typeof c.value !== "string" && typeof c.value !== "boolean") {
          throw new Refusal(400, `${where}.choices[${j}].value: a string or a boolean is required`, where);
        }
        if (c.description !== undefined && typeof c.description !== "string") {
          throw new Refusal(400, `${where}.choices[${j}].description: a string`, where);
        }
        // Typed: "true" and true are two values; each must be unique.
        if (values.some((v) => v === c.value))
          throw new Refusal(400, `${where}.choices: each choice must be unique`, where);
        values.push(c.value);
      }
      return { name, type, values, labels: [], instructions };
    }
    const levels = q.levels;
    if (!Array.isArray(levels) || levels.length < 2) throw new Refusal(400, `${where}.levels: two or more`, where);
    const labels: string[] = [];
    for (const [j, l] of levels.entries()) {
      if (!isObject(l) || typeof l.label !== "string") throw new Refusal(400, `${where}.levels[${j}].label`, where);
      this.unknown(l, FIELDS.level, `${where}.levels[${j}]`);
      if (l.description !== undefined && typeof l.description !== "string") {
        throw new Refusal(400, `${where}.levels[${j}].description: a string`, where);
      }
      labels.push(l.label);
    }
    return { name, type, values: labels.map((_, j) => j), labels, instructions };
  }

  /** [OPENAI] `{model, answers, usage}`: answers in question order; a refusal for each name in `refusals`. */
  private answer(model: string, questions: AskedDecision[], record: boolean): unknown {
    let output = 0;
    const answers = questions.map((q) => {
      if (q.name !== null && this.refusals.has(q.name) && this.mode !== "vllm")
        return { type: "refusal", name: q.name };
      output += 1;
      const weights = this.script(q);
      const total = weights.reduce((a, b) => a + b, 0);
      const p = weights.map((w) => w / total);
      if (record)
        this.reported.push({
          name: q.name,
          probabilities: q.values.map((value, i) => ({ value, probability: p[i] as number })),
        });
      const best = p.indexOf(Math.max(...p));
      const confidence = Math.max(0, ((p[best] as number) - 1 / p.length) / (1 - 1 / p.length));
      if (q.type === "predicate") return { type: "predicate", name: q.name, probability: p[0] };
      if (q.type === "choice") {
        return {
          type: "choice",
          name: q.name,
          choice: q.values[best],
          probabilities: q.values.map((value, i) => ({ value, probability: p[i] })),
          confidence,
        };
      }
      return {
        type: "score",
        name: q.name,
        score: p.reduce((sum, pi, i) => sum + i * pi, 0),
        probabilities: q.labels.map((label, i) => ({ value: i, label, probability: p[i] })),
        confidence,
      };
    });
    const input = 20 + questions.length * 8;
    return {
      model,
      answers,
      usage: {
        input_tokens: input,
        input_tokens_details: { cache_write_tokens: 0, cached_tokens: Math.min(this.cachedTokens, input) },
        output_tokens: output,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: input + output,
      },
    };
  }

  /**
   * [SGLANG] its own dialect: questions `{id, type: choice|score|yes_no, question, options|levels}`, answers
   * keyed by id, `usage {prompt_tokens, total_tokens}`. A body in OpenAI's shape is refused as its validation
   * would (no id, no question, an unknown type).
   */
  private sglang(body: Record<string, unknown>): unknown {
    const questions = Array.isArray(body.questions) ? body.questions : [];
    const answers: Record<string, unknown> = {};
    for (const [i, q] of questions.entries()) {
      if (!isObject(q) || typeof q.id !== "string" || typeof q.question !== "string") {
        throw new Refusal(400, `questions.${i}: 'id' and 'question' are required`);
      }
      if (q.type !== "choice" && q.type !== "score" && q.type !== "yes_no") {
        throw new Refusal(400, `questions.${i}.type: Input should be 'choice', 'score' or 'yes_no'`);
      }
      answers[q.id] = q.type === "yes_no" ? { answer: "yes", probability: 0.5 } : { answer: 0, probabilities: [] };
    }
    return { answers, usage: { prompt_tokens: 20, total_tokens: 21 } };
  }
}

function isPart(part: unknown): boolean {
  if (!isObject(part)) return false;
  if (part.type === "input_text") return typeof part.text === "string";
  if (part.type === "input_image") return typeof part.image_url === "string";
  if (part.type === "input_json") return isObject(part.data) || (Array.isArray(part.data) && part.data.every(isObject));
  return false;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
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

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}
