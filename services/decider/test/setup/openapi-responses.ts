/**
 * Every response any API test gets from a harness app is recorded (helpers.ts mounts the recorder) and,
 * after the file's tests, checked against the service's own /openapi.json document: a live body that breaks
 * its documented schema, or an undocumented status, fails the test file.
 */
import { checkRecordedResponses, responseRecorder } from "@localdecider/service-kit/test-utils";
import { buildDeciderOpenApi } from "../../src/app";

export const recorder = responseRecorder();

afterAll(() => {
  checkRecordedResponses(buildDeciderOpenApi(), recorder.responses);
});
