/**
 * Every response any API test gets from a harness app is recorded (helpers.ts mounts the recorder) and,
 * after the file's tests, checked against the service's own /openapi.json document: a live body that breaks
 * its documented schema, or an undocumented status, fails the test file. The document is the one with the
 * Host check on: a harness without it (an API key) serves the same routes without their 421.
 */
import { checkRecordedResponses, responseRecorder } from "@localdecider/service-kit/test-utils";
import { buildDeciderOpenApi } from "../../src/app";

export const recorder = responseRecorder();

afterAll(() => {
  checkRecordedResponses(buildDeciderOpenApi({ hostCheck: true }), recorder.responses);
});
