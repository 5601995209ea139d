import { isBearerToken, parseBearer } from "../src";
import { seededRandom } from "../src/test-utils";

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

/**
 * The parser as it was, regexes and all: the reference the hand-written scanner must agree with. Only ever
 * given short headers here (on a long run of inner spaces its trimming regex is quadratic).
 */
function referenceParseBearer(header: string | undefined): string | undefined | { malformed: string } {
  if (header === undefined) return undefined;
  const value = header.replace(/^[ \t]+|[ \t]+$/g, "");
  const scheme = /^[^ \t]*/.exec(value)?.[0] ?? "";
  if (scheme.toLowerCase() !== "bearer") return undefined;
  const rest = value.slice(scheme.length);
  if (rest === "") return { malformed: "no token after Bearer" };
  const token = /^ +([^ ]+)$/.exec(rest)?.[1];
  if (token === undefined) return { malformed: "Bearer is not followed by spaces and one token" };
  if (!/^[A-Za-z0-9\-._~+/]+=*$/.test(token)) return { malformed: "b64token" };
  return token;
}

describe("parseBearer against the regex reading it replaced", () => {
  // Pieces a header is built from: the scheme in several cases and shapes, the whitespace the rules care
  // about, b64token characters, padding, and characters outside b64token.
  const PIECES = ["Bearer", "bearer", "BEARER", "Bearerx", "Basic", " ", "  ", "\t", "=", "==", "k", "Az09", "-._~+/"];
  const ODD = [",", '"', "$", "é", "\u0001", "\r", "İ", "\u212a"];

  it("reads 20,000 generated headers exactly as the reference does (token, none, or malformed)", () => {
    const seed = 24;
    const next = seededRandom(seed);
    for (let n = 0; n < 20_000; n++) {
      const parts: string[] = [];
      const count = Math.floor(next() * 7);
      for (let i = 0; i < count; i++) {
        const pool = next() < 0.1 ? ODD : PIECES;
        parts.push(pool[Math.floor(next() * pool.length)] as string);
      }
      const header = parts.join("");
      const got = parseBearer(header);
      const want = referenceParseBearer(header);
      // The reasons are log text: only the kind of answer (and the token) must agree.
      const shape = (r: ReturnType<typeof parseBearer>) => (typeof r === "object" ? "malformed" : r);
      if (shape(got) !== shape(want)) throw new Error(`seed ${seed}, case ${n}: ${JSON.stringify(header)}`);
    }
  });

  it("lets no regular expression read the header (every RegExp method, replace and split included, runs exec)", () => {
    const exec = jest.spyOn(RegExp.prototype, "exec");
    try {
      for (const header of [
        "Bearer k",
        `Bearer${" ".repeat(100)}x`,
        " \tbearer a=\t",
        "Bearer k1 k2",
        "Basic x",
        "Bearer\tk",
      ]) {
        parseBearer(header);
      }
      isBearerToken("a+b/c==");
      expect(exec).not.toHaveBeenCalled();
    } finally {
      exec.mockRestore();
    }
  });

  // Each of these took the regex reading minutes (quadratic backtracking over the inner spaces; 16,000 spaces
  // already cost ~0.5 s); read in one pass they finish well inside Jest's default 5 s timeout.
  const SPACES = " ".repeat(1_000_000);
  it.each([
    ["a megabyte of spaces between scheme and token", `Bearer${SPACES}k`, "k"],
    [
      "a megabyte of spaces inside the value, then a second token",
      `Bearer k${SPACES}x`,
      { malformed: expect.any(String) },
    ],
    ["a megabyte of tabs and spaces around the value", `\t${SPACES}Bearer k${SPACES}\t`, "k"],
    ["a megabyte of spaces after another scheme", `Basic${SPACES}x`, undefined],
    ["a megabyte of spaces alone", SPACES, undefined],
  ])("reads %s in one pass", (_situation, header, answer) => {
    expect(parseBearer(header)).toStrictEqual(answer);
  });
});
