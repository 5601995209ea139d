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

export const NoulQuestion = z.object({
  type: z.literal("noul"),
  instructions: Entry.optional(),
  criteria: z.object({ true: Entry.optional(), false: Entry.optional() }).nullable().optional(),
});
export type NoulQuestion = z.infer<typeof NoulQuestion>;

export const ChoiceQuestion = z.object({
  type: z.literal("choice"),
  instructions: Entry.optional(),
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
  instructions: Entry.optional(),
  criteria: z
    .array(Entry)
    .min(MIN_SCORE_LEVELS, `a score needs at least ${MIN_SCORE_LEVELS} levels`)
    .max(MAX_SCORE_LEVELS, `a score allows at most ${MAX_SCORE_LEVELS} levels`),
});
export type ScoreQuestion = z.infer<typeof ScoreQuestion>;

export const Question = z.discriminatedUnion("type", [NoulQuestion, ChoiceQuestion, ScoreQuestion]);
export type Question = z.infer<typeof Question>;

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
  })
  .refine((body) => body.state !== undefined, {
    path: ["state"],
    message: "state is required: a string, a JSON object or array, or null",
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

export const Answer = z.discriminatedUnion("type", [NoulAnswer, ChoiceAnswer, ScoreAnswer]);
export type Answer = z.infer<typeof Answer>;

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

/** What answers the questions: a model server (LOCALDECIDER_UPSTREAM) or the embedded engine. */
export const BackendInfo = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("server"), address: z.string(), model: z.string() }),
  z.object({
    kind: z.literal("embedded"),
    /** LOCALDECIDER_MODEL, without credentials. */
    source: z.string(),
    /** `ready`, or what /ready says while it is not (`downloading model (42 %)`, `loading model`, a failure). */
    state: z.string(),
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
  z.strictObject({ active: z.literal(false) }),
  z.strictObject({
    active: z.literal(true),
    method: z.literal("temperature"),
    version: z.number().int(),
    fitted_at: z.string(),
    data: z.object({ records: z.number().int(), answers: z.number().int(), source: z.string().optional() }),
    temperatures: z.object({
      types: z.object({ noul: z.number().optional(), choice: z.number().optional(), score: z.number().optional() }),
      names: z.record(z.string(), z.object({ type: z.enum(["noul", "choice", "score"]), temperature: z.number() })),
    }),
  }),
]);
export type ModelsCalibration = z.infer<typeof ModelsCalibration>;

/** 200 body of `GET /v1/models` (what the SDK's `models.list()` unwraps: `models`; the rest is ours). */
export const ModelsResponse = z.object({
  models: z.array(ModelCard),
  backend: BackendInfo.optional(),
  calibration: ModelsCalibration.optional(),
});
export type ModelsResponse = z.infer<typeof ModelsResponse>;

/** One model server as the decider's `GET /ready` lists it (with several, LOCALDECIDER_UPSTREAM=a,b). */
export const DeciderServerState = z.object({
  /** Its address without credentials. */
  server: z.string(),
  /** `ready`: it takes new requests; `out`: it failed and is probed in the background until it rejoins. */
  state: z.enum(["ready", "out"]),
  reason: z.string().optional(),
});
export type DeciderServerState = z.infer<typeof DeciderServerState>;

/** 200 body of the decider's `GET /ready`: `servers` when LOCALDECIDER_UPSTREAM lists several. */
export const DeciderReadyResponse = z.object({
  status: z.literal("ready"),
  upstream: z.string(),
  model: z.string(),
  servers: z.array(DeciderServerState).optional(),
});
export type DeciderReadyResponse = z.infer<typeof DeciderReadyResponse>;

/** Every error code the decider answers with, and the one HTTP status each goes with. */
export const DECIDER_ERROR_STATUS = {
  invalid_json: 400,
  invalid_request: 400,
  unknown_model: 400,
  context_too_long: 400,
  request_aborted: 400,
  unauthorized: 401,
  not_found: 404,
  method_not_allowed: 405,
  payload_too_large: 413,
  unsupported_media_type: 415,
  host_not_allowed: 421,
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
