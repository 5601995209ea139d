/**
 * The one reading of `Authorization: Bearer <token>` both services use (RFC 6750 §2.1 within RFC 9110 §11.4):
 *
 *     credentials = auth-scheme [ 1*SP token68 ]     ; auth-scheme "Bearer", in any letter case
 *     b64token    = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
 *
 * Spaces or tabs around the whole value are the field's own whitespace and are ignored; between the scheme
 * and the token only spaces (one or more) are allowed. A tab there, a second token, a comma (a list of
 * credentials or auth-params) or any character outside b64token makes the header malformed.
 */

/** RFC 6750's b64token: what a bearer token may be made of (base64, base64url and JWTs all are). */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/** A header that names the Bearer scheme but carries no well-formed token; `reason` is for the log only. */
export interface MalformedBearer {
  malformed: string;
}

/**
 * The bearer token of an Authorization header: the token; `undefined` when there are no bearer credentials
 * (no header, an empty one, or another scheme such as `Basic`); `{ malformed }` when the scheme is Bearer
 * but what follows is not one b64token after one or more spaces.
 */
export function parseBearer(header: string | undefined): string | undefined | MalformedBearer {
  if (header === undefined) return undefined;
  const value = header.replace(/^[ \t]+|[ \t]+$/g, "");
  const scheme = /^[^ \t]*/.exec(value)?.[0] ?? "";
  if (scheme.toLowerCase() !== "bearer") return undefined;
  const rest = value.slice(scheme.length);
  if (rest === "") return { malformed: "no token after Bearer" };
  const token = /^ +([^ ]+)$/.exec(rest)?.[1];
  if (token === undefined) return { malformed: "Bearer is not followed by spaces and one token" };
  if (!B64TOKEN.test(token)) return { malformed: "the token holds characters outside RFC 6750's b64token" };
  return token;
}

/** Whether `value` can be sent as a bearer token at all (a configured API key must, or no client gets in). */
export function isBearerToken(value: string): boolean {
  return B64TOKEN.test(value);
}
