import { readFileSync } from "node:fs";
import path from "node:path";
import { CalibrationFile } from "@localdecider/contracts/decider";
import { Calibration } from "./calibration";

/** What an fs error code means, for a message a user acts on. */
const READ_FAULTS: Record<string, string> = {
  ENOENT: "there is no such file",
  EACCES: "permission denied",
  EPERM: "permission denied",
  EISDIR: "it is a directory",
  ENOTDIR: "a part of the path is not a directory",
};

/**
 * Reads LOCALDECIDER_CALIBRATION at boot. A relative path is read from `dir` (the directory the command was
 * run in: see invocationDir in config.ts). Any fault (missing, unreadable, not JSON, not the format) throws
 * an error naming the file, where it was looked for, and what is wrong, so the service stops instead of
 * answering uncalibrated.
 */
export function loadCalibration(configured: string, dir = process.cwd(), promptVersion?: string): Calibration {
  const file = path.resolve(dir, configured);
  const shown = path.isAbsolute(configured) ? configured : `${configured} (looked for at ${file})`;
  const fail = (why: string) => new Error(`LOCALDECIDER_CALIBRATION: calibration file ${shown}: ${why}`);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const meaning = code === undefined ? undefined : READ_FAULTS[code];
    throw fail(`cannot be read (${code ?? String(err)}${meaning === undefined ? "" : `: ${meaning}`})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw fail(`is not JSON (${(err as Error).message})`);
  }
  const parsed = CalibrationFile.safeParse(json);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`);
    throw fail(`is not a localdecider calibration file (version 1): ${issues.join("; ")}`);
  }
  return new Calibration(parsed.data, promptVersion);
}
