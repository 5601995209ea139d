import { LOG_LEVELS } from "@localdecider/service-kit";
import { z } from "zod";

const int = (min: number, fallback: number) => z.coerce.number().int().min(min).default(fallback);

/**
 * The decider's whole environment. Keys are the variable names and each carries its documented default
 * (the seed's sample values), so the README's config table can be derived from this schema.
 */
export const configSchema = z
  .object({
    LOCALDECIDER_HOST: z.string().default("127.0.0.1"),
    LOCALDECIDER_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
    // llama.cpp's `llama-server --port 8081`: its own default port (8080) is ours. The address excludes `/v1`.
    LOCALDECIDER_UPSTREAM: z.url().default("http://127.0.0.1:8081"),
    LOCALDECIDER_UPSTREAM_MODEL: z.string().default("qwen2.5-1.5b-instruct"),
    LOCALDECIDER_UPSTREAM_API_KEY: z.string().optional(),
    LOCALDECIDER_API_KEY: z.string().optional(),
    /** Seconds one decision may take in all: queued calls, calls and retries (504 past it). */
    LOCALDECIDER_TIMEOUT: z.coerce.number().positive().default(180),
    LOCALDECIDER_MAX_INFLIGHT: int(1, 2),
    // Upstream calls admitted and not yet finished. A call answers one question (a choice of over 20 labels
    // takes one per 20 labels, plus one), so this also caps the questions of one request.
    LOCALDECIDER_MAX_QUEUE: int(0, 256),
    LOCALDECIDER_MALFORMED_RETRIES: int(0, 2),
    // Kept so that existing configurations still boot: since prompt version 2 every call decodes one token.
    LOCALDECIDER_MAX_OUTPUT_TOKENS: int(16, 2048),
    // Questions rendered in one prompt, the prefix their calls share (a server's prompt cache reuses it).
    LOCALDECIDER_QUESTIONS_PER_CALL: int(1, 16),
    // Outcomes rendered in one prompt; at least 20 so that any choice chunk fits one prompt.
    LOCALDECIDER_OUTCOMES_PER_CALL: int(20, 128),
    // A backend that reports no logprobs fails every decision with 502 no_logprobs unless this is true;
    // then each answer is the emitted outcome with probability 1.
    LOCALDECIDER_ALLOW_NO_LOGPROBS: z.stringbool().default(false),
    LOCALDECIDER_BODY_LIMIT: z.string().default("1mb"),
    LOG_LEVEL: z.enum(LOG_LEVELS).default("info"),
  })
  .superRefine((config, ctx) => {
    // Credentials in the URL are sent as basic auth; with an API key as well, which one to send is a guess.
    const url = new URL(config.LOCALDECIDER_UPSTREAM);
    if ((url.username !== "" || url.password !== "") && config.LOCALDECIDER_UPSTREAM_API_KEY !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["LOCALDECIDER_UPSTREAM"],
        message:
          "carries credentials (sent as basic auth) while LOCALDECIDER_UPSTREAM_API_KEY is set too (sent as a bearer): keep one of them",
      });
    }
  });

export type Config = z.infer<typeof configSchema>;
