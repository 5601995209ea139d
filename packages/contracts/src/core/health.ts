import { z } from "zod";

/** `GET /health`: the process is up. */
export const HealthResponse = z.object({ status: z.literal("ok") });
export type HealthResponse = z.infer<typeof HealthResponse>;

/** `GET /ready` when the service can do its work; services add their own fields. */
export const ReadyResponse = z.looseObject({ status: z.literal("ready") });
export type ReadyResponse = z.infer<typeof ReadyResponse>;
