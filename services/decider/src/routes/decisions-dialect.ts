import type { JsonValue } from "@localdecider/contracts";
import {
  type Decision,
  type DecisionAnswer,
  type DecisionCreateRequest,
  type DecisionInputImage,
  type DecisionQuestion,
  ImageAsset,
} from "@localdecider/contracts/decider";
import type { AppError } from "@localdecider/service-kit";
import type { UpstreamAccepts } from "../backend";
import { argmax, choiceConfidence, scoreStats } from "../decide/math";
import type { DecisionTask, TaskOption, TaskQuestion, TaskResult } from "../decide/task";
import { deciderError } from "../errors";

/**
 * OpenAI's Decisions dialect at the edge (docs/decisions.md): a request as the decider's task, and its result
 * back as OpenAI's answers, in question order. How each part maps:
 * - `input`: a string is the state as it is; a list of items becomes one titled section per item, in order,
 *   naming its role (or its tool call), which the prompt shows as the state's sections;
 * - parts: text as it is, JSON as indented JSON, an image as `[image: image-N]` beside the image itself
 *   (passed as an asset, only to a server that takes images; any other backend is a 400 naming the part);
 * - predicate → a yes/no question; choice → its values as the options (typed, by index); score → its levels.
 */

/** What a request's items and instructions became: the state, the images by name, and where each came from. */
interface Rendered {
  assets: Record<string, ImageAsset>;
  accepts: UpstreamAccepts;
  /** Where the first image part is (`input[0].content[1]`), for a refusal that comes later. */
  firstImage?: string;
}

export interface DecisionsTask {
  task: DecisionTask;
  /** Each question's name as the client gave it (null: unnamed), in order. */
  names: (string | null)[];
  /** Where the first image part is, if any (`param` of a refusal of images found only once the servers were checked). */
  firstImage: string | undefined;
}

export function decisionsTask(body: DecisionCreateRequest, accepts: UpstreamAccepts): DecisionsTask {
  const rendered: Rendered = { assets: {}, accepts };
  const state = stateOf(body.input, rendered);
  const ids = new Set<string>();
  const questions = body.questions.map((q, i) => taskQuestion(q, i, ids, rendered));
  return {
    task: {
      model: body.model,
      state,
      ...(Object.keys(rendered.assets).length > 0 ? { assets: rendered.assets } : {}),
      questions,
      partial: true,
      ...(body.prompt_cache_key === undefined || body.prompt_cache_key === null
        ? {}
        : { cacheKey: body.prompt_cache_key }),
    },
    names: body.questions.map((q) => q.name ?? null),
    firstImage: rendered.firstImage,
  };
}

type Input = DecisionCreateRequest["input"];
type Item = Exclude<Input, string>[number];
type Part = { type: "input_text"; text: string } | DecisionInputImage | { type: "input_json"; data: unknown };

function stateOf(input: Input, rendered: Rendered): JsonValue {
  if (typeof input === "string") return input;
  const sections: Record<string, string> = {};
  for (const [i, item] of input.entries()) {
    sections[`${i + 1}. ${titleOf(item)}`] = textOf(item, `input[${i}]`, rendered);
  }
  return sections;
}

function titleOf(item: Item): string {
  switch (item.type) {
    case "message":
      return `${item.role} message`;
    case "function_call":
      return `function call ${item.name} (call_id ${item.call_id})`;
    case "function_call_output":
      return `function call output (call_id ${item.call_id})`;
    case "custom_tool_call":
      return `custom tool call ${item.name} (call_id ${item.call_id})`;
    case "custom_tool_call_output":
      return `custom tool call output (call_id ${item.call_id})`;
  }
}

function textOf(item: Item, at: string, rendered: Rendered): string {
  switch (item.type) {
    case "message": {
      if (typeof item.content === "string") return item.content;
      return item.content
        .map((part, k) => {
          if (part.type === "output_text") return part.text;
          if (part.type === "refusal") return `(refused: ${part.refusal})`;
          return partText(part, `${at}.content[${k}]`, rendered);
        })
        .join("\n\n");
    }
    case "function_call":
      return item.arguments;
    case "custom_tool_call":
      return item.input;
    case "function_call_output":
    case "custom_tool_call_output":
      if (typeof item.output === "string") return item.output;
      return item.output.map((part, k) => partText(part, `${at}.output[${k}]`, rendered)).join("\n\n");
  }
}

/** One part as the model reads it; an image is named in the text and passed beside it. */
function partText(part: Part, at: string, rendered: Rendered): string {
  switch (part.type) {
    case "input_text":
      return part.text;
    case "input_json":
      return JSON.stringify(part.data, null, 2);
    case "input_image": {
      const name = `image-${Object.keys(rendered.assets).length + 1}`;
      rendered.firstImage ??= at;
      rendered.assets[name] = imageAsset(part, at, rendered.accepts);
      return `[image: ${name}]`;
    }
  }
}

/** A data URL of a PNG or JPEG as an image asset; anything else, or a backend without images, is a 400 naming the part. */
function imageAsset(part: DecisionInputImage, at: string, accepts: UpstreamAccepts): ImageAsset {
  if (!accepts.images) {
    throw badParam(
      at,
      `images need a model server that takes them (a native System One server such as llama.cpp's); this decider runs ${accepts.runs}`,
    );
  }
  const match = /^data:image\/(png|jpeg|jpg);base64,(.*)$/s.exec(part.image_url);
  if (match === null) {
    throw badParam(
      `${at}.image_url`,
      "image_url must be a data URL of a PNG or JPEG image (data:image/png;base64,…): this decider fetches no URLs",
    );
  }
  const parsed = ImageAsset.safeParse({
    type: "image",
    format: match[1] === "png" ? "png" : "jpg",
    data_base64: match[2],
  });
  if (!parsed.success) {
    throw badParam(`${at}.image_url`, parsed.error.issues[0]?.message ?? "not a PNG or JPEG image");
  }
  return parsed.data;
}

function taskQuestion(q: DecisionQuestion, i: number, ids: Set<string>, rendered: Rendered): TaskQuestion {
  // Unique ids: the name where it is one, else the position; what the prompt and a model server see.
  let id = q.name ?? `question ${i + 1}`;
  if (ids.has(id)) id = `${id} (question ${i + 1})`;
  for (let n = 2; ids.has(id); n++) id = `${q.name ?? "question"} (${i + 1}.${n})`;
  ids.add(id);
  const instructions =
    typeof q.instructions === "string"
      ? q.instructions
      : q.instructions.map((part, k) => partText(part, `questions[${i}].instructions[${k}]`, rendered)).join("\n\n");
  switch (q.type) {
    case "predicate":
      return {
        id,
        kind: "noul",
        instructions,
        options: [
          { label: "true", description: undefined },
          { label: "false", description: undefined },
        ],
      };
    case "score":
      return {
        id,
        kind: "score",
        instructions,
        options: q.levels.map((level, k) => ({
          label: String(k),
          description: level.description === undefined ? level.label : `${level.label}: ${level.description}`,
        })),
      };
    case "choice":
      return { id, kind: "choice", instructions, options: choiceOptions(q.choices) };
  }
}

/**
 * A choice's values as options: a string as its label, a boolean as `true`/`false`, or as `true (boolean)`
 * where the same question also holds the string "true" (labels are what a System One server keys its answer
 * by, so they must differ; the typed value travels beside it, and answers map back by index).
 */
function choiceOptions(
  choices: readonly { value: string | boolean; description?: string | undefined }[],
): TaskOption[] {
  const strings = new Set(choices.flatMap((c) => (typeof c.value === "string" ? [c.value] : [])));
  const labels = new Set<string>();
  return choices.map((c) => {
    let label =
      typeof c.value === "string" ? c.value : strings.has(String(c.value)) ? `${c.value} (boolean)` : String(c.value);
    for (let n = 2; labels.has(label); n++) label = `${String(c.value)} (boolean ${n})`;
    labels.add(label);
    return { label, value: c.value, description: c.description };
  });
}

/** The task's outcomes as OpenAI's answers, in question order; a refused question as `{type: "refusal"}`. */
export function decisionsResponse(body: DecisionCreateRequest, names: (string | null)[], result: TaskResult): Decision {
  const answers = body.questions.map((q, i): DecisionAnswer => {
    const name = names[i] ?? null;
    const outcome = result.outcomes[i];
    if (outcome === undefined || !("distribution" in outcome)) return { type: "refusal", name };
    const dist = outcome.distribution;
    switch (q.type) {
      case "predicate":
        return { type: "predicate", name, probability: dist[0] as number };
      case "choice":
        return {
          type: "choice",
          name,
          choice: q.choices[argmax(dist)]?.value as string | boolean,
          probabilities: q.choices.map((c, k) => ({ value: c.value, probability: dist[k] as number })),
          confidence: choiceConfidence(dist),
        };
      default: {
        // A score (the last type).
        const { score, confidence } = scoreStats(dist);
        return {
          type: "score",
          name,
          score,
          probabilities: q.levels.map((level, k) => ({ value: k, label: level.label, probability: dist[k] as number })),
          confidence,
        };
      }
    }
  });
  const { input, cached, output } = result.usage;
  const inputTokens = input + cached;
  return {
    model: result.model,
    answers,
    usage: {
      input_tokens: inputTokens,
      input_tokens_details: { cached_tokens: cached, cache_write_tokens: 0 },
      output_tokens: output,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: inputTokens + output,
    },
  };
}

/** A 400 naming the field at fault (OpenAI's `param`, see openai-errors.ts). */
export function badParam(param: string, message: string): AppError {
  return deciderError("invalid_request", message, { details: [{ path: param, message }] });
}
