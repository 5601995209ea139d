import type { Entry } from "@localdecider/contracts/decider";
import type { NativeCall, UpstreamFailure } from "./types";

/**
 * The fewest options a learnt limit may name. A choice is split into chunks of the limit and the chunks'
 * leaders meet in a final round: a chunk of one option makes no progress (its one label is its leader, so the
 * final round is the whole choice again) and a chunk of none makes no chunks at all (the plan would never
 * end). A server's "at most 0" or "at most 1" is therefore no limit the decider can use: it is not learnt.
 */
export const OPTION_LIMIT_FLOOR = 2;

/**
 * The first size tried when a server refuses a call holding a wide choice without naming a number the
 * decider can trust: 26, the most options of the servers that label options A–Z (vLLM's /v1/systemone and
 * /v1/decisions, SGLang), the smallest limit any known server has.
 */
export const FIRST_PROBE = 26;

/**
 * How long a learnt limit holds: 10 minutes. A limit is the server's of the moment: the server may be
 * restarted with another model or upgraded (vLLM's later builds take A–ZZ, 128 options), and a lesson drawn
 * from a refusal that was about something else would otherwise split every wide choice for good. Relearning
 * costs at most two refused calls per model per 10 minutes, which no workload notices; a shorter hold would
 * refuse calls more often, a longer one keep a wrong lesson longer.
 */
export const OPTION_LIMIT_TTL_MS = 10 * 60_000;

/** The refused calls one lesson may take: the call refused, and one probe at a smaller size. */
const REFUSALS_PER_LESSON = 2;

interface Lesson {
  limit: number;
  /** When it stops holding (the clock's milliseconds). */
  until: number;
  /** A call with a choice of exactly `limit` options was answered: the limit works. */
  confirmed: boolean;
  /** Refused calls this lesson took. */
  refusals: number;
}

/**
 * The most options one question may have, per model, on one native server: the documented value for the
 * model until a refusal teaches a smaller one, learnt without reading the server's wording (servers word it
 * differently, and change it between versions): a refused call (400, 413, 422) that held a choice wider than
 * FIRST_PROBE is tried again with chunks of FIRST_PROBE, or of the number the server named when that number is
 * its own (serverHint). A lesson is kept once a call at its size is answered, holds OPTION_LIMIT_TTL_MS, is
 * never below OPTION_LIMIT_FLOOR, and takes at most REFUSALS_PER_LESSON refused calls: past them the refusal
 * stands as the client's.
 */
export class OptionLimits {
  private readonly lessons = new Map<string, Lesson>();

  constructor(
    private readonly documented: (model: string) => number,
    private readonly now: () => number = Date.now,
  ) {}

  limit(model: string): number {
    const documented = this.documented(model);
    const lesson = this.lesson(model);
    return lesson === undefined ? documented : Math.min(lesson.limit, documented);
  }

  /**
   * A call to `model` whose widest choice had `widest` options was refused; `hint` is the number the server
   * named in its own words, if any. Returns the smaller limit to plan with (the call is then tried again
   * split), or undefined: the refusal is not about the number of options, or this lesson has taken its
   * refused calls.
   */
  refused(model: string, widest: number, hint: number | undefined): number | undefined {
    if (widest <= OPTION_LIMIT_FLOOR) return undefined;
    const current = this.lesson(model);
    // A refusal at a size already known to work is about something else.
    if (current?.confirmed === true && widest <= current.limit) return undefined;
    const refusals = current === undefined || current.confirmed ? 1 : current.refusals + 1;
    const trusted = hint !== undefined && Number.isSafeInteger(hint) && hint >= OPTION_LIMIT_FLOOR && hint < widest;
    const next = trusted ? hint : widest > FIRST_PROBE ? FIRST_PROBE : undefined;
    if (next === undefined || refusals > REFUSALS_PER_LESSON) {
      // The size being tried was refused too: it is not the limit, so it is not kept either.
      if (current !== undefined && !current.confirmed && widest <= current.limit) this.lessons.delete(model);
      return undefined;
    }
    const limit = Math.min(next, this.limit(model));
    this.lessons.set(model, { limit, until: this.now() + OPTION_LIMIT_TTL_MS, confirmed: false, refusals });
    return limit;
  }

  /** A call to `model` whose widest choice had `widest` options was answered: a lesson of that size works. */
  answered(model: string, widest: number): void {
    const lesson = this.lesson(model);
    if (lesson !== undefined && !lesson.confirmed && widest === lesson.limit) lesson.confirmed = true;
  }

  private lesson(model: string): Lesson | undefined {
    const lesson = this.lessons.get(model);
    if (lesson !== undefined && this.now() >= lesson.until) {
      this.lessons.delete(model);
      return undefined;
    }
    return lesson;
  }
}

/** The options of the call's widest choice (0 without a choice): what a server's option limit applies to. */
export function widestChoice(call: NativeCall): number {
  let widest = 0;
  for (const q of call.questions) if (q.type === "choice") widest = Math.max(widest, q.options.length);
  return widest;
}

/** "at most N", the phrase servers use for a limit (llama.cpp, vLLM, SGLang), read in one pass. */
const AT_MOST = /at most (\d{1,6})/gi;
/** Words that say a limit is about options (llama.cpp "options", vLLM "options"/"alternatives"/"choices"). */
const ABOUT_OPTIONS = /option|alternative|choice|label/i;

/**
 * The number a refusal names as the most options, when it is the server's own: the first "at most N" in the
 * server's message (its first 1,000 characters) that no client-supplied text can have put there. Servers
 * repeat the client's text in their refusals (llama.cpp: `questions.<name>: …`; vLLM: `question '<name>': …`),
 * so a question named `option at most 0` must teach nothing: a match is skipped when any text of the call (a
 * question's name, a label, an instruction or description, a string of the state, the model's name) holds the
 * matched phrase, or occurs in the message over its digits. Undefined without such a number: the limit is then
 * learnt without it (OptionLimits). Linear in the message and in the call's texts.
 */
export function serverHint(message: string, call: NativeCall): number | undefined {
  const text = message.slice(0, 1000);
  if (!ABOUT_OPTIONS.test(text)) return undefined;
  let texts: string[] | undefined;
  for (const match of text.matchAll(AT_MOST)) {
    texts ??= clientTexts(call);
    const phrase = match[0].toLowerCase();
    const start = (match.index ?? 0) + match[0].length - (match[1] ?? "").length;
    const end = (match.index ?? 0) + match[0].length;
    const echoed = texts.some((t) => t.toLowerCase().includes(phrase) || overlaps(text, t, start, end));
    if (!echoed) return Number(match[1]);
  }
  return undefined;
}

/** Whether `t` occurs in `text` over any of the characters [start, end). */
function overlaps(text: string, t: string, start: number, end: number): boolean {
  if (t === "" || t.length > text.length) return false;
  const at = text.indexOf(t, Math.max(0, start - t.length + 1));
  return at !== -1 && at < end;
}

/** Every string of the call the client wrote: names, labels, instructions, descriptions, the state, the model. */
function clientTexts(call: NativeCall): string[] {
  const texts: string[] = [call.model];
  for (const q of call.questions) {
    texts.push(q.key);
    stringsOf(q.instructions, texts);
    for (const o of q.options) {
      texts.push(o.label);
      stringsOf(o.description, texts);
    }
  }
  stringsOf(call.state, texts);
  return texts;
}

/** The strings of a JSON value (keys too), iteratively: a deep value cannot overflow the stack. */
function stringsOf(value: Entry | unknown, into: string[]): void {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === "string") into.push(v);
    else if (Array.isArray(v)) for (const inner of v) stack.push(inner);
    else if (typeof v === "object" && v !== null) {
      for (const [k, inner] of Object.entries(v)) {
        into.push(k);
        stack.push(inner);
      }
    }
  }
}

/**
 * The statuses a server refuses too many options with: llama.cpp 422 (413 at some commits), vLLM 400 (every
 * fault of a body), a proxy's 413.
 */
export const OPTION_REFUSALS: ReadonlySet<number> = new Set([400, 413, 422]);

/**
 * The most questions one call of vLLM's takes (64, its engine's limit for /v1/systemone and /v1/decisions), the
 * smallest of the known servers': a refusal of a call holding more is read as the call's size, whatever its
 * wording, so that the call is sent again in halves.
 */
export const QUESTIONS_PROBE = 64;

/**
 * A native server's refusal (or error) of `call`, as a kind, read the same way by both native adapters: what
 * `classify` makes of the status and the message, unless the status is a refusal of the body (400, 413, 422)
 * and the call can be sent smaller: a call holding a choice wider than the limit it may have is an
 * `option_limit` (OptionLimits says which size to try: the limit is learnt from the refused call, never from
 * the message's wording; a number in it is read only where the server wrote it, serverHint), and a call of
 * more than QUESTIONS_PROBE questions is `too_large` (sent again in halves). A context overflow counts as a
 * refusal of the body here: a server's words about the context may be the client's (a question named
 * "context"), and a smaller call fits a context better anyway.
 */
export function readRefusal(
  limits: OptionLimits,
  call: NativeCall,
  status: number,
  message: string,
  classify: () => UpstreamFailure,
): UpstreamFailure {
  const failure = classify();
  const ofTheBody =
    failure.kind === "refused" ||
    failure.kind === "too_large" ||
    (failure.kind === "context_overflow" && !failure.together);
  if (!ofTheBody || !OPTION_REFUSALS.has(status)) return failure;
  const limit = limits.refused(call.model, widestChoice(call), serverHint(message, call));
  if (limit !== undefined) return { kind: "option_limit", limit, detail: message };
  if (failure.kind === "refused" && call.questions.length > QUESTIONS_PROBE)
    return { kind: "too_large", detail: message };
  return failure;
}
