import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { Answer } from "@localdecider/contracts/decider";
import { z } from "zod";

/**
 * The results file: JSON Lines, one line per finished call, appended as each call ends, so an interrupted
 * run loses at most the calls in flight. A re-run reads it and skips records already answered; records that
 * failed are asked again. The last answer of a record wins.
 */

const Failure = z.object({ status: z.number(), code: z.string(), message: z.string() });

export const ResultLine = z.discriminatedUnion("status", [
  z.object({
    key: z.string(),
    line: z.number(),
    status: z.literal("answered"),
    model: z.string(),
    /** The fit date of the calibration the decider applied (GET /v1/models), or null for none. */
    calibration: z.string().nullable().optional(),
    answers: z.record(z.string(), Answer),
    at: z.string(),
  }),
  z.object({ key: z.string(), line: z.number(), status: z.literal("failed"), error: Failure, at: z.string() }),
]);
export type ResultLine = z.infer<typeof ResultLine>;
export type Answered = Extract<ResultLine, { status: "answered" }>;

export interface StoredResults {
  answered: Map<string, Answered>;
  /** Lines that could not be read (a run killed mid-write leaves at most one). */
  unreadable: number[];
}

export function readResults(path: string): StoredResults {
  const answered = new Map<string, Answered>();
  const unreadable: number[] = [];
  if (!existsSync(path)) return { answered, unreadable };
  readFileSync(path, "utf8")
    .split("\n")
    .forEach((raw, i) => {
      if (raw.trim() === "") return;
      let parsed: ReturnType<typeof ResultLine.safeParse>;
      try {
        parsed = ResultLine.safeParse(JSON.parse(raw));
      } catch {
        unreadable.push(i + 1);
        return;
      }
      if (!parsed.success) unreadable.push(i + 1);
      else if (parsed.data.status === "answered") answered.set(parsed.data.key, parsed.data);
    });
  return { answered, unreadable };
}

export function appendResult(path: string, result: ResultLine): void {
  appendFileSync(path, `${JSON.stringify(result)}\n`);
}
