import type { DeciderRoutes } from "@localdecider/contracts";
import type { RouteHandler } from "@localdecider/service-kit";
import type { Decider } from "../decide/decider";
import { deciderError } from "../errors";
import { MODEL_ALIASES, MODEL_NAME } from "../models";

export const ACCEPTED_MODELS: readonly string[] = [MODEL_NAME, ...MODEL_ALIASES];

/** The body arrives checked against SystemOneRequest (and INPUT_LIMITS before it) by registerRoutes. */
export function systemOne(decider: Decider): RouteHandler<DeciderRoutes["systemOne"]> {
  return async ({ body, res }) => {
    const { model, state, questions } = body;
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
      return { status: 200, body: await decider.answer(state, questions, cancel.signal) };
    } finally {
      res.off("close", onClose);
    }
  };
}
