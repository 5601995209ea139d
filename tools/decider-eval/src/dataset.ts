import { createHash } from "node:crypto";
import { TextQuestion } from "@localdecider/contracts/decider";
import { z } from "zod";

/**
 * The labelled data set: JSON Lines, one record per line (README, "Data format"). A record is a state, the
 * questions to ask about it, and the true answer of each question it labels. Bad lines are collected with
 * their line number and reason; the good ones are still evaluated.
 */

export const Label = z.union([z.boolean(), z.string().min(1), z.number().int().min(0)]);
export type Label = z.infer<typeof Label>;

export const DataRecord = z
  .strictObject({
    /** Optional stable name of the record (resuming matches results by it, else by the line's content). */
    id: z.string().min(1).max(200).optional(),
    state: z.json().optional(),
    questions: z
      .record(z.string(), TextQuestion)
      .refine((q) => Object.keys(q).length >= 1, "questions must hold at least one question"),
    labels: z.record(z.string(), Label),
  })
  .superRefine((record, ctx) => {
    if (record.state === undefined) {
      ctx.addIssue({ code: "custom", path: ["state"], message: "state is required (null is allowed)" });
    }
    for (const [name, label] of Object.entries(record.labels)) {
      const question = Object.hasOwn(record.questions, name) ? record.questions[name] : undefined;
      const problem =
        question === undefined ? "labels a question the record does not ask" : labelProblem(question, label);
      if (problem !== undefined) ctx.addIssue({ code: "custom", path: ["labels", name], message: problem });
    }
  });
export type DataRecord = z.infer<typeof DataRecord>;

/** Why a label cannot be the answer of a question, or undefined when it can. */
function labelProblem(question: TextQuestion, label: Label): string | undefined {
  switch (question.type) {
    case "noul":
      return typeof label === "boolean" ? undefined : "a yes/no (noul) question's label must be true or false";
    case "choice":
      return typeof label === "string" && Object.hasOwn(question.criteria, label)
        ? undefined
        : `a choice question's label must be one of its labels (${Object.keys(question.criteria)
            .map((l) => JSON.stringify(l))
            .join(", ")})`;
    case "score":
      return typeof label === "number" && label < question.criteria.length
        ? undefined
        : `a score question's label must be a level from 0 to ${question.criteria.length - 1}`;
  }
}

export interface LoadedRecord {
  /** What results are matched by when resuming: the id, or a hash of the line's content. */
  key: string;
  /** 1-based line number in the data file. */
  line: number;
  record: DataRecord;
}

export interface BadLine {
  line: number;
  error: string;
}

export interface Dataset {
  records: LoadedRecord[];
  bad: BadLine[];
}

export function parseDataset(text: string): Dataset {
  const records: LoadedRecord[] = [];
  const bad: BadLine[] = [];
  const seen = new Map<string, number>();
  text.split("\n").forEach((raw, i) => {
    const line = i + 1;
    const trimmed = raw.trim();
    if (trimmed === "") return;
    let json: unknown;
    try {
      json = JSON.parse(trimmed);
    } catch (err) {
      bad.push({ line, error: `not JSON: ${(err as Error).message}` });
      return;
    }
    const parsed = DataRecord.safeParse(json);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((issue) => `${issue.path.join(".") || "(record)"}: ${issue.message}`);
      bad.push({ line, error: issues.join("; ") });
      return;
    }
    const key = parsed.data.id ?? `sha256:${createHash("sha256").update(trimmed).digest("hex").slice(0, 24)}`;
    const first = seen.get(key);
    if (first !== undefined) {
      const what = parsed.data.id === undefined ? "the same record as" : `the same id as`;
      bad.push({ line, error: `${what} line ${first} (each record is asked once)` });
      return;
    }
    seen.set(key, line);
    records.push({ key, line, record: parsed.data });
  });
  return { records, bad };
}
