import type { ValidationIssue } from "@localdecider/contracts";
import { IMAGES_HEADER, type SystemOneRequest } from "@localdecider/contracts/decider";
import type { UpstreamAccepts } from "../backend";
import { deciderError } from "../errors";

/**
 * Jev 1.14's images and `box` questions at the door: opted into by the client (the header), and passed on only
 * when the backend takes them. This is the one place that decides it: a backend whose upstream accepts images
 * (`UpstreamAccepts.images`, reported by a native System One server) gets them; every other is named in a 422.
 */

/** What of Jev 1.14's image features a request uses, as the paths its refusal names. */
export function imageParts(request: SystemOneRequest): string[] {
  const parts = Object.keys(request.assets ?? {}).length > 0 ? ["assets"] : [];
  for (const [name, question] of Object.entries(request.questions)) {
    if (question.type === "box") parts.push(`questions.${name}.type`);
  }
  return parts;
}

/** Whether the header opts in: `true` in any case, as TypeSafe's clients send it. */
export function imagesOptedIn(header: string | undefined): boolean {
  return header?.trim().toLowerCase() === "true";
}

/**
 * Refuses a request that uses images or box questions (422): without the opt-in header (`invalid_request`,
 * naming each part), or while the backend cannot answer them (`images_unsupported`, naming the backend). A
 * request without either passes untouched.
 */
export function admitImages(request: SystemOneRequest, header: string | undefined, accepts: UpstreamAccepts): void {
  const parts = imageParts(request);
  if (parts.length === 0) return;
  if (!imagesOptedIn(header)) {
    const message = `images and box questions are opt-in: send the header ${IMAGES_HEADER}: true`;
    const details: ValidationIssue[] = parts.map((path) => ({ path, message }));
    throw deciderError("invalid_request", message, { details });
  }
  if (!accepts.images) {
    throw deciderError(
      "images_unsupported",
      `images and box questions need a native System One upstream; this decider runs ${accepts.runs}`,
    );
  }
}
