import path from "node:path";
import { DEFAULT_MAX_QUESTIONS } from "@localdecider/contracts/decider";
import {
  allowedHostsSchema,
  byteSize,
  connectionLimit,
  connectionLimitsProblem,
  corsOriginsSchema,
  isBearerToken,
  LOG_LEVELS,
  logFormatSchema,
} from "@localdecider/service-kit";
import { z } from "zod";
import { DEFAULT_MODEL, parseModelSource } from "./engine/model-source";
import { parseUpstreams } from "./upstream/address";

const int = (min: number, max: number, fallback: number) => z.coerce.number().int().min(min).max(max).default(fallback);
const text = (fallback?: string) => (fallback === undefined ? z.string().min(1) : z.string().min(1).default(fallback));

/**
 * The decider's whole environment. Keys are the variable names and each carries its documented default
 * (the seed's sample values), so the README's config table can be derived from this schema.
 */
export const configSchema = z
  .object({
    LOCALDECIDER_HOST: text("127.0.0.1"),
    LOCALDECIDER_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
    // Host names the service answers for besides the loopback names and LOCALDECIDER_HOST (DNS rebinding): a
    // comma list of names, addresses and `.domain`s, or `*` for any. Unset: those alone without an API key,
    // no check with LOCALDECIDER_API_KEY set. See hostPolicy in the service kit.
    LOCALDECIDER_ALLOWED_HOSTS: allowedHostsSchema().optional(),
    /** Browser origins allowed to call the API (CORS), a comma list; unset: no CORS headers (off). */
    LOCALDECIDER_CORS_ORIGINS: corsOriginsSchema().optional(),
    /**
     * The decision playground, a page at GET /playground (docs/playground.md): true or false. Unset: on when
     * LOCALDECIDER_HOST is a loopback address (127.0.0.1 or another 127.x.y.z, ::1, localhost), off otherwise
     * (0.0.0.0 in the Docker image and compose): a page for the person at this machine, not for everyone the
     * port reaches. Off, /playground is a 404 like any unknown path. See playgroundEnabled.
     */
    LOCALDECIDER_PLAYGROUND: z.stringbool().optional(),
    // Set: an OpenAI-compatible model server (e.g. llama.cpp's `llama-server --port 8081`), without `/v1`, or
    // several separated by commas (each gets MAX_INFLIGHT; requests spread by least load, with failover).
    // Unset: the embedded engine runs LOCALDECIDER_MODEL in this process.
    LOCALDECIDER_UPSTREAM: z
      .string()
      .max(64 * 2048)
      .superRefine((value, ctx) => {
        const parsed = parseUpstreams(value);
        if ("problem" in parsed) ctx.addIssue({ code: "custom", message: parsed.problem });
      })
      .optional(),
    LOCALDECIDER_UPSTREAM_MODEL: text("qwen2.5-1.5b-instruct"),
    // How each model server is asked: `auto` finds out at its start-up check (what it publishes, a probe
    // last; OpenAI's Decisions dialect only as a last resort, when neither System One nor a usable chat path
    // answers); `systemone` sends POST /v1/systemone (a decision model answers itself); `chat` reads token
    // logprobs from chat completions; `decisions` sends OpenAI's POST /v1/decisions (OpenAI, vLLM 0.33+,
    // LiteLLM; SGLang's own /v1/decisions dialect is refused). See docs/upstreams.md.
    LOCALDECIDER_UPSTREAM_PROTOCOL: z.enum(["auto", "systemone", "chat", "decisions"]).default("auto"),
    LOCALDECIDER_UPSTREAM_API_KEY: text().optional(),
    // Embedded engine: a GGUF path, an http(s) URL (its credentials are sent as basic auth, to its own origin
    // only, and shown nowhere) or hf:<user>/<repo>/<file>.gguf[#branch].
    LOCALDECIDER_MODEL: text(DEFAULT_MODEL),
    // Embedded engine: where downloaded models are kept (default: the per-user cache directory).
    LOCALDECIDER_MODELS_DIR: text().optional(),
    // Embedded engine: the model file must have this SHA-256, checked after a download and before every load
    // (a plain path too). Unset: a download is checked against the hash the hub states, if any, and a kept
    // file against the hash recorded at its download.
    LOCALDECIDER_MODEL_SHA256: z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, "must be 64 hexadecimal digits")
      .transform((s) => s.toLowerCase())
      .optional(),
    // Embedded engine: `auto` lets node-llama-cpp use CUDA, Vulkan or Metal when present; `cpu` never.
    LOCALDECIDER_GPU: z.enum(["auto", "cpu"]).default("auto"),
    // Embedded engine: tokens per sequence (one per MAX_INFLIGHT slot): the longest prompt a call can have.
    // `auto`: the model's training context, at most AUTO_CONTEXT_TOKENS (llama-engine.ts).
    LOCALDECIDER_CONTEXT_SIZE: z
      .union([z.literal("auto"), z.coerce.number().int().min(256).max(1_048_576)], {
        error: 'expected "auto" or a whole number of tokens from 256 to 1048576',
      })
      .default("auto"),
    // Embedded engine: CPU threads per evaluation; 0 means one per math core of the machine.
    LOCALDECIDER_THREADS: int(0, 1024, 0),
    // Embedded engine: MiB for recent states kept beyond the MAX_INFLIGHT sequences, so that a request about
    // a state asked lately (the same diff, the same ticket) reads it from memory instead of evaluating it
    // again. Each kept state is a sequence of the context (context size x the model's KV bytes per token:
    // 224 MiB for Qwen2.5-1.5B at 8192 tokens), at most 4. 1024: four such states. 0: none kept.
    LOCALDECIDER_STATE_CACHE_MIB: int(0, 1_048_576, 1024),
    // A key no client could send as a bearer token (RFC 6750 b64token) would refuse every request: refused here.
    LOCALDECIDER_API_KEY: text()
      .refine(isBearerToken, {
        message:
          "cannot be sent as a bearer token: use letters, digits and - . _ ~ + / only, optionally ending in = (base64, base64url and hex keys all fit)",
      })
      .optional(),
    /** Seconds one decision may take in all: queued calls, calls and retries (504 past it). */
    LOCALDECIDER_TIMEOUT: z.coerce.number().positive().max(86_400).default(180),
    LOCALDECIDER_MAX_INFLIGHT: int(1, 1024, 2),
    // Upstream calls admitted and not yet finished. A call answers one question (a choice of over 20 labels
    // takes one per 20 labels, plus one), so this also caps the questions of one request.
    // 0 would refuse every request.
    LOCALDECIDER_MAX_QUEUE: int(1, 1_000_000, 256),
    // Questions one request may hold: more is a 413 too_many_questions before any question is read (llama.cpp
    // answers 413 past 4096 too). MAX_QUEUE may refuse fewer: a request needing more calls than it holds.
    LOCALDECIDER_MAX_QUESTIONS: int(1, 1_000_000, DEFAULT_MAX_QUESTIONS),
    // Set: every replica with this Redis and prefix shares MAX_INFLIGHT (per model server) and MAX_QUEUE.
    // Unset: this process's limits alone, and no Redis client is loaded.
    LOCALDECIDER_REDIS_URL: z
      .url({ protocol: /^rediss?$/, error: "must be a redis:// or rediss:// URL" })
      .max(2048)
      .optional(),
    // Every key and channel starts with it: deployments (or tests) sharing one Redis keep apart.
    LOCALDECIDER_REDIS_PREFIX: z
      .string()
      .regex(/^[\w:.-]{1,100}$/, "must be 1-100 letters, digits, `_`, `-`, `.` or `:`")
      .default("localdecider:"),
    // A replica not heard from for this long (killed, frozen, cut off) loses its reservations; each
    // replica renews its lease every third of it. Longer than any pause of a replica's event loop.
    LOCALDECIDER_REDIS_LEASE_MS: int(1000, 600_000, 15_000),
    LOCALDECIDER_MALFORMED_RETRIES: int(0, 10, 2),
    // Kept so that existing configurations still boot: since prompt version 2 every call decodes one token.
    LOCALDECIDER_MAX_OUTPUT_TOKENS: int(16, 1_000_000, 2048),
    // Questions rendered in one prompt, the prefix their calls share (a server's prompt cache reuses it).
    LOCALDECIDER_QUESTIONS_PER_CALL: int(1, 1000, 16),
    // Outcomes rendered in one prompt; at least 20 so that any choice chunk fits one prompt.
    LOCALDECIDER_OUTCOMES_PER_CALL: int(20, 100_000, 128),
    // A backend that reports no logprobs fails every decision with 502 no_logprobs unless this is true;
    // then each answer is the emitted outcome with probability 1.
    LOCALDECIDER_ALLOW_NO_LOGPROBS: z.stringbool().default(false),
    // On a llama.cpp server whose template's seam the start-up check verified, a prompt's questions go in
    // one /completion call (the same tokens and alternatives as one chat call each); false: chat calls.
    LOCALDECIDER_PACK_PROMPTS: z.stringbool().default(true),
    // Bytes, read from `1mb`, `512kb`, `2m`… (never a bare `2` meaning 2 bytes: below 1 KiB is refused).
    LOCALDECIDER_BODY_LIMIT: byteSize({ min: 1024, fallback: "1mb" }),
    // The most bytes read of any one answer of a model server (decisions, model lists, start-up checks);
    // past it the call is aborted and answered 502 upstream_malformed. See upstream/body-limit.ts.
    LOCALDECIDER_UPSTREAM_MAX_BODY: byteSize({ min: 64 * 1024, fallback: "8mb" }),
    // Path of a calibration file written by `pnpm decider eval --fit`; unset = answers as the model gives them.
    // The file itself is checked at boot (a malformed one stops the start, naming the file).
    LOCALDECIDER_CALIBRATION: z.string().min(1).max(4096).optional(),
    // Receiving a request, not answering it (a decision may take LOCALDECIDER_TIMEOUT): a client trickling its
    // headers or body is answered 408 and closed. See the kit's connection-limits.ts.
    LOCALDECIDER_HEADERS_TIMEOUT_MS: connectionLimit("headersTimeoutMs"),
    LOCALDECIDER_REQUEST_TIMEOUT_MS: connectionLimit("requestTimeoutMs"),
    LOCALDECIDER_IDLE_TIMEOUT_MS: connectionLimit("keepAliveTimeoutMs"),
    // Connections held at once; one more is closed as it opens.
    LOCALDECIDER_MAX_CONNECTIONS: connectionLimit("maxConnections"),
    LOCALDECIDER_TIMEOUT_CHECK_MS: connectionLimit("connectionsCheckingIntervalMs"),
    LOG_LEVEL: z.enum(LOG_LEVELS).default("info"),
    /** "json" (one object a line, the default) or "pretty" (one readable line, for development). */
    LOG_FORMAT: logFormatSchema(),
  })
  .superRefine((config, ctx) => {
    const timeouts = connectionLimitsProblem({
      headersTimeoutMs: config.LOCALDECIDER_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: config.LOCALDECIDER_REQUEST_TIMEOUT_MS,
    });
    if (timeouts !== undefined) {
      ctx.addIssue({ code: "custom", path: ["LOCALDECIDER_HEADERS_TIMEOUT_MS"], message: timeouts });
    }
    try {
      // Its form only: HF_ENDPOINT and HF_TOKEN are read (and checked) when the embedded engine is built.
      parseModelSource(config.LOCALDECIDER_MODEL, process.cwd(), {});
    } catch (err) {
      ctx.addIssue({ code: "custom", path: ["LOCALDECIDER_MODEL"], message: (err as Error).message });
    }
    if (config.LOCALDECIDER_UPSTREAM === undefined) {
      // zod runs this even when a field failed; an invalid URL has its own message already.
      const redis = config.LOCALDECIDER_REDIS_URL;
      if (redis !== undefined && URL.canParse(redis) && /^rediss?:$/.test(new URL(redis).protocol)) {
        ctx.addIssue({
          code: "custom",
          path: ["LOCALDECIDER_REDIS_URL"],
          message:
            "is set but LOCALDECIDER_UPSTREAM is not: each replica's embedded engine is its own model server, so there is no shared one to limit",
        });
      }
      if (config.LOCALDECIDER_UPSTREAM_API_KEY !== undefined) {
        ctx.addIssue({
          code: "custom",
          path: ["LOCALDECIDER_UPSTREAM_API_KEY"],
          message: "is set but LOCALDECIDER_UPSTREAM is not (the embedded engine takes no key): set both, or neither",
        });
      }
      return;
    }
    // Credentials in the URL are sent as basic auth; with an API key as well, which one to send is a guess.
    // zod runs this even when a field failed; an invalid list has its own message already.
    const parsed = parseUpstreams(config.LOCALDECIDER_UPSTREAM);
    if ("problem" in parsed) return;
    const withCredentials = parsed.addresses.some((a) => new URL(a).username !== "" || new URL(a).password !== "");
    if (withCredentials && config.LOCALDECIDER_UPSTREAM_API_KEY !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["LOCALDECIDER_UPSTREAM"],
        message:
          "carries credentials (sent as basic auth) while LOCALDECIDER_UPSTREAM_API_KEY is set too (sent as a bearer): keep one of them",
      });
    }
  });

export type Config = z.infer<typeof configSchema>;

/**
 * The directory relative paths in the environment are read from: the one the user ran the command in. pnpm
 * and npm run a package's script in the package's folder and say where they were run in INIT_CWD, so
 * `LOCALDECIDER_CALIBRATION=eval-out/calibration.json pnpm --filter @localdecider/decider start`, run from the
 * repository root, means the root's eval-out (where `pnpm decider eval` wrote it), not services/decider's.
 * Started any other way (`node dist/main.js`, Docker), the working directory.
 */
export function invocationDir(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string {
  const init = env.INIT_CWD;
  return init !== undefined && path.isAbsolute(init) ? init : cwd;
}

/**
 * The config with its relative paths made absolute against `dir` (invocationDir): a model file path and
 * LOCALDECIDER_MODELS_DIR. (LOCALDECIDER_CALIBRATION is resolved by loadCalibration, whose errors show both.)
 */
export function withAbsolutePaths(config: Config, dir: string): Config {
  const source = parseModelSource(config.LOCALDECIDER_MODEL, dir, {});
  const modelsDir = config.LOCALDECIDER_MODELS_DIR;
  return {
    ...config,
    ...(source.kind === "file" ? { LOCALDECIDER_MODEL: source.path } : {}),
    ...(modelsDir === undefined ? {} : { LOCALDECIDER_MODELS_DIR: path.resolve(dir, modelsDir) }),
  };
}

/** The embedded engine's model file, when LOCALDECIDER_MODEL is a path (not a download, not a model server). */
export function embeddedModelFile(config: Config): string | undefined {
  if (config.LOCALDECIDER_UPSTREAM !== undefined) return undefined;
  const source = parseModelSource(config.LOCALDECIDER_MODEL, process.cwd(), {});
  return source.kind === "file" ? source.path : undefined;
}

/** Whether a listen address is a loopback one: only this machine's clients reach it. */
export function isLoopbackHost(host: string): boolean {
  const name = host
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, "$1");
  return name === "localhost" || name === "::1" || /^127(\.\d{1,3}){3}$/.test(name);
}

/**
 * Whether GET /playground is served: LOCALDECIDER_PLAYGROUND when set; unset, only when the service listens on
 * loopback, where the page's reader is the person at this machine.
 */
export function playgroundEnabled(config: Pick<Config, "LOCALDECIDER_PLAYGROUND" | "LOCALDECIDER_HOST">): boolean {
  return config.LOCALDECIDER_PLAYGROUND ?? isLoopbackHost(config.LOCALDECIDER_HOST);
}
