import type { DownloadProgress } from "./download";

const MB = 1024 * 1024;

export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * MB) return `${(bytes / (1024 * MB)).toFixed(2)} GiB`;
  if (bytes >= MB) return `${(bytes / MB).toFixed(1)} MiB`;
  return `${(bytes / 1024).toFixed(0)} KiB`;
}

/** Whole percent done, or undefined while the size is unknown. */
export function percentOf(progress: DownloadProgress): number | undefined {
  if (progress.total === undefined || progress.total === 0) return undefined;
  return Math.min(100, Math.floor((progress.received / progress.total) * 100));
}

/** `[#########-----------] 45 % 512.0 MiB of 1.04 GiB, 12.3 MiB/s`: one line for a terminal. */
export function progressBar(progress: DownloadProgress, width = 30): string {
  const percent = percentOf(progress);
  const rate = `${formatBytes(progress.bytesPerSecond)}/s`;
  if (percent === undefined) return `${formatBytes(progress.received)}, ${rate}`;
  const filled = Math.round((percent / 100) * width);
  const total = formatBytes(progress.total as number);
  return `[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${percent} % ${formatBytes(progress.received)} of ${total}, ${rate}`;
}

/**
 * Decides when a download's progress is worth a log line: at each further 10 % (or 100 MiB when the size
 * is unknown), and at least every 30 s, so the log shows progress without a line per chunk.
 */
export class ProgressGate {
  private lastStep = -1;
  private lastAt = 0;

  constructor(private readonly now: () => number = () => Date.now()) {}

  shouldLog(progress: DownloadProgress): boolean {
    const percent = percentOf(progress);
    const step = percent === undefined ? Math.floor(progress.received / (100 * MB)) : Math.floor(percent / 10);
    const at = this.now();
    if (step === this.lastStep && at - this.lastAt < 30_000) return false;
    this.lastStep = step;
    this.lastAt = at;
    return true;
  }
}

/**
 * Decides when a percentage worth a log line has been reached: the first one, each further `step` percent,
 * and the last (100 %), so a load's progress shows in a few lines whatever the number of callbacks.
 */
export class PercentGate {
  private last = -1;

  constructor(private readonly step = 25) {}

  shouldLog(percent: number): boolean {
    if (this.last >= 0 && percent < 100 && percent - this.last < this.step) return false;
    if (percent === this.last) return false;
    this.last = percent;
    return true;
  }
}
