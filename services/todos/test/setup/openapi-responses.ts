/**
 * Every response a test gets from an app built by buildApp or appWith (support/storage-modes.ts mounts the
 * recorders) is recorded and, after the file's tests, checked against the document that app serves at
 * /openapi.json: a live body that breaks its documented schema, or an undocumented status, fails the test
 * file. An app with sign-in on serves a different document (bearer scheme, 401/403 on the per-user routes),
 * so its responses are checked against that one.
 */
import type { OpenApiDocument } from "@localdecider/service-kit";
import { checkRecordedResponses, type RecordedResponse, responseRecorder } from "@localdecider/service-kit/test-utils";
import type { RequestHandler } from "express";
import { buildTodosOpenApi } from "../../src/app";
import type { TodosAuth } from "../../src/http/auth";

export const recorder = responseRecorder();

/**
 * The document an app built with this sign-in (none by default) and Host check serves; the check is on by
 * default exactly when sign-in is off, as main.ts wires it without TODOS_ALLOWED_HOSTS.
 */
export const todosOpenApi = (options: { auth?: TodosAuth | undefined; hostCheck?: boolean } = {}) =>
  buildTodosOpenApi({ auth: options.auth, hostCheck: options.hostCheck ?? options.auth === undefined });

const others: { document: () => OpenApiDocument; responses: RecordedResponse[] }[] = [];

/** A recorder whose responses are checked against `document` (that of an app with other options). */
export function recorderFor(document: () => OpenApiDocument): RequestHandler {
  const own = responseRecorder();
  others.push({ document, responses: own.responses });
  return own.middleware;
}

afterAll(() => {
  checkRecordedResponses(todosOpenApi(), recorder.responses);
  for (const other of others) checkRecordedResponses(other.document(), other.responses);
});
