import type { DeciderRoutes } from "@localdecider/contracts/decider";
import type { RouteHandler } from "@localdecider/service-kit";
import type { Decider } from "../decide/decider";

/**
 * HTTP only: the body arrives checked against SystemOneRequest (and INPUT_LIMITS before it) by
 * registerRoutes, the use case answers it, and a client that goes away cancels it (its queued calls are
 * dropped and its in-flight ones aborted).
 */
export function systemOne(decider: Decider): RouteHandler<DeciderRoutes["systemOne"]> {
  return async ({ body, res }) => {
    const cancel = new AbortController();
    const onClose = () => {
      if (!res.writableEnded) cancel.abort();
    };
    res.on("close", onClose);
    try {
      return { status: 200, body: await decider.answer(body, cancel.signal) };
    } finally {
      res.off("close", onClose);
    }
  };
}
