import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A fake OpenAI-compatible model server on a real port. It honours the request's JSON schema, picks each
 * answer from a scripted distribution, and reports logprobs the way llama.cpp, vLLM or Ollama do.
 */
export type Flavour = "llama" | "vllm" | "ollama";

export type Fault =
  | "model404"
  | "http500"
  | "hang"
  | "malformed"
  | "missing"
  | "unknownCode"
  | "truncated"
  | "noLogprobs"
  | "drop"
  | "contextTooLong"
  | "http429";

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

/** Target probabilities per label (over all of a question's labels; the fake conditions on those shown). */
export type Script = (q: AskedQuestion) => Record<string, number>;

interface Token {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

/** A deterministic, uneven default distribution: weight from a hash of question name and label. */
export const hashedScript: Script = (q) =>
  Object.fromEntries(q.labels.map((label) => [label, 1 + (hash(`${q.name}\u0000${label}`) % 97)]));

export function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0;
  return h;
}

const JSON_STRING = /"(?:[^"\\]|\\.)*"/;
const HEADER = new RegExp(`^## Question (q\\d+): (${JSON_STRING.source}) \\(([^)]*)\\)$`);
const OPTION = new RegExp(`^- "([A-Z])": (${JSON_STRING.source})`);

export class FakeUpstream {
  flavour: Flavour;
  /** Model ids listed at /v1/models and accepted by chat (llama.cpp accepts any name, like the real one). */
  models: string[];
  modelsStatus = 200;
  script: Script = hashedScript;
  /** Share of probability the llama flavour gives to junk tokens (unconstrained distribution). */
  junk = 0.1;
  /** Faults applied to the next calls, one each, in order. */
  faults: Fault[] = [];
  /** While true, chat calls wait until release() (or until the client goes away). */
  holding = false;
  usage = { prompt_tokens: 100, completion_tokens: 10 };

  calls = 0;
  inflight = 0;
  maxInflight = 0;
  /** Calls whose client went away before the fake answered. */
  aborted = 0;
  requests: Record<string, unknown>[] = [];
  /** The Authorization header of every request (models and chat), to check the upstream key is sent. */
  authorizations: (string | undefined)[] = [];
  /** [start, end] of every answered chat call, in performance.now() ms (the benchmark subtracts them). */
  busy: [number, number][] = [];

  private server: Server | undefined;
  private waiters: (() => void)[] = [];

  constructor(options: { flavour?: Flavour; models?: string[] } = {}) {
    this.flavour = options.flavour ?? "vllm";
    this.models = options.models ?? ["test-model"];
  }

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        res.statusCode = 500;
        res.end(String(err));
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.release();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }

  release(): void {
    this.holding = false;
    for (const w of this.waiters.splice(0)) w();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? "";
    this.authorizations.push(req.headers.authorization);
    if (req.method === "GET" && url === "/v1/models") {
      if (this.modelsStatus !== 200) return send(res, this.modelsStatus, { error: "not found" });
      return send(res, 200, {
        object: "list",
        data: this.models.map((id) => ({ id, object: "model", created: 0, owned_by: this.flavour })),
      });
    }
    if (req.method !== "POST" || url !== "/v1/chat/completions") return send(res, 404, { error: "no route" });
    const started = performance.now();
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
    this.requests.push(body);
    this.calls += 1;
    this.inflight += 1;
    this.maxInflight = Math.max(this.maxInflight, this.inflight);
    let gone = false;
    res.on("close", () => {
      this.inflight -= 1;
      if (!res.writableFinished) {
        gone = true;
        this.aborted += 1;
      }
    });
    const fault = this.faults.shift();
    if (this.holding || fault === "hang") {
      await new Promise<void>((resolve) => {
        if (fault !== "hang") this.waiters.push(resolve);
        res.on("close", () => resolve());
      });
      if (gone) return;
    }
    if (fault === "drop") {
      req.socket.destroy();
      return;
    }
    const model = String(body.model);
    if (fault === "model404" || (this.flavour !== "llama" && !this.models.includes(model))) {
      return send(res, 404, this.modelNotFound(model));
    }
    if (fault === "http500")
      return send(res, 500, { error: { code: 500, message: "internal error", type: "server_error" } });
    if (fault === "contextTooLong") return send(res, 400, this.contextTooLong());
    if (fault === "http429") {
      res.setHeader("retry-after", "7");
      return send(res, 429, { error: { code: 429, message: "too many requests", type: "rate_limit" } });
    }
    send(res, 200, this.complete(body, fault));
    this.busy.push([started, performance.now()]);
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

  private contextTooLong(): unknown {
    if (this.flavour === "llama") {
      return {
        error: {
          code: 400,
          message: "the request exceeds the available context size, try increasing it",
          type: "exceed_context_size_error",
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

  /** Reads the questions of a call from its prompt (names, choice labels) and its schema (codes). */
  static asked(body: Record<string, unknown>): AskedQuestion[] {
    const messages = body.messages as { role: string; content: string }[];
    const user = messages.find((m) => m.role === "user")?.content ?? "";
    const format = body.response_format as { json_schema: { schema: { properties: Record<string, Prop> } } };
    const props = format.json_schema.schema.properties;
    const out: AskedQuestion[] = [];
    let current: AskedQuestion | undefined;
    for (const line of user.split("\n")) {
      const header = HEADER.exec(line);
      if (header) {
        const key = header[1] as string;
        const prop = props[key] as Prop;
        const kind = prop.type === "boolean" ? "noul" : prop.type === "integer" ? "score" : "choice";
        const codes = prop.type === "boolean" ? [true, false] : (prop.enum ?? []);
        current = {
          key,
          name: JSON.parse(header[2] as string) as string,
          kind,
          codes,
          labels: kind === "choice" ? [] : codes.map(String),
          title: header[3] as string,
        };
        out.push(current);
        continue;
      }
      const option = OPTION.exec(line);
      if (option && current?.kind === "choice") current.labels.push(JSON.parse(option[2] as string) as string);
    }
    return out;
  }

  private complete(body: Record<string, unknown>, fault: Fault | undefined): unknown {
    const questions = FakeUpstream.asked(body);
    const topN = Math.min(Number(body.top_logprobs ?? 0), 20);
    const answers = questions.map((q) => {
      const target = this.script(q);
      const weights = q.labels.map((l) => Math.max(0, target[l] ?? 0));
      const total = weights.reduce((a, b) => a + b, 0);
      const probs = weights.map((w) => (total > 0 ? w / total : 1 / weights.length));
      let best = 0;
      probs.forEach((p, i) => {
        if (p > (probs[best] as number)) best = i;
      });
      return { q, probs, emitted: q.codes[best] as string | number | boolean };
    });
    if (fault === "missing") answers.pop();
    let tokens: Token[] = [];
    const push = (token: string, top: { token: string; p: number }[] = []) => {
      const withSelf = top.some((t) => t.token === token) ? top : [{ token, p: 1 }, ...top];
      const sorted = withSelf.sort((a, b) => b.p - a.p).slice(0, Math.max(topN, 1));
      tokens.push({
        token,
        logprob: Math.log(withSelf.find((t) => t.token === token)?.p ?? 1),
        bytes: [...Buffer.from(token)],
        top_logprobs:
          topN === 0
            ? []
            : sorted.map((t) => ({ token: t.token, logprob: Math.log(t.p), bytes: [...Buffer.from(t.token)] })),
      });
    };
    push("{");
    answers.forEach(({ q, probs, emitted }, i) => {
      const value = fault === "unknownCode" && i === 0 ? "Z" : emitted;
      const sep = i === 0 ? "" : ",";
      const spaced = this.flavour !== "vllm";
      push(`${sep}"`);
      push(q.key);
      push(spaced ? `":` : `":`);
      const alts = (render: (code: string | number | boolean) => string) => {
        const list = q.codes.map((code, j) => ({
          token: render(code),
          p: (probs[j] as number) * (this.flavour === "llama" ? 1 - this.junk : 1),
        }));
        if (this.flavour === "llama") {
          for (const [k, junk] of [' "', ' "\n', "Sure", " {"].entries())
            list.push({ token: junk, p: this.junk / 2 ** (k + 1) });
        }
        return list.filter((t) => t.p > 0);
      };
      if (this.flavour === "llama") {
        // llama.cpp: the leading space and the opening quote ride on the value token (` "A`).
        const render = (c: string | number | boolean) => (typeof c === "string" ? ` "${c}` : ` ${c}`);
        push(render(value), alts(render));
        if (typeof value === "string") push(`"`);
      } else if (this.flavour === "vllm") {
        // vLLM (constrained): the quote is its own token; booleans span tokens (`tr` + `ue`, `f` + `alse`).
        const head = (c: string | number | boolean) => (c === true ? "tr" : c === false ? "f" : String(c));
        if (typeof value === "string") push(`"`);
        push(head(value), alts(head));
        if (value === true) push("ue");
        if (value === false) push("alse");
        if (typeof value === "string") push(`"`);
      } else {
        // Ollama: leading-space tokens (` true`, ` 3`); a string's code carries its closing quote (`A"`).
        const render = (c: string | number | boolean) => (typeof c === "string" ? `${c}"` : ` ${c}`);
        if (typeof value === "string") push(` "`);
        push(render(value), alts(render));
      }
    });
    push("}");
    let content = tokens.map((t) => t.token).join("");
    let finish = "stop";
    if (fault === "malformed") {
      content = "Sure! Here are the answers you asked for.";
      tokens = [{ token: content, logprob: -0.1, bytes: [], top_logprobs: [] }];
    }
    if (fault === "truncated") {
      content = content.slice(0, Math.floor(content.length / 2));
      finish = "length";
    }
    return {
      id: "chatcmpl-fake",
      object: "chat.completion",
      created: 0,
      model: body.model,
      choices: [
        {
          index: 0,
          message: { role: "assistant", content },
          finish_reason: finish,
          logprobs: fault === "noLogprobs" ? null : { content: tokens },
        },
      ],
      usage: { ...this.usage, total_tokens: this.usage.prompt_tokens + this.usage.completion_tokens },
    };
  }
}

interface Prop {
  type: string;
  enum?: (string | number)[];
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}
