/**
 * Bounds on what an error body or a log line repeats. Anything a client sends can end up in one (a model
 * name, a question's name in a field path, a Host header, a server's error text quoting the prompt): without
 * a bound, one 1 MB field is answered and logged whole, and a few requests a second flood the logs.
 */
export const ECHO_LIMITS = {
  /** Characters of request text an error message quotes (a model name, a Host): enough to recognise it. */
  quote: 200,
  /** Characters of any one string in an error body or a log line: the net under every message, path, stack. */
  text: 4096,
  /** Entries of `details` listed in an error body; one more entry says how many were left out. */
  details: 100,
} as const;

/**
 * `text` cut to `max` characters (never inside a surrogate pair), saying how much was left out, or `text`
 * itself when it fits.
 */
export function clip(text: string, max: number = ECHO_LIMITS.quote): string {
  if (text.length <= max) return text;
  let end = max;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}… (${text.length - end} more characters)`;
}

/** Deepest nesting clipStrings looks into: log fields and error details are shallow. */
const MAX_DEPTH = 6;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * `value` with every string in it (in plain objects and arrays, a few levels deep) clipped to `max`
 * characters. Nothing is changed in place: a container that holds a long string is copied, and `value`
 * itself is returned when nothing needed clipping (the common case costs one walk and no allocation).
 */
export function clipStrings<T>(value: T, max: number = ECHO_LIMITS.text, depth = 0): T {
  if (typeof value === "string") return (value.length > max ? clip(value, max) : value) as T;
  if (depth >= MAX_DEPTH) return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      const clipped = clipStrings(item, max, depth + 1);
      if (clipped !== item) {
        copy ??= value.slice();
        copy[i] = clipped;
      }
    }
    return (copy ?? value) as T;
  }
  if (isPlainObject(value)) {
    let copy: Record<string, unknown> | undefined;
    for (const key of Object.keys(value)) {
      const item = value[key];
      const clipped = clipStrings(item, max, depth + 1);
      if (clipped !== item) {
        copy ??= { ...value };
        copy[key] = clipped;
      }
    }
    return (copy ?? value) as T;
  }
  return value;
}
