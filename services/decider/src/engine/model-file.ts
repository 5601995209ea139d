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
