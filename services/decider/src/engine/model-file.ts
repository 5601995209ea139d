import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import { pipeline } from "node:stream/promises";

/**
 * The checks a model file in the models directory passes before every load, and the record that makes them
 * possible without a pin: `<file>.verified.json`, written after a verified download (and after each full
 * check), holds the file's SHA-256 and the stat that identifies the file it was computed on.
 *
 * What the record protects against: a file that changed since it was verified by any ordinary means (a
 * second download or a copy over it, a truncation, an edit in place, a file put there by hand or by an older
 * version): any of these changes the size, the inode, the mtime or the ctime, and then the file is hashed
 * again and compared with the recorded SHA-256. The ctime is what makes it hold for an edit that resets the
 * mtime: no unprivileged process can set it back. What it does not protect against: anyone who can write the
 * models directory (they can write the record as well), nor a disk that flips bits without a write. Against
 * those, pin the hash (LOCALDECIDER_MODEL_SHA256): a pinned file is hashed on every start, record or not.
 */
export interface VerifiedRecord {
  /** The source it was downloaded from (without credentials): a record of another source is not taken. */
  url: string;
  sha256: string;
  size: number;
  ino: number;
  mtimeMs: number;
  ctimeMs: number;
}

/** Opens never follow a symlink in the models directory (0 where the platform has no such flag). */
export const NO_FOLLOW = fs.constants.O_NOFOLLOW ?? 0;

export function recordPath(file: string): string {
  return `${file}.verified.json`;
}

/** What a kept file needs before it may be loaded. */
export type KeptFile =
  | { state: "absent" }
  /** Not to be loaded: delete it and download again. */
  | { state: "untrusted"; reason: string }
  /** The same file the record was written for: its recorded SHA-256 stands. */
  | { state: "unchanged"; sha256: string }
  /** To be hashed and compared with `expected`. */
  | { state: "hash"; expected: string; against: "pin" | "record" };

/** Decides, from the stat and the record alone (nothing is hashed here), what the kept `file` needs. */
export function inspectKept(file: string, url: string, pin: string | undefined): KeptFile {
  let stat: fs.Stats;
  try {
    stat = fs.lstatSync(file);
  } catch {
    return { state: "absent" };
  }
  if (stat.isSymbolicLink()) return { state: "untrusted", reason: "it is a symbolic link, which is not followed" };
  // The pin does not depend on anything an attacker could write beside the file: hashed every time.
  if (pin !== undefined) return { state: "hash", expected: pin, against: "pin" };
  const record = readRecord(file);
  if (record === undefined) return { state: "untrusted", reason: "there is no record of its verified download" };
  if (record.url !== url) return { state: "untrusted", reason: "its record is of a download from another URL" };
  const same =
    stat.size === record.size &&
    stat.ino === record.ino &&
    stat.mtimeMs === record.mtimeMs &&
    stat.ctimeMs === record.ctimeMs;
  return same
    ? { state: "unchanged", sha256: record.sha256 }
    : { state: "hash", expected: record.sha256, against: "record" };
}

export interface HashedFile {
  sha256: string;
  /** Of the file that was read (fstat of its descriptor). */
  stat: fs.Stats;
}

/** SHA-256 of a file, read through one descriptor; with `noFollow`, a symlink is refused rather than followed. */
export async function hashFile(file: string, noFollow: boolean): Promise<HashedFile> {
  const handle = await fs.promises.open(file, fs.constants.O_RDONLY | (noFollow ? NO_FOLLOW : 0));
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new Error(`${file} is not a regular file`);
    const hash = createHash("sha256");
    await pipeline(handle.createReadStream({ autoClose: false, highWaterMark: 1 << 20 }), hash);
    return { sha256: hash.digest("hex"), stat };
  } finally {
    await handle.close();
  }
}

/** Records that `file` (as it is now on disk) has `sha256`, as downloaded from `url`. */
export function writeRecord(file: string, url: string, sha256: string, stat = fs.lstatSync(file)): void {
  const { size, ino, mtimeMs, ctimeMs } = stat;
  const record: VerifiedRecord = { url, sha256, size, ino, mtimeMs, ctimeMs };
  writeFileReplacing(recordPath(file), JSON.stringify(record));
}

/** The file and its record gone (a symlink is removed, not its target). */
export function removeKept(file: string): void {
  fs.rmSync(file, { force: true });
  fs.rmSync(recordPath(file), { force: true });
}

function readRecord(file: string): VerifiedRecord | undefined {
  try {
    const r = JSON.parse(fs.readFileSync(recordPath(file), "utf8")) as Partial<VerifiedRecord>;
    const numbers = [r.size, r.ino, r.mtimeMs, r.ctimeMs].every((n) => typeof n === "number");
    return typeof r.url === "string" && typeof r.sha256 === "string" && numbers ? (r as VerifiedRecord) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Writes `file` whole or not at all, and never through a symlink placed at its name: a fresh temporary file
 * (created exclusively, so no existing name is followed) renamed over it.
 */
export function writeFileReplacing(file: string, text: string): void {
  const temp = `${file}.${randomBytes(6).toString("hex")}.tmp`;
  try {
    fs.writeFileSync(temp, text, { flag: "wx" });
    fs.renameSync(temp, file);
  } finally {
    fs.rmSync(temp, { force: true });
  }
}
