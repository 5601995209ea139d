import type { DeciderRoutes } from "@localdecider/contracts/decider";
import { AppError, type RouteHandler } from "@localdecider/service-kit";
import type { UpstreamAccepts } from "../backend";
import type { Decider } from "../decide/decider";
import { whileClientWaits } from "./client-signal";
import { badParam, decisionsResponse, decisionsTask } from "./decisions-dialect";

/**
 * OpenAI's `POST /v1/decisions`: the body arrives checked against DecisionCreateRequest (and the question
 * limits) by registerRoutes, is translated into the decider's task (decisions-dialect.ts: images only for a
 * backend that takes them), answered by the same use case as `/v1/systemone` (limits, queue, deadline,
 * calibration), and translated back; a client that goes away cancels it. Its errors are answered in OpenAI's
 * envelope (openai-errors.ts). `safety_identifier` is accepted and used for nothing else: never logged.
 */
export function decisions(
  decider: Decider,
  upstreamAccepts: () => UpstreamAccepts,
): RouteHandler<DeciderRoutes["decisions"]> {
  return async ({ body, res }) => {
    const { task, names, firstImage } = decisionsTask(body, upstreamAccepts());
    const result = await whileClientWaits(res, (signal) => decider.run(task, signal)).catch((err: unknown) => {
      // Images for servers that turned out to take none (known once they were checked): named at the part.
      if (err instanceof AppError && err.code === "images_unsupported" && firstImage !== undefined) {
        throw badParam(
          firstImage,
          "images need a model server that takes them (a native System One server such as llama.cpp's); the model servers here take text only",
        );
      }
      throw err;
    });
    return { status: 200, body: decisionsResponse(body, names, result) };
  };
}
