import { z } from "zod";
import { JsonValue } from "../core/json";

/**
 * The decider's wire protocol: TypeSafe's hosted System One API (`POST /v1/systemone`, `GET /v1/models`),
 * as the official `@typesafe-ai/sdk` 0.6.0 declares it, plus this service's error codes.
 */

/** Text, a JSON object or array, or null: state, instructions and every description. */
export const Entry = z.union([z.string(), z.record(z.string(), JsonValue), z.array(JsonValue), z.null()]);
export type Entry = z.infer<typeof Entry>;

export const MAX_CHOICE_LABELS = 255;

/**
 * Refuses a `__proto__` key (question name or choice label): zod's records silently drop it (assigning
 * it would set the prototype), so its answer would be missing. Checked on the raw input, before zod.
 */
function refuseProtoKey<S extends z.ZodType>(schema: S): z.ZodType<z.output<S>, z.input<S>> {
  // Typed as the schema it wraps: a preprocess step takes `unknown`, which would untype the clients' input.
  return z.preprocess((value, ctx) => {
    if (typeof value === "object" && value !== null && Object.hasOwn(value, "__proto__")) {
      ctx.addIssue({ code: "custom", path: ["__proto__"], message: '"__proto__" cannot be used as a name or label' });
    }
    return value;
  }, schema) as unknown as z.ZodType<z.output<S>, z.input<S>>;
}
export const MIN_SCORE_LEVELS = 2;
export const MAX_SCORE_LEVELS = 10;

/**
 * The question put to the model: required and not empty (the seed: "instructions | string | yes"; llama.cpp's
 * decision server refuses a missing or null one). Text, as the seed has it, or a JSON object or array, which
 * the SDK's types also allow (shown to the model as JSON). Absent, null, "", whitespace, {} and [] are refused.
 */
export const Instructions = z
  .union([z.string(), z.record(z.string(), JsonValue), z.array(JsonValue)], {
    error: (issue) =>
      issue.input === undefined || issue.input === null
        ? "instructions are required: the question put to the model, as text (or a JSON object or array)"
        : "instructions must be text, a JSON object or a JSON array",
  })
  .refine(
    (value) =>
      typeof value === "string"
        ? value.trim() !== ""
        : Array.isArray(value)
          ? value.length > 0
          : Object.keys(value).length > 0,
    "instructions must not be empty",
  );
export type Instructions = z.infer<typeof Instructions>;

export const NoulQuestion = z.object({
  type: z.literal("noul"),
  instructions: Instructions,
  criteria: z.object({ true: Entry.optional(), false: Entry.optional() }).nullable().optional(),
});
export type NoulQuestion = z.infer<typeof NoulQuestion>;

export const ChoiceQuestion = z.object({
  type: z.literal("choice"),
  instructions: Instructions,
  criteria: refuseProtoKey(
    z
      .record(z.string().min(1, "a label must not be empty"), Entry)
      .refine((c) => Object.keys(c).length >= 1, "a choice needs at least 1 label")
      .refine((c) => Object.keys(c).length <= MAX_CHOICE_LABELS, `a choice allows at most ${MAX_CHOICE_LABELS} labels`),
  ),
});
export type ChoiceQuestion = z.infer<typeof ChoiceQuestion>;

export const ScoreQuestion = z.object({
  type: z.literal("score"),
  instructions: Instructions,
  criteria: z
    .array(Entry)
    .min(MIN_SCORE_LEVELS, `a score needs at least ${MIN_SCORE_LEVELS} levels`)
    .max(MAX_SCORE_LEVELS, `a score allows at most ${MAX_SCORE_LEVELS} levels`),
});
export type ScoreQuestion = z.infer<typeof ScoreQuestion>;

/**
 * Jev 1.14's `box` question (opt-in, see IMAGES_HEADER): where in an image the thing its instructions name
 * is ("the coffee mug in `photo`"). It takes no criteria. Answered by a native System One upstream only.
 */
export const BoxQuestion = z.object({
  type: z.literal("box"),
  instructions: Instructions,
});
export type BoxQuestion = z.infer<typeof BoxQuestion>;

/** The questions answered from token probabilities (every backend): noul, choice and score. */
export const TextQuestion = z.discriminatedUnion("type", [NoulQuestion, ChoiceQuestion, ScoreQuestion]);
export type TextQuestion = z.infer<typeof TextQuestion>;

export const Question = z.discriminatedUnion("type", [NoulQuestion, ChoiceQuestion, ScoreQuestion, BoxQuestion]);
export type Question = z.infer<typeof Question>;

/**
 * The request header that opts into Jev 1.14's images (`assets`) and `box` questions, as TypeSafe's API has
 * it: `TypeSafe-Danger-Zone-Images: true`. Without it, a request holding either is refused (422).
 */
export const IMAGES_HEADER = "TypeSafe-Danger-Zone-Images";

/** The most questions one request may hold by default (LOCALDECIDER_MAX_QUESTIONS; llama.cpp's limit too). */
export const DEFAULT_MAX_QUESTIONS = 4096;

export const IMAGE_FORMATS = ["png", "jpg"] as const;

/** The first bytes of each format's files: PNG's 8-byte signature, JPEG's start-of-image marker. */
const IMAGE_SIGNATURES: Record<(typeof IMAGE_FORMATS)[number], { name: string; bytes: number[] }> = {
  png: { name: "PNG", bytes: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] },
  jpg: { name: "JPEG", bytes: [0xff, 0xd8, 0xff] },
};

/** Standard base64 (RFC 4648 section 4, padded), no `data:` prefix, no line breaks. */
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function isBase64(text: string): boolean {
  return text.length % 4 === 0 && BASE64.test(text);
}

/** Whether base64 text (already checked to be base64) begins with these bytes. */
function startsWithBytes(base64: string, bytes: number[]): boolean {
  const head = atob(base64.slice(0, 4 * Math.ceil(bytes.length / 3)));
  return bytes.every((byte, i) => head.charCodeAt(i) === byte);
}

/**
 * One image of Jev 1.14's `assets` map: a PNG or JPEG file in standard base64. The format must match the
 * file's first bytes, so a mislabelled file is refused here rather than misread by a model.
 */
export const ImageAsset = z
  .object({
    type: z.literal("image"),
    format: z.enum(IMAGE_FORMATS),
    data_base64: z
      .string()
      .min(1, "data_base64 must hold the image file")
      .refine(
        isBase64,
        "data_base64 must be standard base64 (A-Z, a-z, 0-9, + and /, padded with =) without a data: prefix",
      ),
  })
  .superRefine((asset, ctx) => {
    // zod runs this even when a field failed (its own issue says why): only a known format's base64 is read.
    const signature = Object.hasOwn(IMAGE_SIGNATURES, asset.format) ? IMAGE_SIGNATURES[asset.format] : undefined;
    const data: unknown = asset.data_base64;
    if (signature === undefined || typeof data !== "string" || data === "" || !isBase64(data)) return;
    if (!startsWithBytes(asset.data_base64, signature.bytes)) {
      ctx.addIssue({
        code: "custom",
        path: ["data_base64"],
        message: `the file is not a ${signature.name} image (its first bytes are not ${signature.name}'s signature) although format is "${asset.format}"`,
      });
    }
  });
export type ImageAsset = z.infer<typeof ImageAsset>;

const isObject = (value: unknown): value is object =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** Every piece of text of a JSON value (strings and object keys), without recursion. */
function textsOf(value: unknown, into: string[]): void {
  const stack = [value];
  while (stack.length > 0) {
    const next = stack.pop();
    if (typeof next === "string") into.push(next);
    else if (Array.isArray(next)) stack.push(...next);
    else if (typeof next === "object" && next !== null) {
      for (const [key, child] of Object.entries(next)) {
        into.push(key);
        stack.push(child);
      }
    }
  }
}

/**
 * The text an asset may be referenced from: the state, and every question's instructions and criteria. An
 * asset is referenced where its name occurs in that text, as TypeSafe's clients match references (plain text).
 */
function referencingTexts(request: { state?: unknown; questions: Record<string, Question> }): string[] {
  const texts: string[] = [];
  textsOf(request.state, texts);
  for (const question of Object.values(request.questions) as unknown[]) {
    if (!isObject(question)) continue;
    textsOf((question as { instructions?: unknown }).instructions, texts);
    textsOf((question as { criteria?: unknown }).criteria, texts);
  }
  return texts;
}

/** Body of `POST /v1/systemone`. Unknown top-level fields are ignored (the SDK forwards extra fields). */
export const SystemOneRequest = z
  .object({
    model: z.string().min(1),
    // Any JSON value, and required: zod lets an optional key be absent, so presence is checked below with
    // its own message ("Invalid input" from JsonValue alone says nothing).
    state: JsonValue.optional(),
    questions: refuseProtoKey(
      z
        .record(z.string(), Question)
        .refine((q) => Object.keys(q).length >= 1, "questions must hold at least one question"),
    ),
    /**
     * Jev 1.14's images, by name (opt-in, see IMAGES_HEADER): each must be referenced by its name from the
     * state, an instructions or a criteria text. Passed only to a native System One upstream.
     */
    assets: refuseProtoKey(z.record(z.string().min(1, "an asset name must not be empty"), ImageAsset)).optional(),
  })
  .refine((body) => body.state !== undefined, {
    path: ["state"],
    message: "state is required: a string, a JSON object or array, or null",
  })
  .superRefine((body, ctx) => {
    // zod runs this even when a field failed (its own issue says why): only well-formed maps are read.
    const { assets, questions } = body as { assets: unknown; questions: unknown };
    if (!isObject(assets) || !isObject(questions)) return;
    const names = Object.keys(assets);
    if (names.length === 0) return;
    const texts = referencingTexts(body);
    for (const name of names) {
      if (!texts.some((text) => text.includes(name))) {
        ctx.addIssue({
          code: "custom",
          path: ["assets", name],
          message: `asset "${name}" is not referenced: name it in the state, an instructions or a criteria text, or leave it out`,
        });
      }
    }
  });
export type SystemOneRequest = z.infer<typeof SystemOneRequest>;

export const NoulAnswer = z.object({ type: z.literal("noul"), noul: z.number().min(0).max(1) });
export type NoulAnswer = z.infer<typeof NoulAnswer>;

export const ChoiceAnswer = z.object({
  type: z.literal("choice"),
  choice: z.string(),
  probabilities: z.record(z.string(), z.number().min(0).max(1)),
  confidence: z.number().min(0).max(1),
});
export type ChoiceAnswer = z.infer<typeof ChoiceAnswer>;

export const ScoreAnswer = z.object({
  type: z.literal("score"),
  score: z.number().min(0),
  probabilities: z.record(z.string(), z.number().min(0).max(1)),
  confidence: z.number().min(0).max(1),
  legend: z.record(z.string(), Entry),
});
export type ScoreAnswer = z.infer<typeof ScoreAnswer>;

const Fraction = z.number().min(0).max(1);

/**
 * The answer to a `box` question: the edges of a box around what the instructions name, each a fraction of
 * the image's size from its top-left corner (`left`/`right` of the width, `top`/`bottom` of the height), and
 * how sure the model is of it. A box is always returned, even when the thing is absent.
 */
export const BoxAnswer = z.object({
  type: z.literal("box"),
  box: z.object({ top: Fraction, bottom: Fraction, left: Fraction, right: Fraction }),
  confidence: Fraction,
});
export type BoxAnswer = z.infer<typeof BoxAnswer>;

export const Answer = z.discriminatedUnion("type", [NoulAnswer, ChoiceAnswer, ScoreAnswer, BoxAnswer]);
export type Answer = z.infer<typeof Answer>;

/**
 * Tokens of every upstream call of a request: `input_tokens` evaluated (a prompt cache's not counted),
 * `output_tokens` generated (one per call by a model server; none by the embedded engine, which reads the
 * outcomes' probabilities and counts their tokens as input).
 */
export const Usage = z.object({ input_tokens: z.number().int().min(0), output_tokens: z.number().int().min(0) });
export type Usage = z.infer<typeof Usage>;

/** 200 body of `POST /v1/systemone`. */
export const SystemOneResponse = z.object({
  model: z.string(),
  answers: z.record(z.string(), Answer),
  usage: Usage,
});
export type SystemOneResponse = z.infer<typeof SystemOneResponse>;

export const ModelCard = z.object({ name: z.string(), description: z.string(), release_date: z.string() });
export type ModelCard = z.infer<typeof ModelCard>;

/** The embedded engine's model, once loaded. */
export const EmbeddedModelInfo = z.object({
  /** The GGUF file's name. */
  file: z.string(),
  architecture: z.string().optional(),
  /** The weights' type as llama.cpp names it, e.g. `Q4_K_M`. */
  quantization: z.string(),
  size_bytes: z.number().int().min(0),
  /** Tokens per sequence; `sequences` calls run at once (LOCALDECIDER_MAX_INFLIGHT). */
  context_size: z.number().int().min(1),
  sequences: z.number().int().min(1),
  train_context_size: z.number().int().min(0),
});
export type EmbeddedModelInfo = z.infer<typeof EmbeddedModelInfo>;

/**
 * How the decider talks to a model server, found by its start-up check (LOCALDECIDER_UPSTREAM_PROTOCOL):
 * `systemone`, the server answers `POST /v1/systemone` itself (a decision model: llama.cpp, Ollama,
 * LiteLLM, a hosted Jev); `chat`, the decider reads token logprobs from its chat completions; `decisions`, the
 * server answers OpenAI's `POST /v1/decisions` (OpenAI, vLLM 0.33+, LiteLLM), asked the questions as predicates,
 * choices and scores.
 */
export const UpstreamProtocol = z.enum(["systemone", "chat", "decisions"]);
export type UpstreamProtocol = z.infer<typeof UpstreamProtocol>;

/** What answers the questions: a model server (LOCALDECIDER_UPSTREAM) or the embedded engine. */
export const BackendInfo = z.discriminatedUnion("kind", [
  z.object({
    kind: z.literal("server"),
    /**
     * The model servers, comma separated: their addresses without credentials to a caller holding
     * LOCALDECIDER_API_KEY; without a key set, their labels (`server 1,server 2`).
     */
    address: z.string(),
    model: z.string(),
    /** One model server: the protocol its start-up check found (absent until it answered the check). */
    protocol: UpstreamProtocol.optional(),
    /** Several model servers: each one's protocol (`server` named as in `address`). */
    servers: z.array(z.object({ server: z.string(), protocol: UpstreamProtocol.optional() })).optional(),
  }),
  z.object({
    kind: z.literal("embedded"),
    /** LOCALDECIDER_MODEL: an hf: URI, a path, or a URL's scheme, host and path (no credentials, no query). */
    source: z.string(),
    /** `ready`, or what /ready says while it is not (`downloading model (42 %)`, `loading model`, a failure). */
    state: z.string(),
    /**
     * The same, for programs: `failed` will not change without a restart (a download or load that failed);
     * the others are on their way to `ready`. Absent from deciders older than this field.
     */
    phase: z.enum(["starting", "verifying", "downloading", "loading", "ready", "failed", "closed"]).optional(),
    /** `cpu`, or the GPU backend in use (`cuda`, `vulkan`, `metal`); absent until loaded. */
    gpu: z.string().optional(),
    model: EmbeddedModelInfo.optional(),
  }),
]);
export type BackendInfo = z.infer<typeof BackendInfo>;

/**
 * The decider's calibration as `GET /v1/models` shows it: inactive, or the loaded file's fit date, data size
 * and temperatures (LOCALDECIDER_CALIBRATION; see calibration.ts).
 */
export const ModelsCalibration = z.union([
  z.strictObject({
    active: z.literal(false),
    /** The decider's prompt version: what a calibration fitted now is fitted on. */
    prompt_version: z.string().optional(),
  }),
  z.strictObject({
    active: z.literal(true),
    method: z.literal("temperature"),
    version: z.number().int(),
    fitted_at: z.string(),
    /** The decider's prompt version: what a calibration fitted now is fitted on. */
    prompt_version: z.string().optional(),
    /** The prompt version the file was fitted on (absent: the file does not say). */
    fitted_prompt_version: z.string().optional(),
    /** Set when the file was fitted on another prompt version (or does not say): its temperatures may not fit. */
    warning: z.string().optional(),
    data: z.object({ records: z.number().int(), answers: z.number().int(), source: z.string().optional() }),
    temperatures: z.object({
      types: z.object({ noul: z.number().optional(), choice: z.number().optional(), score: z.number().optional() }),
      names: z.record(z.string(), z.object({ type: z.enum(["noul", "choice", "score"]), temperature: z.number() })),
    }),
  }),
]);
export type ModelsCalibration = z.infer<typeof ModelsCalibration>;

/** A model as OpenAI's `GET /v1/models` lists it (what the `openai` SDK's `client.models.list()` pages through). */
export const OpenAIModel = z.object({
  id: z.string(),
  object: z.literal("model"),
  /** Unix seconds: the card's release date. */
  created: z.number().int(),
  owned_by: z.string(),
});
export type OpenAIModel = z.infer<typeof OpenAIModel>;

/**
 * 200 body of `GET /v1/models`: TypeSafe's SDK's `models.list()` unwraps `models`; the `openai` SDK's reads
 * `object: "list"` and `data` (the same models, as OpenAI lists them); `backend` and `calibration` are ours.
 */
export const ModelsResponse = z.object({
  models: z.array(ModelCard),
  object: z.literal("list").optional(),
  data: z.array(OpenAIModel).optional(),
  backend: BackendInfo.optional(),
  calibration: ModelsCalibration.optional(),
});
export type ModelsResponse = z.infer<typeof ModelsResponse>;

/** One model server as the decider's `GET /ready` lists it (with several, LOCALDECIDER_UPSTREAM=a,b). */
export const DeciderServerState = z.object({
  /** Its address without credentials to a caller holding LOCALDECIDER_API_KEY; to anyone else `server <n>`. */
  server: z.string(),
  /** `ready`: it takes new requests; `out`: it failed and is probed in the background until it rejoins. */
  state: z.enum(["ready", "out"]),
  reason: z.string().optional(),
  /** The protocol its start-up check found (absent until it answered the check). */
  protocol: UpstreamProtocol.optional(),
});
export type DeciderServerState = z.infer<typeof DeciderServerState>;

/**
 * 200 body of the decider's `GET /ready`: `servers` when LOCALDECIDER_UPSTREAM lists several. `upstream` is
 * `embedded`, or the model servers comma separated: addresses to a caller holding LOCALDECIDER_API_KEY,
 * labels (`server 1,server 2`) to anyone else.
 */
export const DeciderReadyResponse = z.object({
  status: z.literal("ready"),
  upstream: z.string(),
  model: z.string(),
  /** One model server: the protocol its start-up check found (`servers` carry theirs with several). */
  protocol: UpstreamProtocol.optional(),
  servers: z.array(DeciderServerState).optional(),
  /**
   * Where MAX_INFLIGHT and MAX_QUEUE are counted: `shared through Redis` (LOCALDECIDER_REDIS_URL: every replica
   * with that Redis shares them), or `this process` (each replica counts alone, so N replicas admit N times the
   * limits: fine for one replica, or for the embedded engine, where each replica is its own model server).
   * Absent from deciders older than this field.
   */
  limits: z.enum(["this process", "shared through Redis"]).optional(),
});
export type DeciderReadyResponse = z.infer<typeof DeciderReadyResponse>;

/** Every error code the decider answers with, and the one HTTP status each goes with. */
export const DECIDER_ERROR_STATUS = {
  invalid_json: 400,
  unknown_model: 400,
  context_too_long: 400,
  request_aborted: 400,
  unauthorized: 401,
  not_found: 404,
  method_not_allowed: 405,
  payload_too_large: 413,
  too_many_questions: 413,
  unsupported_media_type: 415,
  host_not_allowed: 421,
  /** Validation, as Jev and llama.cpp answer it (422): the body's schema, its shape limits, the images opt-in. */
  invalid_request: 422,
  images_unsupported: 422,
  queue_full: 429,
  internal_error: 500,
  upstream_unreachable: 502,
  upstream_error: 502,
  upstream_malformed: 502,
  no_logprobs: 502,
  upstream_busy: 503,
  model_unavailable: 503,
  backend_not_ready: 503,
  limiter_unavailable: 503,
  upstream_timeout: 504,
} as const;
export const DeciderErrorCode = z.enum(
  Object.keys(DECIDER_ERROR_STATUS) as [keyof typeof DECIDER_ERROR_STATUS, ...(keyof typeof DECIDER_ERROR_STATUS)[]],
);
export type DeciderErrorCode = z.infer<typeof DeciderErrorCode>;

/** The decider's error body: contracts' ErrorBody with `code` always present. */
export const DeciderErrorBody = z.object({
  error: z.string(),
  code: DeciderErrorCode,
  details: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
});
export type DeciderErrorBody = z.infer<typeof DeciderErrorBody>;
