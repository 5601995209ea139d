/**
 * Every response a test gets from an app built by buildApp (support/storage-modes.ts mounts the recorder)
 * is recorded and, after the file's tests, checked against the service's own /openapi.json document: a live
 * body that breaks its documented schema, or an undocumented status, fails the test file.
 */
import { checkRecordedResponses, responseRecorder } from "@localdecider/service-kit/dist/test-utils";
import { buildTodosOpenApi } from "../../src/app";
import { todoRoutes } from "../../src/http/todo-routes";
import type { TodoRepository } from "../../src/storage/repository";

export const recorder = responseRecorder();

/** The document the app serves; only the route table is read, no handler runs. */
export const todosOpenApi = () => buildTodosOpenApi(todoRoutes({} as TodoRepository));

afterAll(() => {
  checkRecordedResponses(todosOpenApi(), recorder.responses);
});
