import { ErrorBody, HOST_NOT_ALLOWED_STATUS } from "../src";
import { DECIDER_ERROR_STATUS, DECIDER_HOST_RESPONSES, DeciderErrorBody } from "../src/decider";
import { TODO_MESSAGES, TODOS_HOST_RESPONSES, TodosErrorBody } from "../src/todos";

describe("ErrorBody", () => {
  it("accepts the seed's bare { error } body", () => {
    expect(ErrorBody.parse({ error: "Invalid request body" })).toStrictEqual({ error: "Invalid request body" });
  });

  it("rejects a body without an error message", () => {
    expect(ErrorBody.safeParse({ code: "x" }).success).toBe(false);
  });
});

describe("the Host check's refusal", () => {
  it("is 421 in both services: the decider's code host_not_allowed, the todos' { error } body", () => {
    expect(HOST_NOT_ALLOWED_STATUS).toBe(421);
    expect(DECIDER_ERROR_STATUS.host_not_allowed).toBe(HOST_NOT_ALLOWED_STATUS);
    const decider = { error: "Host not allowed", code: "host_not_allowed" };
    expect(DeciderErrorBody.parse(decider)).toStrictEqual(decider);
    const todos = { error: TODO_MESSAGES.hostNotAllowed };
    expect(TodosErrorBody.parse(todos)).toStrictEqual(todos);
    expect(Object.keys(DECIDER_HOST_RESPONSES)).toStrictEqual([String(HOST_NOT_ALLOWED_STATUS)]);
    expect(Object.keys(TODOS_HOST_RESPONSES)).toStrictEqual([String(HOST_NOT_ALLOWED_STATUS)]);
  });
});
