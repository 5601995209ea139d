/**
 * The one reading of `Authorization: Bearer <token>` both services use (RFC 6750 §2.1 within RFC 9110 §11.4):
 *
 *     credentials = auth-scheme [ 1*SP token68 ]     ; auth-scheme "Bearer", in any letter case
 *     b64token    = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
 *
 * Spaces or tabs around the whole value are the field's own whitespace and are ignored; between the scheme
 * and the token only spaces (one or more) are allowed. A tab there, a second token, a comma (a list of
 * credentials or auth-params) or any character outside b64token makes the header malformed.
 *
 * The header is read before anyone is authenticated, so it is scanned by hand, each character at most a few
 * times: no regular expression sees it. (A trimming regex such as `/[ \t]+$/` is quadratic in V8 on a long
 * run of inner spaces: `Bearer` + 16,000 spaces + `x` took ~0.5 s and stalled the whole process.)
 */

/** A header that names the Bearer scheme but carries no well-formed token; `reason` is for the log only. */
export interface MalformedBearer {
  malformed: string;
}

const SPACE = 0x20;
const TAB = 0x09;
const EQUALS = 0x3d;

/** Whether the UTF-16 code unit `c` is one of b64token's characters other than its trailing `=`. */
function isB64Char(c: number): boolean {
  return (
    (c >= 0x41 && c <= 0x5a) || // A-Z
    (c >= 0x61 && c <= 0x7a) || // a-z
    (c >= 0x30 && c <= 0x39) || // 0-9
    c === 0x2d || // -
    c === 0x2e || // .
    c === 0x5f || // _
    c === 0x7e || // ~
    c === 0x2b || // +
    c === 0x2f // /
  );
}

/** RFC 6750's b64token over `text[start, end)`: one or more token characters, then only `=` padding. */
function isB64TokenAt(text: string, start: number, end: number): boolean {
  let i = start;
  while (i < end && isB64Char(text.charCodeAt(i))) i++;
  if (i === start) return false;
  while (i < end && text.charCodeAt(i) === EQUALS) i++;
  return i === end;
}

/**
 * The bearer token of an Authorization header: the token; `undefined` when there are no bearer credentials
 * (no header, an empty one, or another scheme such as `Basic`); `{ malformed }` when the scheme is Bearer
 * but what follows is not one b64token after one or more spaces.
 */
export function parseBearer(header: string | undefined): string | undefined | MalformedBearer {
  if (header === undefined) return undefined;
  // The field's own whitespace, at both ends.
  let start = 0;
  let end = header.length;
  while (start < end && isBlank(header.charCodeAt(start))) start++;
  while (end > start && isBlank(header.charCodeAt(end - 1))) end--;
  // The scheme runs to the first space or tab.
  let schemeEnd = start;
  while (schemeEnd < end && !isBlank(header.charCodeAt(schemeEnd))) schemeEnd++;
  if (schemeEnd - start !== 6 || header.slice(start, schemeEnd).toLowerCase() !== "bearer") return undefined;
  if (schemeEnd === end) return { malformed: "no token after Bearer" };
  // One or more spaces (tabs are not allowed here), then one token that runs to the end.
  let tokenStart = schemeEnd;
  while (tokenStart < end && header.charCodeAt(tokenStart) === SPACE) tokenStart++;
  const nextSpace = header.indexOf(" ", tokenStart);
  if (tokenStart === schemeEnd || (nextSpace !== -1 && nextSpace < end)) {
    return { malformed: "Bearer is not followed by spaces and one token" };
  }
  if (!isB64TokenAt(header, tokenStart, end)) {
    return { malformed: "the token holds characters outside RFC 6750's b64token" };
  }
  return header.slice(tokenStart, end);
}

function isBlank(c: number): boolean {
  return c === SPACE || c === TAB;
}

/** Whether `value` can be sent as a bearer token at all (a configured API key must, or no client gets in). */
export function isBearerToken(value: string): boolean {
  return isB64TokenAt(value, 0, value.length);
}
