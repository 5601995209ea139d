import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import type { Part } from "../../src/decide/plan";
import { readingOf } from "../../src/decide/probe";
import type { Alternative, Reading } from "../../src/upstream/types";
import { FakeUpstream } from "../fake-upstream/server";

/**
 * The recordings of a real llama-server (b10573) kept with the tests that read them
 * (`test/fixtures/llama-server-b10573`, see its README): facts recorded from a real server, part of the repo.
 */
export const RECORDINGS = path.resolve(__dirname, "../fixtures/llama-server-b10573");

interface RecordedToken {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

/** A position in a recorded answer right after `"qK":`, where that key's value begins. */
export interface ValuePosition {
  file: string;
  key: string;
  reading: Reading;
  emitted: string;
  alternatives: Alternative[];
}

type SchemaProp = { type: string; enum?: (string | number)[] };

/**
 * How the value after `"qK":` may be written in the schema the recorded call gave: whitespace first, then
 * a boolean, a digit, or a quoted letter (the quote not yet written at that position).
 */
function readingOfSchema(prop: SchemaProp): Reading {
  if (prop.type === "boolean") return { literals: ["true", "false"], whitespaceFirst: true };
  if (prop.type === "integer") return { literals: (prop.enum ?? []).map(String), whitespaceFirst: true };
  return { literals: (prop.enum ?? []).map((code) => `"${code}"`), whitespaceFirst: true };
}

function positionsOf(
  file: string,
  request: Record<string, unknown>,
  response: Record<string, unknown>,
): ValuePosition[] {
  const format = request.response_format as { json_schema: { schema: { properties: Record<string, SchemaProp> } } };
  const props = format.json_schema.schema.properties;
  const choices = response.choices as { logprobs: { content: RecordedToken[] } }[];
  const tokens = choices[0]?.logprobs.content ?? [];
  const out: ValuePosition[] = [];
  let text = "";
  for (const token of tokens) {
    const key = /"(q\d+)":$/.exec(text)?.[1];
    const prop = key === undefined ? undefined : props[key];
    if (key !== undefined && prop !== undefined) {
      out.push({
        file,
        key,
        reading: readingOfSchema(prop),
        emitted: token.token,
        alternatives: token.top_logprobs.map((a) => ({ token: a.token, logprob: a.logprob, bytes: a.bytes })),
      });
    }
    text += token.token;
  }
  return out;
}

/**
 * The value position of a recorded probe (the decider's chat call: its prompt's questions, then an assistant
 * message prefilled up to the value of one of them): the one token the server answered there, with its
 * alternatives, read the way the decider reads that question (its kind and codes from the prompt's line).
 */
function probePosition(file: string, request: Record<string, unknown>, response: Record<string, unknown>) {
  const { question } = FakeUpstream.probed(request);
  const part = { kind: question.kind, options: question.codes.map((code) => ({ code })) } as unknown as Part;
  const choices = response.choices as { logprobs: { content: RecordedToken[] } }[];
  const token = choices[0]?.logprobs.content[0];
  if (token === undefined) return [];
  return [
    {
      file,
      key: question.key,
      reading: readingOf(part),
      emitted: token.token,
      alternatives: token.top_logprobs.map((a) => ({ token: a.token, logprob: a.logprob, bytes: a.bytes })),
    },
  ];
}

/** Every value position of every recorded 200 chat answer (the decider's probes, and the hand-written probes). */
export function recordedValuePositions(): ValuePosition[] {
  const out: ValuePosition[] = [];
  for (const name of readdirSync(path.join(RECORDINGS, "exchanges")).sort()) {
    const exchange = JSON.parse(readFileSync(path.join(RECORDINGS, "exchanges", name), "utf8")) as {
      url: string;
      status: number;
      request: string;
      response: string;
    };
    if (exchange.status !== 200 || !exchange.url.includes("chat")) continue;
    const request = JSON.parse(exchange.request) as Record<string, unknown>;
    const response = JSON.parse(exchange.response) as Record<string, unknown>;
    // Recorded with prompt version 1 (one call answering every question under a JSON schema): each value.
    if (request.response_format !== undefined) {
      out.push(...positionsOf(`exchanges/${name}`, request, response));
      continue;
    }
    // Recorded by bench/record-llama-server.ts (the decider's probes); the start-up check's own calls (a
    // one-character prefill) are no question's probe.
    const last = (request.messages as { role: string; content: string }[]).at(-1);
    if (last?.role !== "assistant" || !/^\{"q\d+":/.test(last.content)) continue;
    out.push(...probePosition(`exchanges/${name}`, request, response));
  }
  for (const name of ["b_ans", "b_bias", "b_tiny"]) {
    const request = JSON.parse(readFileSync(path.join(RECORDINGS, "probes", `req_${name}.json`), "utf8"));
    const response = JSON.parse(readFileSync(path.join(RECORDINGS, "probes", `${name}.json`), "utf8"));
    out.push(...positionsOf(`probes/${name}.json`, request, response));
  }
  return out;
}

export function recordedPosition(file: string, key: string): ValuePosition {
  const found = recordedValuePositions().find((p) => p.file === file && p.key === key);
  if (found === undefined) throw new Error(`no value position ${key} in ${file}`);
  return found;
}
