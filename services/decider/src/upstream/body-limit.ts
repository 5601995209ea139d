/**
 * The most bytes the decider reads of any one answer of a model server (LOCALDECIDER_UPSTREAM_MAX_BODY). A
 * real answer is far smaller: a native call of 16 questions of 255 options each is ~150 KB, a chat call's
 * top_logprobs a few KB, a model list a few hundred KB even for a router with thousands of models. Without
 * a cap a server (broken, or hostile) could make the decider read a 300 MB answer whole and hold it.
 */
export const DEFAULT_UPSTREAM_MAX_BODY = 8 * 1024 * 1024;

/**
 * An answer longer than the cap: its reading was stopped and the connection closed. The failure policy
 * classifies it as a malformed answer (502 upstream_malformed; the server stays in rotation: it answered).
 */
export class BodyTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(
      `the model server's answer is larger than LOCALDECIDER_UPSTREAM_MAX_BODY (${limit} bytes); its reading was stopped`,
    );
    this.name = "BodyTooLargeError";
  }
}

/** Whether `err` or an error in its cause chain is a BodyTooLargeError (the `openai` client wraps fetch's errors). */
export function bodyTooLarge(err: unknown): BodyTooLargeError | undefined {
  let current: unknown = err;
  for (let depth = 0; depth < 5 && typeof current === "object" && current !== null; depth++) {
    if (current instanceof BodyTooLargeError) return current;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** A start-up or readiness check's answer, read whole but never past the cap. */
export interface CheckedAnswer {
  status: number;
  ok: boolean;
  /** A redirect's target (checks follow none: a 3xx is an answer of its own, named as such). */
  location: string | undefined;
  text: string;
}

/**
 * One check of a model server (its model list, props, a probe call) with the global fetch: no redirect
 * followed (a `/v1/models` that answers 302 to another host must not make the decider ready on that other
 * host's list, when the decisions themselves follow no redirect), and the body read only up to `maxBytes`.
 */
export async function fetchChecked(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string; signal: AbortSignal },
  maxBytes: number = DEFAULT_UPSTREAM_MAX_BODY,
): Promise<CheckedAnswer> {
  const response = await fetch(url, { ...init, redirect: "manual" });
  const location = response.headers.get("location") ?? undefined;
  const text = await readCapped(response, maxBytes);
  return { status: response.status, ok: response.ok, location, text };
}

/** A fetch Response's body as text, cancelled as soon as it passes `maxBytes` (BodyTooLargeError). */
export async function readCapped(response: Response, maxBytes: number): Promise<string> {
  const declared = Number(response.headers.get("content-length") ?? Number.NaN);
  if (declared > maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    throw new BodyTooLargeError(maxBytes);
  }
  if (response.body === null) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw new BodyTooLargeError(maxBytes);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** What a check says of a redirect: where it pointed, for the log only (it may name another host). */
export function redirected(answer: CheckedAnswer): boolean {
  return answer.status >= 300 && answer.status < 400;
}
