import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

export interface FakeModelServer {
  /** Its address, as LOCALDECIDER_UPSTREAM takes it (no /v1). */
  url: string;
  /** The one model it lists, for LOCALDECIDER_UPSTREAM_MODEL. */
  model: string;
  close(): Promise<void>;
}

/**
 * An OpenAI-compatible model server on 127.0.0.1 that a server-mode decider finds ready: it lists one model
 * and passes the decider's start-up checks (one-token chat calls): it continues a prefill (one prompt token
 * more for the one-character prefill) and reports the same top_logprobs at every temperature. Every chat
 * call answers the same token.
 */
export async function startFakeModelServer(): Promise<FakeModelServer> {
  const model = "m";
  const server = createServer((req, res) => {
    res.setHeader("content-type", "application/json");
    if (req.url === "/v1/models") {
      res.end(JSON.stringify({ object: "list", data: [{ id: model, object: "model" }] }));
      return;
    }
    if (req.url !== "/v1/chat/completions") {
      res.writeHead(404).end("{}");
      return;
    }
    let body = "";
    req.on("data", (chunk: Buffer) => {
      body += chunk.toString("utf8");
    });
    req.on("end", () => {
      const messages = (JSON.parse(body) as { messages: { role: string }[] }).messages;
      const prefilled = messages[messages.length - 1]?.role === "assistant";
      const top = [
        { token: '"', logprob: Math.log(0.9), bytes: [34] },
        { token: " ", logprob: Math.log(0.1), bytes: [32] },
      ];
      res.end(
        JSON.stringify({
          id: "c",
          object: "chat.completion",
          created: 0,
          model,
          choices: [
            {
              index: 0,
              message: { role: "assistant", content: '"' },
              finish_reason: "length",
              logprobs: { content: [{ ...top[0], top_logprobs: top }] },
            },
          ],
          usage: { prompt_tokens: prefilled ? 11 : 10, completion_tokens: 1, total_tokens: 12 },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    model,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
