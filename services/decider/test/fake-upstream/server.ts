import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { renderChatML } from "../engine/engine-upstream";
import { streamHugeAnswer } from "../huge-body";
import { closeAbruptly, listenOnLoopback } from "../loopback-server";

/**
 * A fake OpenAI-compatible model server on a real port. A call is a probe: the prompt lists questions and
 * ends with an assistant message prefilled up to one answer's value (`{"q2": "`); the fake answers one
 * token and reports the alternatives at that position from a scripted distribution over the outcomes.
 * The llama flavour follows the recordings of a real llama-server (test/fixtures/llama-server-b10573):
 * raw, unconstrained alternatives (whitespace runs, a bare quote, an unquoted letter inside a string,
 * glued `:t`, partial UTF-8 pieces with `token: ""`, the empty end token), values split or glued in
 * several ways (` t`, ` true`, `true,`, `B"}`), any model name accepted, `/v1/models` in both the OpenAI
 * and the Ollama shape, cached prompt tokens reported, and a 500 when calls running together overflow
 * the context their slots share. With `packing`, the llama flavour also serves llama-server's own
 * `/apply-template` (ChatML), `/tokenize` (four characters a token, two special tokens) and `/completion`
 * (several prompts of token ids and text in one call, answered as the chat endpoint would answer each, in
 * the shape b10573 answers: `completion_probabilities`, `timings`, `response_fields`).
 */
export type Flavour = "llama" | "vllm" | "ollama";

export type Fault =
  | "model404"
  | "http500"
  | "hang"
  /** A 200 with no choice in it. */
  | "malformed"
  /** `logprobs: null`; the emitted token is still the most likely one. */
  | "noLogprobs"
  /** Alternatives of which none can begin an outcome (every outcome absent). */
  | "junkOnly"
  /**
   * llama-server when the token it sampled is a piece of a UTF-8 character: no logprobs at all, the prefill
   * unchanged, one token decoded (seen on b10573). A call with a `grammar` is answered normally.
   */
  | "piece"
  | "drop"
  | "contextTooLong"
  /** llama.cpp's 500 for calls that overflowed the shared context together. */
  | "sharedContext"
  | "http429"
  /** A 200 of `hugeBytes` bytes, streamed (an answer no probe needs: the decider must stop reading it). */
  | "huge";

/** One question as the fake read it from the prompt and the schema. */
export interface AskedQuestion {
  key: string;
  name: string;
  kind: "noul" | "choice" | "score";
  /** Labels in code order: "true"/"false", "0".."n-1", or the choice labels shown in this call. */
  labels: string[];
  codes: (string | number | boolean)[];
  /** The prompt's kind title, e.g. "choice, final round among the best options". */
  title: string;
}

/**
 * Target probabilities per label (over all of a question's labels; the fake conditions on those shown). The
 * request body is there for scripts that answer from the state (the evaluation tool's tests). A script that
 * throws makes the call fail with 500.
 */
export type Script = (q: AskedQuestion, body: Record<string, unknown>) => Record<string, number>;

interface Alt {
  token: string;
  p: number;
  bytes?: number[];
}

/** A deterministic, uneven default distribution: weight from a hash of question name and label. */
export const hashedScript: Script = (q) =>
  Object.fromEntries(q.labels.map((label) => [label, 1 + (hash(`${q.name}\u0000${label}`) % 97)]));

export function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0;
  return h;
}

/** The assistant prefill of a probe: which key, and what of the value's text it already holds. */
const PREFILL = /^\{"(q\d+)":( "| )?$/;
/** A question's line in the prompt (version 4): its key, then its name. */
const QUESTION_LINE = /^(q\d+) /;

/**
 * Reads one value of a prompt line at `at`: a JSON value (a string, an object, an array), else plain words up
 * to the first of the layout's characters (`:`, `;`, `(`, `)`), as decide/prompt.ts writes them.
 */
function readText(line: string, at: number): { value: unknown; end: number } {
  const first = line[at];
  if (first === '"' || first === "{" || first === "[") {
    let depth = 0;
    let inString = false;
    for (let i = at; i < line.length; i++) {
      const c = line[i];
      if (inString) {
        if (c === "\\") i++;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === "{" || c === "[") depth++;
      else if (c === "}" || c === "]") depth--;
      if (!inString && depth === 0) return { value: JSON.parse(line.slice(at, i + 1)), end: i + 1 };
    }
    throw new Error(`unterminated JSON in the prompt line ${line}`);
  }
  let end = at;
  while (end < line.length && !":;()".includes(line[end] as string)) end++;
  // Plain words end before a space that precedes the outcomes' list.
  const text = line.slice(at, end).replace(/ $/, "");
  return { value: text, end: at + text.length };
}

/** The outcomes' list at the end of a question's line: each item's code (its first word) and label. */
function readOutcomes(line: string, at: number): { code: string; label: string | undefined }[] {
  const items: { code: string; label: string | undefined }[] = [];
  let i = at;
  while (i < line.length && line[i] !== ")") {
    const code = /^[^ :;)]+/.exec(line.slice(i))?.[0] ?? "";
    i += code.length;
    let label: string | undefined;
    if (line[i] === " " && line.slice(i, i + 4) !== " or ") {
      const read = readText(line, i + 1);
      label = String(read.value);
      i = read.end;
    } else if (line.slice(i, i + 9) === " or false") {
      items.push({ code, label: undefined });
      items.push({ code: "false", label: undefined });
      return items;
    }
    if (line[i] === ":") i = readText(line, i + 2).end;
    items.push({ code, label });
    if (line.slice(i, i + 2) === "; ") i += 2;
  }
  return items;
}

export class FakeUpstream {
  flavour: Flavour;
  /** Model ids listed at /v1/models and accepted by chat (llama.cpp accepts any name, like the real one). */
  models: string[];
  modelsStatus = 200;
  /** The size of a `huge` answer. */
  hugeBytes = 64 * 1024 * 1024;
  /** Bytes each `huge` answer got to write before its client closed the connection (or all of them). */
  hugeWritten: number[] = [];
  script: Script = hashedScript;
  /** Share of probability the llama flavour gives to tokens that begin no outcome (raw distribution). */
  junk = 0.1;
  /** Faults applied to the next calls, one each, in order. */
  faults: Fault[] = [];
  /** While true, chat calls wait until release() (or until the client goes away). */
  holding = false;
  /** Milliseconds each chat call takes before it answers (benchmarks: a model server of fixed speed). */
  latencyMs = 0;
  /** Prompt tokens per call; all but 10 are reported as cached when the call finds its prefix cached. */
  promptTokens = 100;
  /**
   * llama flavour: the context (in prompt tokens) that calls running at once share, like llama-server's
   * `-c` over its slots. A call that overflows it together with the calls in flight gets the 500.
   */
  sharedContext: number | undefined;

  /** llama flavour: the slots `/props` reports (`total_slots`). */
  slots = 2;
  /** Whether a prefilled assistant message is continued (else closed, with a new turn opened after it). */
  continuesPrefill = true;
  /** Whether top_logprobs are the raw distribution (else they change with the temperature, as post-sampling ones). */
  rawLogprobs = true;
  /** Whether the inspection's calls get logprobs at all (a server that never reports them: false). */
  inspectionLogprobs = true;
  /** Answers POST /v1/systemone with llama.cpp's 501 "not a decision model" (else 404, as before b11361). */
  notDecisionModel = false;
  /** POST /v1/systemone calls answered 501. */
  systemOneCalls = 0;
  /** The decider's start-up inspection calls (kept apart from `calls` and `requests`, which are probes). */
  inspections: Record<string, unknown>[] = [];
  /** While true, the start-up inspection's calls wait until releaseInspections() (or until the client goes away). */
  holdingInspections = false;
  /** llama flavour: serve `/apply-template`, `/tokenize` and `/completion` (else they are 404, as on an older server). */
  packing = false;
  /** Text `/apply-template` writes after a final assistant message (a template that rewrites the prefill). */
  afterPrefill = "";
  /**
   * How far (in nats) `/completion` moves the logprobs of the inspection's prompt from the chat endpoint's:
   * 0 answers as the chat endpoint does; a few hundredths is a GPU's float noise; 0.5 another distribution.
   */
  completionSkew = 0;
  /** Every `/completion` body, parsed (probes only; the inspection's are in `inspections`). */
  completions: Record<string, unknown>[] = [];

  calls = 0;
  inflight = 0;
  maxInflight = 0;
  /** How many chat calls were in flight (itself included) when each call arrived. */
  concurrencyAtArrival: number[] = [];
  /** Calls whose client went away before the fake answered. */
  aborted = 0;
  requests: Record<string, unknown>[] = [];
  /** The Authorization header of every request (models and chat), to check the upstream key is sent. */
  authorizations: (string | undefined)[] = [];
  /** [start, end] of every answered chat call, in performance.now() ms (the benchmark subtracts them). */
  busy: [number, number][] = [];
  /** Every distribution the fake reported, as outcome label -> probability, by question name (tests compare). */
  reported: { name: string; key: string; probabilities: Record<string, number> }[] = [];

  private server: Server | undefined;
  private waiters: (() => void)[] = [];
  private inspectionWaiters: (() => void)[] = [];
  /** Prompt prefixes seen: every one (a shared prefix cache), or per slot (llama flavour, `id_slot`). */
  private prefixes = new Set<string>();
  private slotPrefixes = new Map<number, string>();
  private inflightTokens = 0;

  constructor(options: { flavour?: Flavour; models?: string[] } = {}) {
    this.flavour = options.flavour ?? "vllm";
    this.models = options.models ?? ["test-model"];
  }

  /** Listens on loopback: a free port, or `port` (to come back where it was after crash()). */
  async start(port = 0): Promise<string> {
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        res.statusCode = 500;
        res.end(String(err));
      });
    });
    return `http://127.0.0.1:${await listenOnLoopback(this.server, port)}`;
  }

  async stop(): Promise<void> {
    this.release();
    await closeAbruptly(this.server);
  }

  /**
   * A model server that dies: every connection is cut with no answer (calls in flight see a reset) and
   * nothing listens any more (new calls are refused) until start() again.
   */
  async crash(): Promise<void> {
    await closeAbruptly(this.server);
  }

  release(): void {
    this.holding = false;
    for (const w of this.waiters.splice(0)) w();
    this.releaseInspections();
  }

  releaseInspections(): void {
    this.holdingInspections = false;
    for (const w of this.inspectionWaiters.splice(0)) w();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? "";
    this.authorizations.push(req.headers.authorization);
    if (req.method === "GET" && url === "/v1/models") {
      if (this.modelsStatus !== 200) return send(res, this.modelsStatus, { error: "not found" });
      return send(res, 200, this.modelList());
    }
    if (req.method === "GET" && url === "/props" && this.flavour === "llama") {
      return send(res, 200, { total_slots: this.slots, build_info: "b10573-fake" });
    }
    if (req.method === "POST" && url === "/v1/systemone" && this.notDecisionModel) {
      // A llama-server (b11361+) holding a chat model: its decision route refuses with 501 (llama.cpp
      // tools/server/tests/unit/test_systemone.py, test_systemone_not_a_decision_model_is_501).
      this.systemOneCalls += 1;
      return send(res, 501, {
        error: { code: 501, message: "This model is not a decision model", type: "not_supported_error" },
      });
    }
    const native = this.flavour === "llama" && this.packing && NATIVE_ROUTES.includes(url);
    if (req.method !== "POST" || (url !== "/v1/chat/completions" && !native)) {
      return send(res, 404, { error: "no route" });
    }
    const started = performance.now();
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
    if (url === "/apply-template") return send(res, 200, { prompt: this.applyTemplate(body) });
    if (url === "/tokenize") return send(res, 200, { tokens: tokenizeBody(body) });
    if (url === "/completion") {
      const prompts = promptsOf(body.prompt).map(messagesOf);
      if (prompts.some((messages) => FakeUpstream.isInspection({ messages }))) {
        this.inspections.push(body);
        return send(res, 200, this.inspectCompletion(body, prompts));
      }
      this.completions.push(body);
      return this.serve(req, res, started, body, (fault) => this.completeMany(body, prompts, fault));
    }
    if (FakeUpstream.isInspection(body)) {
      this.inspections.push(body);
      if (this.holdingInspections) {
        await new Promise<void>((resolve) => {
          this.inspectionWaiters.push(resolve);
          res.on("close", () => resolve());
        });
      }
      return send(res, 200, this.inspect(body));
    }
    this.requests.push(body);
    return this.serve(req, res, started, body, (fault) => this.complete(body, fault));
  }

  /**
   * A probing call, after the faults and limits every call meets (holding, latency, the shared context, the
   * model, errors): `answer` writes the body of a 200.
   */
  private async serve(
    req: IncomingMessage,
    res: ServerResponse,
    started: number,
    body: Record<string, unknown>,
    answer: (fault: Fault | undefined) => unknown,
  ): Promise<void> {
    this.calls += 1;
    this.inflight += 1;
    this.concurrencyAtArrival.push(this.inflight);
    this.maxInflight = Math.max(this.maxInflight, this.inflight);
    const fault = this.faults.shift();
    const tokens = this.promptTokens;
    const overflow =
      fault === "sharedContext" ||
      (this.sharedContext !== undefined &&
        tokens <= this.sharedContext &&
        this.inflightTokens + tokens > this.sharedContext);
    if (!overflow) this.inflightTokens += tokens;
    let gone = false;
    res.on("close", () => {
      this.inflight -= 1;
      if (!overflow) this.inflightTokens -= tokens;
      if (!res.writableFinished) {
        gone = true;
        this.aborted += 1;
      }
    });
    if (overflow) {
      // What llama-server answers (recording 0007) when calls that each fit overflow the shared context.
      return send(res, 500, { error: { code: 500, message: "Context size has been exceeded.", type: "server_error" } });
    }
    if (this.holding || fault === "hang") {
      await new Promise<void>((resolve) => {
        if (fault !== "hang") this.waiters.push(resolve);
        res.on("close", () => resolve());
      });
      if (gone) return;
    }
    if (this.latencyMs > 0) {
      await new Promise<void>((resolve) => setTimeout(resolve, this.latencyMs));
      if (gone) return;
    }
    if (fault === "drop") {
      req.socket.destroy();
      return;
    }
    if (fault === "huge") {
      this.hugeWritten.push((await streamHugeAnswer(res, this.hugeBytes)).written);
      return;
    }
    const model = String(body.model);
    if (fault === "model404" || (this.flavour !== "llama" && !this.models.includes(model))) {
      return send(res, 404, this.modelNotFound(model));
    }
    if (fault === "http500")
      return send(res, 500, { error: { code: 500, message: "internal error", type: "server_error" } });
    if (fault === "contextTooLong" || (this.sharedContext !== undefined && tokens > this.sharedContext)) {
      return send(res, 400, this.contextTooLong(tokens));
    }
    if (fault === "http429") {
      res.setHeader("retry-after", "7");
      return send(res, 429, { error: { code: 429, message: "too many requests", type: "rate_limit" } });
    }
    send(res, 200, answer(fault));
    this.busy.push([started, performance.now()]);
  }

  /** `/apply-template`: the ChatML prompt llama-server renders (a final assistant message continued). */
  private applyTemplate(body: Record<string, unknown>): string {
    const messages = body.messages as { role: string; content: string }[];
    const last = messages[messages.length - 1];
    return renderChatML(messages) + (last?.role === "assistant" ? this.afterPrefill : "");
  }

  /**
   * `/completion` with several prompts: each answered as the chat endpoint answers the same messages (the
   * fault of the call applies to the first prompt, or, for `junkOnly` and `noLogprobs`, to all; `malformed`
   * leaves the last answer out).
   */
  private completeMany(
    body: Record<string, unknown>,
    prompts: { role: string; content: string }[][],
    fault: Fault | undefined,
  ): unknown {
    const results = prompts.map((messages, i) => {
      const applies = fault === "junkOnly" || fault === "noLogprobs" || i === 0;
      const chat = this.complete(
        {
          model: "fake",
          messages,
          top_logprobs: body.n_probs,
          ...(body.id_slot === undefined ? {} : { id_slot: body.id_slot }),
          ...(body.grammar === undefined ? {} : { grammar: body.grammar }),
        },
        applies && fault !== "malformed" ? fault : undefined,
      ) as ChatAnswer;
      return nativeResult(chat, i, renderChatML(messages), body.response_fields);
    });
    if (fault === "malformed") results.pop();
    return results.length === 1 ? results[0] : results;
  }

  /** The inspection's prompt through `/completion`: the chat endpoint's answer, its logprobs moved by `completionSkew`. */
  private inspectCompletion(body: Record<string, unknown>, prompts: { role: string; content: string }[][]): unknown {
    const results = prompts.map((messages, i) => {
      const chat = this.inspect({ messages, temperature: 0 }) as ChatAnswer;
      for (const alt of chat.choices[0]?.logprobs?.content?.[0]?.top_logprobs ?? []) alt.logprob -= this.completionSkew;
      return nativeResult(chat, i, renderChatML(messages), body.response_fields);
    });
    return results.length === 1 ? results[0] : results;
  }

  /** The decider's start-up inspection (server-check.ts), told by its own system message. */
  static isInspection(body: Record<string, unknown>): boolean {
    const messages = body.messages as { role: string; content: string }[];
    return messages[0]?.content === "You answer with one JSON object.";
  }

  /**
   * The inspection's answers: prompt tokens that grow by one with the one-character prefill (or by six, when
   * the prefill is closed and a new turn opened), and alternatives for the next token that are the same at
   * every temperature (or, not raw, sharpened by it as a post-sampling report would be).
   */
  private inspect(body: Record<string, unknown>): unknown {
    const messages = body.messages as { role: string; content: string }[];
    const prefilled = messages[messages.length - 1]?.role === "assistant";
    const promptTokens = 30 + (prefilled ? (this.continuesPrefill ? 1 : 6) : 0);
    const temperature = Number(body.temperature ?? 1);
    const scale = this.rawLogprobs ? 1 : 1 / Math.max(temperature, 0.01);
    const alts = [
      { token: '"', p: 0.7 },
      { token: ' "', p: 0.2 },
      { token: "\n", p: 0.1 },
    ].map((a) => ({ token: a.token, logprob: scale * Math.log(a.p), bytes: [...Buffer.from(a.token)] }));
    const first = alts[0] as (typeof alts)[number];
    return {
      id: "chatcmpl-fake-inspection",
      object: "chat.completion",
      created: 0,
      model: body.model,
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: first.token },
          finish_reason: "length",
          logprobs: this.inspectionLogprobs ? { content: [{ ...first, top_logprobs: alts }] } : null,
        },
      ],
      usage: { prompt_tokens: promptTokens, completion_tokens: 1, total_tokens: promptTokens + 1 },
    };
  }

  private modelList(): unknown {
    // Each server names itself in owned_by; Ollama's is "library" for its own models.
    const owner = this.flavour === "ollama" ? "library" : this.flavour;
    const data = this.models.map((id) => ({ id, object: "model", created: 0, owned_by: owner }));
    if (this.flavour !== "llama") return { object: "list", data };
    // llama-server (recording 0022) lists the loaded file in an Ollama-style array and an OpenAI one.
    return {
      models: this.models.map((name) => ({ name, model: name, type: "model", capabilities: ["completion"] })),
      object: "list",
      data: data.map((m) => ({ ...m, owned_by: "llamacpp", aliases: [m.id] })),
    };
  }

  private modelNotFound(model: string): unknown {
    if (this.flavour === "ollama") {
      return {
        error: {
          message: `model "${model}" not found, try pulling it first`,
          type: "api_error",
          param: null,
          code: null,
        },
      };
    }
    return {
      object: "error",
      message: `The model \`${model}\` does not exist.`,
      type: "NotFoundError",
      param: null,
      code: 404,
    };
  }

  private contextTooLong(tokens: number): unknown {
    if (this.flavour === "llama") {
      // Recording 0020.
      const ctx = this.sharedContext ?? 4096;
      return {
        error: {
          code: 400,
          message: `request (${tokens} tokens) exceeds the available context size (${ctx} tokens), try increasing it`,
          type: "exceed_context_size_error",
          n_prompt_tokens: tokens,
          n_ctx: ctx,
        },
      };
    }
    return {
      object: "error",
      message: "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens.",
      type: "BadRequestError",
      param: null,
      code: 400,
    };
  }

  /**
   * Reads the questions of a prompt from its question lines (decide/prompt.ts, version 4): `q1 <name>:
   * <instructions> (<outcomes>)`, the kind told by the outcomes (true/false, letters, level numbers).
   */
  static asked(body: Record<string, unknown>): AskedQuestion[] {
    const messages = body.messages as { role: string; content: string }[];
    const user = messages.find((m) => m.role === "user")?.content ?? "";
    const lines = user.split("\n");
    const out: AskedQuestion[] = [];
    for (const line of lines.slice(lines.indexOf("QUESTIONS:") + 1)) {
      const key = QUESTION_LINE.exec(line)?.[1];
      if (key === undefined) continue;
      const named = readText(line, key.length + 1);
      let i = named.end;
      let title = "";
      if (line[i] === ":") {
        i += 2;
        const round = /^\[(options group \d+ of \d+|final round among the groups' best options)\] /.exec(line.slice(i));
        if (round) {
          title = round[1]?.startsWith("final") ? "final round among the best options" : (round[1] as string);
          i += round[0].length;
        }
        i = readText(line, i).end;
      }
      const outcomes = line.slice(i, i + 2) === " (" ? readOutcomes(line, i + 2) : [];
      const first = outcomes[0]?.code;
      const kind = first === "true" || first === "false" ? "noul" : first === "0" ? "score" : "choice";
      const codes: (string | number | boolean)[] =
        kind === "noul" ? [true, false] : kind === "score" ? outcomes.map((_, level) => level) : [];
      const question: AskedQuestion = {
        key,
        name: String(named.value),
        kind,
        codes,
        labels: kind === "choice" ? [] : codes.map(String),
        title:
          kind === "noul"
            ? "yes/no"
            : kind === "score"
              ? `score 0-${codes.length - 1}`
              : title === ""
                ? "choice"
                : `choice, ${title}`,
      };
      if (kind === "choice") {
        for (const o of outcomes) {
          question.codes.push(o.code);
          question.labels.push(o.label as string);
        }
      }
      out.push(question);
    }
    return out;
  }

  /** The question a probe asks (from its prefill) and the part of the value's text the prefill holds. */
  static probed(body: Record<string, unknown>): { question: AskedQuestion; opened: "" | " " | ' "' } {
    const messages = body.messages as { role: string; content: string }[];
    const last = messages[messages.length - 1];
    const match = last?.role === "assistant" ? PREFILL.exec(last.content) : null;
    if (match === null) throw new Error("the fake answers probes only: the last message must be a prefill");
    const question = FakeUpstream.asked(body).find((q) => q.key === match[1]);
    if (question === undefined) throw new Error(`no question ${match[1]} in the prompt`);
    return { question, opened: (match[2] ?? "") as "" | " " | ' "' };
  }

  private complete(body: Record<string, unknown>, fault: Fault | undefined): unknown {
    const { question: q, opened } = FakeUpstream.probed(body);
    const target = this.script(q, body);
    const weights = q.labels.map((l) => Math.max(0, target[l] ?? 0));
    const total = weights.reduce((a, b) => a + b, 0);
    const probs = weights.map((w) => (total > 0 ? w / total : 1 / weights.length));
    this.reported.push({
      name: q.name,
      key: q.key,
      probabilities: Object.fromEntries(q.labels.map((l, i) => [l, probs[i] as number])),
    });
    const junk = fault === "junkOnly" ? 1 : this.flavour === "llama" ? this.junk : 0;
    const alts: Alt[] = [];
    q.codes.forEach((code, i) => {
      for (const [token, share] of this.forms(code, opened))
        alts.push({ token, p: (probs[i] as number) * (1 - junk) * share });
    });
    if (junk > 0) {
      const junkTokens = this.junkTokens(q, opened);
      for (const [k, alt] of junkTokens.entries()) alts.push({ ...alt, p: junk / 2 ** (k + 1) });
    }
    const positive = alts.filter((a) => a.p > 0).sort((a, b) => b.p - a.p);
    const topN = Math.min(Number(body.top_logprobs ?? 0), 20);
    const emitted = positive[0] ?? { token: "", p: 1 };
    const entry = (a: Alt) => ({ token: a.token, logprob: Math.log(a.p), bytes: a.bytes ?? [...Buffer.from(a.token)] });
    // The prompt's shared prefix is cached per slot on llama.cpp (the slot the call names, or none), and for
    // every sequence on vLLM; a call that finds it cached reports all but its last 10 tokens as cached.
    const prefix = JSON.stringify((body.messages as unknown[]).slice(0, -1));
    const slot = typeof body.id_slot === "number" ? body.id_slot % this.slots : undefined;
    const seen =
      this.flavour === "llama"
        ? slot !== undefined && this.slotPrefixes.get(slot) === prefix
        : this.prefixes.has(prefix);
    const cached = seen ? this.promptTokens - 10 : 0;
    this.prefixes.add(prefix);
    if (slot !== undefined) this.slotPrefixes.set(slot, prefix);
    if (fault === "malformed")
      return { id: "chatcmpl-fake", object: "chat.completion", created: 0, model: body.model, choices: [] };
    if (fault === "piece" && body.grammar === undefined) {
      return {
        id: "chatcmpl-fake",
        object: "chat.completion",
        created: 0,
        model: body.model,
        choices: [{ index: 0, message: { role: "assistant", content: lastContent(body) }, finish_reason: "length" }],
        usage: { prompt_tokens: this.promptTokens, completion_tokens: 1, total_tokens: this.promptTokens + 1 },
      };
    }
    return {
      id: "chatcmpl-fake",
      object: "chat.completion",
      created: 0,
      model: body.model,
      choices: [
        {
          index: 0,
          // llama-server returns the prefill and its continuation as one trimmed content (recorded on
          // b10573); logprobs keep the token as it is.
          message: {
            role: "assistant",
            content: this.flavour === "llama" ? `${lastContent(body)}${emitted.token}`.trim() : emitted.token,
          },
          finish_reason: "length",
          logprobs:
            fault === "noLogprobs"
              ? null
              : { content: [{ ...entry(emitted), top_logprobs: positive.slice(0, topN).map(entry) }] },
        },
      ],
      usage: {
        prompt_tokens: this.promptTokens,
        completion_tokens: 1,
        total_tokens: this.promptTokens + 1,
        ...(this.flavour === "llama" ? { prompt_tokens_details: { cached_tokens: cached } } : {}),
      },
    };
  }

  /**
   * How each flavour's tokenizer writes an outcome's value after the prefill, with the share of the
   * outcome's probability each form gets: split (` t`), whole (` true`) or glued to what follows (`B"}`).
   */
  private forms(code: string | number | boolean, opened: "" | " " | ' "'): [string, number][] {
    const text = String(code);
    if (opened === ' "') {
      // Inside the string: the letter, the letter with the closing quote, or with the quote and brace.
      return this.flavour === "llama"
        ? [
            [text, 0.7],
            [`${text}"`, 0.2],
            [`${text}"}`, 0.1],
          ]
        : [[text, 1]];
    }
    if (typeof code === "number") {
      // Digits carry no leading space in the Qwen2 vocabulary (recordings, point 4).
      return this.flavour === "llama"
        ? [
            [text, 0.8],
            [`${text}}`, 0.2],
          ]
        : [[text, 1]];
    }
    if (this.flavour === "vllm") return [[text === "true" ? "tr" : "f", 1]];
    return this.flavour === "llama"
      ? [
          [` ${text}`, 0.6],
          [text, 0.2],
          [` ${text.slice(0, 1)}`, 0.1],
          [` ${text},`, 0.1],
        ]
      : [[` ${text}`, 1]];
  }

  /** Tokens a raw llama.cpp distribution holds at a value's position that begin no single outcome. */
  private junkTokens(q: AskedQuestion, opened: "" | " " | ' "'): Omit<Alt, "p">[] {
    const list: Omit<Alt, "p">[] = [
      // Whitespace runs and a newline could precede any value: they name no outcome.
      { token: "   " },
      { token: "\n\n" },
      // A partial UTF-8 piece, and the empty end-of-generation token.
      { token: "", bytes: [230, 161] },
      { token: "", bytes: [] },
      { token: "Sure" },
    ];
    if (opened === ' "') {
      // Unquoted forms are not valid inside the string the prefill opened (recordings: ` B` beside `"C`).
      list.unshift({ token: ` ${String(q.codes[0])}` }, { token: `"${String(q.codes[0])}` });
    } else if (opened === "") {
      // A bare quote could open a string (no outcome here); `:t` repeats the colon the prefill already has.
      list.unshift({ token: ' "' }, { token: ":t" });
    } else {
      list.unshift({ token: " " }, { token: `-${String(q.codes[0])}` });
    }
    return list;
  }
}

function lastContent(body: Record<string, unknown>): string {
  const messages = body.messages as { content: string }[];
  return messages[messages.length - 1]?.content ?? "";
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

const NATIVE_ROUTES = ["/apply-template", "/tokenize", "/completion"];

/** The fake's special tokens, as llama-server's Qwen2.5 vocabulary spells them (ids 0 and 1). */
const SPECIALS = ["<|im_start|>", "<|im_end|>"];
const SPECIAL_SPLIT = /(<\|im_start\|>|<\|im_end\|>)/;
/** Characters per ordinary token: about what a BPE vocabulary averages on English and code. */
const CHUNK = 4;
/** The fake's vocabulary of ordinary tokens, grown as texts are tokenized (the same text, the same id, in every fake). */
const vocabulary = new Map<string, number>();
const pieces: string[] = [...SPECIALS];

/**
 * A tokenizer like llama.cpp's in what the packed path relies on: the text is split at special tokens first
 * (when `parseSpecial`), and each stretch between them is tokenized on its own, here in runs of CHUNK
 * characters from its start.
 */
export function fakeTokens(text: string, parseSpecial = true): number[] {
  const ordinary = (stretch: string) => {
    const chars = [...stretch];
    const ids: number[] = [];
    for (let i = 0; i < chars.length; i += CHUNK) {
      const piece = chars.slice(i, i + CHUNK).join("");
      let id = vocabulary.get(piece);
      if (id === undefined) {
        id = pieces.push(piece) - 1;
        vocabulary.set(piece, id);
      }
      ids.push(id);
    }
    return ids;
  };
  if (!parseSpecial) return ordinary(text);
  return text
    .split(SPECIAL_SPLIT)
    .flatMap((stretch) => (SPECIALS.includes(stretch) ? [SPECIALS.indexOf(stretch)] : ordinary(stretch)));
}

function pieceOf(id: number): string {
  return pieces[id] ?? "";
}

/** `/tokenize`: ids, or `{ id, piece }` with `with_pieces` (no BOS: the fake's model has none, as Qwen2.5). */
function tokenizeBody(body: Record<string, unknown>): unknown[] {
  const ids = fakeTokens(String(body.content ?? ""), body.parse_special !== false);
  return body.with_pieces === true ? ids.map((id) => ({ id, piece: pieceOf(id) })) : ids;
}

/** The prompts of a `/completion` body: a string, a list of ids and strings, or a list of those. */
function promptsOf(prompt: unknown): string[] {
  const one = (p: unknown): string =>
    typeof p === "string"
      ? p
      : (p as unknown[]).map((part) => (typeof part === "number" ? pieceOf(part) : String(part))).join("");
  if (Array.isArray(prompt) && prompt.length > 0 && prompt.every((p) => Array.isArray(p) || typeof p === "string")) {
    return prompt.every((p) => typeof p === "string") && prompt.length === 1 ? [prompt[0] as string] : prompt.map(one);
  }
  return [one(prompt)];
}

/** The chat messages a ChatML prompt holds (a last `<|im_start|>assistant` block without its end is the prefill). */
function messagesOf(prompt: string): { role: string; content: string }[] {
  return prompt
    .split("<|im_start|>")
    .slice(1)
    .map((block) => {
      const newline = block.indexOf("\n");
      const content = block.slice(newline + 1);
      const end = content.lastIndexOf("<|im_end|>\n");
      return { role: block.slice(0, newline), content: end >= 0 ? content.slice(0, end) : content };
    });
}

interface ChatAnswer {
  choices: {
    message: { content: string };
    logprobs: {
      content: { token: string; logprob: number; bytes: number[]; top_logprobs: { logprob: number }[] }[];
    } | null;
  }[];
  usage: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens: number } };
}

/** A chat answer as llama-server's `/completion` writes one prompt's result, reduced to `fields` when given. */
function nativeResult(chat: ChatAnswer, index: number, prompt: string, fields: unknown): unknown {
  const choice = chat.choices[0];
  const first = choice?.logprobs?.content?.[0];
  const cached = chat.usage.prompt_tokens_details?.cached_tokens ?? 0;
  const full: Record<string, unknown> = {
    index,
    content: first?.token ?? "",
    tokens: [],
    id_slot: 0,
    stop: true,
    model: "fake",
    tokens_predicted: chat.usage.completion_tokens,
    tokens_evaluated: chat.usage.prompt_tokens,
    generation_settings: { n_predict: 1, temperature: 0 },
    prompt,
    stop_type: "limit",
    tokens_cached: chat.usage.prompt_tokens,
    timings: { cache_n: cached, prompt_n: chat.usage.prompt_tokens - cached, predicted_n: 1 },
    ...(first === undefined ? {} : { completion_probabilities: [{ id: 0, ...first }] }),
  };
  if (!Array.isArray(fields)) return full;
  // llama-server's json_get_nested_values: each path's value under the path itself, absent paths left out.
  const picked: Record<string, unknown> = {};
  for (const path of fields as string[]) {
    let value: unknown = full;
    for (const key of path.split("/")) {
      value = typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined;
    }
    if (value !== undefined) picked[path] = value;
  }
  return picked;
}
