import { readFileSync } from "node:fs";
import { CalibrationFile } from "@localdecider/contracts/decider";
import { Calibration } from "./calibration";

/**
 * Reads LOCALDECIDER_CALIBRATION at boot. Any fault (missing, unreadable, not JSON, not the format) throws
 * an error naming the file and what is wrong, so the service stops instead of answering uncalibrated.
 */
export function loadCalibration(path: string): Calibration {
  const fail = (why: string) => new Error(`LOCALDECIDER_CALIBRATION: calibration file ${path}: ${why}`);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw fail(`cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
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
  return new Calibration(parsed.data);
}
