import { z } from "zod";
import { JsonValue } from "../core/json";

/**
 * OpenAI's Decisions dialect (`POST /v1/decisions`), as the official `openai` npm package 7.59.0 declares it
 * (`resources/decisions.d.ts`): what `client.decisions.create()` sends and reads. Every object is strict, as
 * OpenAI's API and vLLM refuse unknown fields: a misspelt field is a 400 naming it, never silently ignored.
 * The decider's own limits beside the SDK's types are named here (DECISIONS_LIMITS) and in docs/decisions.md.
 */

export const DECISIONS_LIMITS = {
  /** OpenAI's 1–400 questions (the decider's LOCALDECIDER_MAX_QUESTIONS caps it further, as a 413). */
  maxQuestions: 400,
  /** 2–255 unique values per choice (the SDK's documented range). */
  minChoices: 2,
  maxChoices: 255,
  /** 2–10 levels per score: one digit each, as System One's scores (the chat probe reads one digit). */
  minLevels: 2,
  maxLevels: 10,
  /**
   * `safety_identifier`: at most 64 characters, the limit of the same field in OpenAI's Responses API, which
   * the SDK says it matches. Never logged in clear.
   */
  maxSafetyIdentifier: 64,
  /** `prompt_cache_key`: at most 1024 characters (a key is hashed before it is used or logged). */
  maxPromptCacheKey: 1024,
} as const;

/**
 * Adds `type: "message"` to an input item that has a `role` and no `type` (the SDK makes it optional), so
 * that the items are told apart by `type` and each fault is named at its own field. Typed as the schema it
 * wraps, as the clients' input types must stay those of the SDK.
 */
function messageTypeOptional<S extends z.ZodType>(schema: S): z.ZodType<z.output<S>, z.input<S>> {
  return z.preprocess(
    (value) =>
      typeof value === "object" && value !== null && !Array.isArray(value) && !("type" in value) && "role" in value
        ? { ...value, type: "message" }
        : value,
    schema,
  ) as unknown as z.ZodType<z.output<S>, z.input<S>>;
}

const Text = (what: string) => z.string({ error: `${what} must be text` });

export const DecisionPromptCacheBreakpoint = z.strictObject({ mode: z.literal("explicit") });

export const DecisionInputText = z.strictObject({
  type: z.literal("input_text"),
  text: Text("text"),
  prompt_cache_breakpoint: DecisionPromptCacheBreakpoint.nullable().optional(),
});
export type DecisionInputText = z.infer<typeof DecisionInputText>;

/** A data URL (`data:image/png;base64,…`) or an https URL; the decider takes data URLs of PNG or JPEG only. */
export const DecisionInputImage = z.strictObject({
  type: z.literal("input_image"),
  image_url: Text("image_url").min(1, "image_url must hold a data URL or an https URL"),
  detail: z.enum(["low", "high", "auto", "original"]).nullable().optional(),
  prompt_cache_breakpoint: DecisionPromptCacheBreakpoint.nullable().optional(),
});
export type DecisionInputImage = z.infer<typeof DecisionInputImage>;

export const DecisionInputJson = z.strictObject({
  type: z.literal("input_json"),
  data: z.union([z.record(z.string(), JsonValue), z.array(z.record(z.string(), JsonValue))], {
    error: "data must be a JSON object or an array of JSON objects",
  }),
});
export type DecisionInputJson = z.infer<typeof DecisionInputJson>;

export const DecisionInputPart = z.discriminatedUnion("type", [
  DecisionInputText,
  DecisionInputImage,
  DecisionInputJson,
]);
export type DecisionInputPart = z.infer<typeof DecisionInputPart>;

/** A question's instructions as parts: text, images and JSON (no cache breakpoints there). */
export const DecisionQuestionInputPart = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("input_text"), text: Text("text") }),
  DecisionInputImage.omit({ prompt_cache_breakpoint: true }),
  DecisionInputJson,
]);
export type DecisionQuestionInputPart = z.infer<typeof DecisionQuestionInputPart>;

const content = <P extends z.ZodType>(part: P) => z.union([Text("content"), z.array(part)]);

const MessageFields = { type: z.literal("message") };

export const DecisionInputMessage = z.discriminatedUnion("role", [
  z.strictObject({ ...MessageFields, role: z.literal("user"), content: content(DecisionInputPart) }),
  z.strictObject({ ...MessageFields, role: z.literal("developer"), content: content(DecisionInputText) }),
  z.strictObject({ ...MessageFields, role: z.literal("system"), content: content(DecisionInputText) }),
  z.strictObject({
    ...MessageFields,
    role: z.literal("assistant"),
    phase: z.enum(["commentary", "final_answer"]).nullable().optional(),
    content: content(
      z.discriminatedUnion("type", [
        z.strictObject({ type: z.literal("output_text"), text: Text("text") }),
        z.strictObject({ type: z.literal("refusal"), refusal: Text("refusal") }),
      ]),
    ),
  }),
]);
export type DecisionInputMessage = z.infer<typeof DecisionInputMessage>;

const ItemFields = {
  id: z.string().nullable().optional(),
  status: z.enum(["in_progress", "completed", "incomplete"]).nullable().optional(),
};
const ToolOutput = z.union([
  Text("output"),
  z.array(z.discriminatedUnion("type", [DecisionInputText, DecisionInputImage])),
]);

export const DecisionInputFunctionCall = z.strictObject({
  type: z.literal("function_call"),
  call_id: Text("call_id").min(1),
  name: Text("name").min(1),
  arguments: Text("arguments"),
  namespace: z.string().nullable().optional(),
  ...ItemFields,
});
export const DecisionInputFunctionCallOutput = z.strictObject({
  type: z.literal("function_call_output"),
  call_id: Text("call_id").min(1),
  output: ToolOutput,
  ...ItemFields,
});
export const DecisionInputCustomToolCall = z.strictObject({
  type: z.literal("custom_tool_call"),
  call_id: Text("call_id").min(1),
  name: Text("name").min(1),
  input: Text("input"),
  namespace: z.string().nullable().optional(),
  ...ItemFields,
});
export const DecisionInputCustomToolCallOutput = z.strictObject({
  type: z.literal("custom_tool_call_output"),
  call_id: Text("call_id").min(1),
  output: ToolOutput,
  ...ItemFields,
});

export const DecisionInputItem = messageTypeOptional(
  z.union([
    DecisionInputMessage,
    z.discriminatedUnion("type", [
      DecisionInputFunctionCall,
      DecisionInputFunctionCallOutput,
      DecisionInputCustomToolCall,
      DecisionInputCustomToolCallOutput,
    ]),
  ]),
);
export type DecisionInputItem = z.infer<typeof DecisionInputItem>;

/** Text that is not empty (nor whitespace), or a non-empty list of parts. */
export const DecisionInstructions = z.union(
  [
    Text("instructions").refine((t) => t.trim() !== "", "instructions must not be empty"),
    z.array(DecisionQuestionInputPart).min(1, "instructions must hold at least one part"),
  ],
  { error: "instructions are required: text, or a list of input_text, input_image and input_json parts" },
);

const QuestionName = z.string().min(1, "a name must not be empty").optional();

/** A choice's value: a string and a boolean with the same text are two values. */
export const DecisionChoiceValue = z.union([z.string().min(1, "a choice's value must not be empty"), z.boolean()], {
  error: "a choice's value must be a string or a boolean",
});

export const DecisionPredicateQuestion = z.strictObject({
  type: z.literal("predicate"),
  instructions: DecisionInstructions,
  name: QuestionName,
});
export const DecisionChoiceQuestion = z.strictObject({
  type: z.literal("choice"),
  instructions: DecisionInstructions,
  name: QuestionName,
  choices: z
    .array(z.strictObject({ value: DecisionChoiceValue, description: z.string().optional() }))
    .min(DECISIONS_LIMITS.minChoices, `a choice needs at least ${DECISIONS_LIMITS.minChoices} choices`)
    .max(DECISIONS_LIMITS.maxChoices, `a choice allows at most ${DECISIONS_LIMITS.maxChoices} choices`)
    .superRefine((choices, ctx) => {
      const seen = new Map<string, number>();
      for (const [i, choice] of choices.entries()) {
        // Typed: "true" and true are two values.
        const key = `${typeof choice.value}:${String(choice.value)}`;
        const first = seen.get(key);
        if (first !== undefined) {
          ctx.addIssue({
            code: "custom",
            path: [i, "value"],
            message: `the value ${JSON.stringify(choice.value)} is already choice ${first}: each choice must be unique`,
          });
        } else seen.set(key, i);
      }
    }),
});
export const DecisionScoreQuestion = z.strictObject({
  type: z.literal("score"),
  instructions: DecisionInstructions,
  name: QuestionName,
  levels: z
    .array(
      z.strictObject({
        label: z.string().min(1, "a level's label must not be empty"),
        description: z.string().optional(),
      }),
    )
    .min(DECISIONS_LIMITS.minLevels, `a score needs at least ${DECISIONS_LIMITS.minLevels} levels`)
    .max(DECISIONS_LIMITS.maxLevels, `a score allows at most ${DECISIONS_LIMITS.maxLevels} levels`),
});
export const DecisionQuestion = z.discriminatedUnion("type", [
  DecisionPredicateQuestion,
  DecisionChoiceQuestion,
  DecisionScoreQuestion,
]);
export type DecisionQuestion = z.infer<typeof DecisionQuestion>;

/** Body of `POST /v1/decisions`. */
export const DecisionCreateRequest = z
  .strictObject({
    model: z.string({ error: "model is required: the model's name" }).min(1),
    input: z.union([Text("input"), z.array(DecisionInputItem).min(1, "input must hold at least one item")], {
      error: "input is required: text, or a list of messages and tool items",
    }),
    questions: z
      .array(DecisionQuestion, { error: "questions is required: a list of questions" })
      .min(1, "questions must hold at least one question")
      .max(DECISIONS_LIMITS.maxQuestions, `at most ${DECISIONS_LIMITS.maxQuestions} questions`),
    prompt_cache_key: z.string().max(DECISIONS_LIMITS.maxPromptCacheKey).nullable().optional(),
    prompt_cache_options: z
      .strictObject({ mode: z.enum(["implicit", "explicit"]).nullable().optional(), ttl: z.literal("30m").optional() })
      .nullable()
      .optional(),
    safety_identifier: z
      .string()
      .max(DECISIONS_LIMITS.maxSafetyIdentifier, `at most ${DECISIONS_LIMITS.maxSafetyIdentifier} characters`)
      .nullable()
      .optional(),
  })
  .superRefine((body, ctx) => {
    // Each tool output must follow the call it answers (by call ID), as OpenAI's API requires.
    if (!Array.isArray(body.input)) return;
    const calls = new Set<string>();
    for (const [i, item] of (body.input as unknown[]).entries()) {
      if (typeof item !== "object" || item === null) continue;
      const { type, call_id: id } = item as { type?: unknown; call_id?: unknown };
      if (typeof id !== "string") continue;
      if (type === "function_call" || type === "custom_tool_call") calls.add(`${type}:${id}`);
      const answered =
        type === "function_call_output"
          ? "function_call"
          : type === "custom_tool_call_output"
            ? "custom_tool_call"
            : undefined;
      if (answered !== undefined && !calls.has(`${answered}:${id}`)) {
        ctx.addIssue({
          code: "custom",
          path: ["input", i, "call_id"],
          message: `no ${answered} with call_id ${JSON.stringify(id)} comes before this output`,
        });
      }
    }
  });
export type DecisionCreateRequest = z.infer<typeof DecisionCreateRequest>;
export type DecisionCreateParams = z.input<typeof DecisionCreateRequest>;

const Probability = z.number().min(0).max(1);

export const DecisionAnswer = z.discriminatedUnion("type", [
  z.object({ type: z.literal("predicate"), name: z.string().nullable(), probability: Probability }),
  z.object({
    type: z.literal("choice"),
    name: z.string().nullable(),
    choice: z.union([z.string(), z.boolean()]),
    probabilities: z.array(z.object({ value: z.union([z.string(), z.boolean()]), probability: Probability })),
    confidence: Probability,
  }),
  z.object({
    type: z.literal("score"),
    name: z.string().nullable(),
    score: z.number().min(0),
    probabilities: z.array(z.object({ value: z.number().int().min(0), label: z.string(), probability: Probability })),
    confidence: Probability,
  }),
  /** The question was declined (no evidence for it, or the model server refused it); the others are answered. */
  z.object({ type: z.literal("refusal"), name: z.string().nullable() }),
]);
export type DecisionAnswer = z.infer<typeof DecisionAnswer>;

const Count = z.number().int().min(0);

export const DecisionUsage = z.object({
  /** Every prompt token of the request's upstream calls, those taken from a prompt cache included. */
  input_tokens: Count,
  input_tokens_details: z.object({ cached_tokens: Count, cache_write_tokens: Count }),
  output_tokens: Count,
  output_tokens_details: z.object({ reasoning_tokens: Count }),
  total_tokens: Count,
});
export type DecisionUsage = z.infer<typeof DecisionUsage>;

/** 200 body of `POST /v1/decisions`. */
export const Decision = z.object({ model: z.string(), answers: z.array(DecisionAnswer), usage: DecisionUsage });
export type Decision = z.infer<typeof Decision>;

/** OpenAI's error envelope, which the `openai` SDK reads into its error classes: every `/v1/decisions` error. */
export const OpenAIErrorBody = z.object({
  error: z.object({
    message: z.string(),
    type: z.string(),
    /** The request field at fault, as a path (`questions[0].choices`), or null. */
    param: z.string().nullable(),
    /** The decider's error code (`invalid_request`, `queue_full`, …), or null. */
    code: z.string().nullable(),
  }),
});
export type OpenAIErrorBody = z.infer<typeof OpenAIErrorBody>;
