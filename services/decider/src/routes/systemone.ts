import { type DeciderRoutes, IMAGES_HEADER } from "@localdecider/contracts/decider";
import type { RouteHandler } from "@localdecider/service-kit";
import type { UpstreamAccepts } from "../backend";
import type { Decider } from "../decide/decider";
import { whileClientWaits } from "./client-signal";
import { admitImages } from "./images";
import { systemOneResponse, systemOneTask } from "./systemone-dialect";

/**
 * The response header that tells a System One client how many prompt tokens the backend took from its cache
 * for this request (summed over its upstream calls; `usage.input_tokens` counts those it evaluated).
 */
export const CACHED_TOKENS_HEADER = "X-Cached-Tokens";

/**
 * HTTP only: the body arrives checked against SystemOneRequest (and LOCALDECIDER_MAX_QUESTIONS and INPUT_LIMITS
 * before it) by registerRoutes, images and box questions are let through only as routes/images.ts decides, the
 * use case answers it, and a client that goes away cancels it (its queued calls are dropped and its in-flight
 * ones aborted).
 */
export function systemOne(
  decider: Decider,
  upstreamAccepts: () => UpstreamAccepts,
): RouteHandler<DeciderRoutes["systemOne"]> {
  return async ({ body, req, res }) => {
    admitImages(body, req.get(IMAGES_HEADER), upstreamAccepts());
    const result = await whileClientWaits(res, (signal) => decider.run(systemOneTask(body), signal));
    // System One's usage has no field for it: the prompt tokens the backend took from its cache go in a header.
    res.setHeader(CACHED_TOKENS_HEADER, String(result.usage.cached));
    return { status: 200, body: systemOneResponse(body, result) };
  };
}
