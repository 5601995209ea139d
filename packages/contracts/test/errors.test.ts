import { ErrorBody } from "../src";

describe("ErrorBody", () => {
  it("accepts the seed's bare { error } body", () => {
    expect(ErrorBody.parse({ error: "Invalid request body" })).toStrictEqual({ error: "Invalid request body" });
  });

  it("rejects a body without an error message", () => {
    expect(ErrorBody.safeParse({ code: "x" }).success).toBe(false);
  });
});
