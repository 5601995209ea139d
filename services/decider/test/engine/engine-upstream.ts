import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { closeAbruptly, listenOnLoopback } from "../loopback-server";
import type { TinyEngine } from "./engine";

/** A chat message as the OpenAI chat API carries it. */
export interface ChatMessage {
  role: string;
  content: string;
}

/**
 * The Qwen2.5 ChatML prompt llama-server renders for these messages: each message closed by
 * `<|im_end|>`, except a final assistant message, which is continued (llama.cpp's default prefill).
 */
export function renderChatML(messages: readonly ChatMessage[]): string {
  const last = messages[messages.length - 1];
  const prefill = last?.role === "assistant";
  const closed = prefill ? messages.slice(0, -1) : messages;
  const text = closed.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join("");
  return prefill ? `${text}<|im_start|>assistant\n${last.content}` : `${text}<|im_start|>assistant\n`;
}

/** The `n` most likely tokens of a distribution, most likely first. */
export function topTokens(logprobs: Float64Array, n: number): number[] {
  const top: number[] = [];
  for (let id = 0; id < logprobs.length; id++) {
    const lp = logprobs[id] as number;
    if (top.length === n && lp <= (logprobs[top[n - 1] as number] as number)) continue;
    let i = top.length === n ? n - 1 : top.length;
    while (i > 0 && (logprobs[top[i - 1] as number] as number) < lp) i--;
    top.splice(i, 0, id);
    if (top.length > n) top.pop();
  }
  return top;
}

/**
 * An OpenAI-compatible server on a real port whose answers come from a real llama.cpp engine
 * (node-llama-cpp) over a GGUF file, shaped like llama-server's (b10573, see the recordings): the raw
 * distribution's top alternatives with `token` and `bytes`, any model name accepted, `/v1/models` in the
 * OpenAI and the Ollama shape, cached prompt tokens reported. One token per call, at temperature 0.
 */
export class EngineUpstream {
  /** Every chat call's rendered prompt, in arrival order. */
  prompts: string[] = [];
  /**
   * [start, end] of every answered chat call, as absolute times in ms (`performance.timeOrigin` +
   * `performance.now()`), comparable across processes on one machine (the benchmark subtracts them).
   */
  busy: [number, number][] = [];
  private server: Server | undefined;
  private lastTokens: number[] = [];

  constructor(
    private readonly engine: TinyEngine,
    private readonly modelName: string,
  ) {}

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => send(res, 500, { error: { code: 500, message: String(err) } }));
    });
    return `http://127.0.0.1:${await listenOnLoopback(this.server)}`;
  }

  async stop(): Promise<void> {
    await closeAbruptly(this.server);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method === "GET" && req.url === "/bench/busy") return send(res, 200, this.busy.splice(0));
    if (req.method === "GET" && req.url === "/v1/models") {
      const id = this.modelName;
      return send(res, 200, {
        models: [{ name: id, model: id, type: "model", capabilities: ["completion"] }],
        object: "list",
        data: [{ id, aliases: [id], object: "model", created: 0, owned_by: "llamacpp" }],
      });
    }
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") return send(res, 404, { error: "no route" });
    const started = performance.timeOrigin + performance.now();
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
      messages: ChatMessage[];
      top_logprobs?: number;
      logprobs?: boolean;
    };
    const prompt = renderChatML(body.messages);
    this.prompts.push(prompt);
    const tokens = this.engine.tokenize(prompt);
    let cached = 0;
    while (cached < tokens.length - 1 && tokens[cached] === this.lastTokens[cached]) cached++;
    this.lastTokens = tokens;
    const top = await this.engine.nextTop(tokens, Math.max(1, Math.min(body.top_logprobs ?? 0, 20)));
    const entry = ({ id, logprob }: { id: number; logprob: number }) => {
      const piece = this.engine.piece(id);
      return { id, token: piece.text, bytes: piece.bytes, logprob };
    };
    const emitted = entry(top[0] as { id: number; logprob: number });
    send(res, 200, {
      choices: [
        {
          finish_reason: "length",
          index: 0,
          // llama-server trims message.content; logprobs keep the token as it is.
          message: { role: "assistant", content: emitted.token.trim() },
          logprobs: body.logprobs ? { content: [{ ...emitted, top_logprobs: top.map(entry) }] } : null,
        },
      ],
      created: 0,
      model: this.modelName,
      object: "chat.completion",
      usage: {
        completion_tokens: 1,
        prompt_tokens: tokens.length,
        total_tokens: tokens.length + 1,
        prompt_tokens_details: { cached_tokens: cached },
      },
    });
    this.busy.push([started, performance.timeOrigin + performance.now()]);
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}
