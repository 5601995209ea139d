import { isBearerToken, parseBearer } from "../src";

const JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJl";

describe("parseBearer", () => {
  it.each([
    ["a JWT", `Bearer ${JWT}`, JWT],
    ["the scheme in any letter case", "bEARER k-1", "k-1"],
    ["several spaces before the token", "Bearer   k", "k"],
    ["spaces or tabs around the whole value (the field's own whitespace)", " \tBearer k\t ", "k"],
    ["every b64token character, then padding", "Bearer Az09-._~+/==", "Az09-._~+/=="],
  ])("reads %s as the token", (_situation, header, token) => {
    expect(parseBearer(header)).toBe(token);
  });

  it.each([
    ["no header", undefined],
    ["an empty header", ""],
    ["another scheme", "Basic YWxpY2U6cHc="],
    ["a scheme that only starts with Bearer", "Bearerish k"],
  ])("finds no bearer credentials in %s", (_situation, header) => {
    expect(parseBearer(header)).toBeUndefined();
  });

  it.each([
    ["the scheme alone", "Bearer"],
    ["a tab between scheme and token", "Bearer\tk"],
    ["two tokens", "Bearer k1 k2"],
    ["a comma-separated list", "Bearer k1,k2"],
    ["an auth-param instead of a token", 'Bearer realm="x"'],
    ["padding inside the token", "Bearer ab=cd"],
    ["a character outside b64token", "Bearer k$y"],
    ["a non-ASCII letter", "Bearer clé"],
  ])("calls %s malformed", (_situation, header) => {
    expect(parseBearer(header)).toStrictEqual({ malformed: expect.any(String) });
  });
});

describe("isBearerToken", () => {
  it("accepts what a client can send as a bearer token, and nothing else", () => {
    expect([JWT, "k", "a+b/c=="].map(isBearerToken)).toStrictEqual([true, true, true]);
    expect(["", "two words", "k$y", "=", " k"].map(isBearerToken)).toStrictEqual([false, false, false, false, false]);
  });
});
