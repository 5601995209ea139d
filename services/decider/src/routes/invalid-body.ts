import type { ValidationIssue } from "@localdecider/contracts";
import { ACCEPTED_MODELS } from "../models";

/**
 * The text of a 400 `invalid_request` for a body its contract refused. A missing or malformed `model` is
 * answered as an unknown one is (`unknown_model`): with the names this service accepts, which the contracts
 * cannot know; every other problem keeps the schema's own words in `details`.
 */
export function invalidBody(
  body: unknown,
  details: ValidationIssue[],
): { message: string; details: ValidationIssue[] } {
  const model = details.find((d) => d.path === "model");
  if (model === undefined) return { message: "Invalid request body", details };
  const names = ACCEPTED_MODELS.join(", ");
  const missing = typeof body === "object" && body !== null && (body as { model?: unknown }).model === undefined;
  return {
    message: `${missing ? "Missing model" : "Invalid model"}; available models: ${names}`,
    details: details.map((d) =>
      d === model
        ? { path: d.path, message: `${missing ? "required" : "must be a model's name"}: one of ${names}` }
        : d,
    ),
  };
}
