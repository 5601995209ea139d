import { SystemOneRequest } from "@localdecider/contracts";
import { validationDetails } from "@localdecider/service-kit";
import type { RequestHandler } from "express";
import type { Decider } from "../decide/decider";
import { deciderError } from "../errors";
import { MODEL_ALIASES, MODEL_NAME } from "../models";
import { inputLimitIssue } from "./input-limits";

export const ACCEPTED_MODELS: readonly string[] = [MODEL_NAME, ...MODEL_ALIASES];

export function systemOne(decider: Decider): RequestHandler {
  return async (req, res) => {
    const tooLarge = inputLimitIssue(req.body);
    if (tooLarge !== undefined) throw deciderError("invalid_request", "Invalid request body", { details: [tooLarge] });
    const parsed = SystemOneRequest.safeParse(req.body);
    if (!parsed.success) {
      throw deciderError("invalid_request", "Invalid request body", {
        details: validationDetails(parsed.error, { root: "body" }),
      });
    }
    const { model, state, questions } = parsed.data;
    if (!ACCEPTED_MODELS.includes(model)) {
      throw deciderError("unknown_model", `Unknown model "${model}"; available models: ${ACCEPTED_MODELS.join(", ")}`);
    }
    // A client that goes away cancels its queued calls and aborts its in-flight ones.
    const cancel = new AbortController();
    const onClose = () => {
      if (!res.writableEnded) cancel.abort();
    };
    res.on("close", onClose);
    try {
      res.json(await decider.answer(state, questions, cancel.signal));
    } finally {
      res.off("close", onClose);
    }
  };
}
