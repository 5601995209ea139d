/**
 * A progress line on stderr: done/total, rate, ETA and failures. On a terminal it redraws one line; in a
 * log (not a TTY) it prints a line at every 10 % so CI logs stay short.
 */
export class Progress {
  private readonly started = performance.now();
  private done = 0;
  private failed = 0;
  private lastDecile = -1;

  constructor(
    private readonly total: number,
    private readonly stream: NodeJS.WriteStream | undefined,
  ) {}

  tick(failed: boolean): void {
    this.done += 1;
    if (failed) this.failed += 1;
    this.draw();
  }

  finish(): void {
    if (this.stream?.isTTY === true) this.stream.write("\n");
  }

  /** The line as shown, e.g. `[########------------]  80/200  40%  12.5/s  ETA 10s  failed 1`. */
  line(): string {
    const elapsed = (performance.now() - this.started) / 1000;
    const rate = elapsed > 0 ? this.done / elapsed : 0;
    const left = this.total - this.done;
    const eta = rate > 0 ? formatSeconds(left / rate) : "?";
    const share = this.total === 0 ? 1 : this.done / this.total;
    const width = 24;
    const filled = Math.round(share * width);
    const bar = `[${"#".repeat(filled)}${"-".repeat(width - filled)}]`;
    const count = `${String(this.done).padStart(String(this.total).length)}/${this.total}`;
    return `${bar} ${count} ${Math.floor(share * 100)
      .toString()
      .padStart(3)}%  ${rate.toFixed(1)}/s  ETA ${eta}${this.failed > 0 ? `  failed ${this.failed}` : ""}`;
  }

  private draw(): void {
    if (this.stream === undefined) return;
    if (this.stream.isTTY === true) {
      // \x1b[K clears what a longer previous line left.
      this.stream.write(`\r${this.line()}\x1b[K`);
      return;
    }
    const decile = Math.floor((this.done / Math.max(1, this.total)) * 10);
    if (decile !== this.lastDecile) {
      this.lastDecile = decile;
      this.stream.write(`${this.line()}\n`);
    }
  }
}

export function formatSeconds(seconds: number): string {
  if (!Number.isFinite(seconds)) return "?";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}
