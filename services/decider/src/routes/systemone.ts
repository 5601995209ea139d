import { SystemOneRequest, type ValidationIssue } from "@localdecider/contracts";
import type { RequestHandler } from "express";
import type { z } from "zod";
import type { Decider } from "../decide/decider";
import { deciderError } from "../errors";
import { MODEL_ALIASES, MODEL_NAME } from "../models";

export const ACCEPTED_MODELS: readonly string[] = [MODEL_NAME, ...MODEL_ALIASES];

/** Zod issues as `{ path: "questions.q1.criteria", message }`; the body itself is `body`. */
export function validationIssues(error: z.ZodError): ValidationIssue[] {
  return error.issues.map((issue) => ({
    path: issue.path.length === 0 ? "body" : issue.path.map(String).join("."),
    // A bad record key says only "Invalid key in record"; the key schema's own message says why.
    message: issue.code === "invalid_key" ? issue.issues.map((i) => i.message).join("; ") : issue.message,
  }));
}

export function systemOne(decider: Decider): RequestHandler {
  return async (req, res) => {
    const parsed = SystemOneRequest.safeParse(req.body);
    if (!parsed.success) {
      throw deciderError("invalid_request", "Invalid request body", { details: validationIssues(parsed.error) });
    }
    const { model, state, questions } = parsed.data;
    if (!ACCEPTED_MODELS.includes(model)) {
      throw deciderError("unknown_model", `Unknown model "${model}"; available models: ${ACCEPTED_MODELS.join(", ")}`);
    }
    const plan = decider.plan(questions);
    const reservation = decider.admit(plan);
    // A client that goes away cancels its queued calls and aborts its in-flight ones.
    const cancel = new AbortController();
    const onClose = () => {
      if (!res.writableEnded) cancel.abort();
    };
    res.on("close", onClose);
    try {
      res.json(await decider.decide(state, questions, plan, reservation, cancel.signal));
    } finally {
      res.off("close", onClose);
    }
  };
}
