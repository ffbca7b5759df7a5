import type { CliContext } from './context';
import type { CliIo } from './output';

/**
 * Where a command's progress goes: its stderr, except with `--json`, where stderr holds nothing
 * but a failure's one JSON line (a script reads the outcome from stdout, not a progress bar).
 */
export function progressIo(ctx: CliContext): CliIo {
  return ctx.json ? { stdout: ctx.io.stdout, stderr: { write: () => true }, stderrIsTTY: false } : ctx.io;
}

/** What a progress display is told: events done so far (and, when it changes, the total). */
export interface ProgressUpdate {
  done: number;
  /** Events expected in all (grows when a catch-up finds more). */
  total?: number;
  /** A word on what is happening now (`catching up`, `comparing`...). */
  note?: string;
}

/** Render seconds as `1:05:09`, `4:07` or `12 s`. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '?';
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${rest}` : `${m}:${rest}`;
}

/** `12 345` style grouping (readable at a glance, unambiguous in any locale). */
export function formatCount(n: number): string {
  return Math.round(n)
    .toString()
    .replace(/\B(?=(\d{3})+(?!\d))/g, ' ');
}

/**
 * Progress of a long command on stderr: events done / total, the rate, the time left.
 *
 * On a terminal one line is redrawn in place, at most every `redrawMs` (default 100 ms):
 * `replay [##########..........] 120 000/400 000 events  31 %  12 345/s  0:23 left`. Elsewhere
 * (a log, a pipe) a plain line every 10 % or every 10 s, whichever comes first, so logs stay
 * readable. `finish` prints the summary: `replay: 400 000 events in 31 s (12 903/s)`. Nothing goes
 * to stdout, so `--json` output stays machine-readable.
 *
 * The rate is that of the last few seconds (a sliding window), so the time left follows what the
 * command is doing now rather than its start-up.
 */
export class ProgressLine {
  private done = 0;
  private total: number;
  private note: string | undefined;
  private readonly started: number;
  private lastDraw = Number.NEGATIVE_INFINITY;
  private lastPlainDecile = -1;
  private lastPlainAt: number;
  private drawn = false;
  private finished = false;
  private readonly samples: Array<[at: number, done: number]> = [];

  constructor(
    private readonly io: CliIo,
    private readonly label: string,
    total: number,
    private readonly options: { now?: () => number; redrawMs?: number; plainEveryMs?: number } = {},
  ) {
    this.total = Math.max(0, total);
    this.started = this.now();
    this.lastPlainAt = this.started;
  }

  private now(): number {
    return this.options.now?.() ?? Date.now();
  }

  update(update: ProgressUpdate): void {
    if (this.finished) return;
    this.done = Math.max(this.done, update.done);
    if (update.total !== undefined) this.total = Math.max(this.total, update.total);
    // A new note is a new phase: said at once, not at the next 10 % or 10 s.
    const noted = update.note !== undefined && update.note !== this.note;
    if (update.note !== undefined) this.note = update.note;
    const at = this.now();
    this.samples.push([at, this.done]);
    while (this.samples.length > 2 && (this.samples[0] as [number, number])[0] < at - 5_000) this.samples.shift();
    this.render(at, noted);
  }

  /** Events per second: over the last few seconds once there are some, else since the start. */
  rate(at = this.now()): number {
    const first = this.samples[0];
    if (first && at - first[0] >= 1_000) return ((this.done - first[1]) * 1000) / (at - first[0]);
    const elapsed = at - this.started;
    return elapsed > 0 ? (this.done * 1000) / elapsed : 0;
  }

  /** The line as it would be drawn now (for tests and the plain output). */
  describe(at = this.now()): string {
    const total = Math.max(this.total, this.done);
    const rate = this.rate(at);
    const percent = total === 0 ? 100 : Math.floor((this.done / total) * 100);
    const left = rate > 0 ? formatDuration((total - this.done) / rate) : '?';
    return `${formatCount(this.done)}/${formatCount(total)} events  ${percent} %  ${formatCount(rate)}/s  ${left} left${this.note ? `  (${this.note})` : ''}`;
  }

  /** `now`: draw whatever the redraw interval or the plain lines' steps say (the summary, a new note). */
  private render(at: number, now: boolean): void {
    const total = Math.max(this.total, this.done);
    if (this.io.stderrIsTTY) {
      if (!now && at - this.lastDraw < (this.options.redrawMs ?? 100)) return;
      this.lastDraw = at;
      const width = 24;
      const filled = total === 0 ? width : Math.min(width, Math.round((this.done / total) * width));
      this.io.stderr.write(`\r\x1b[2K${this.label} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${this.describe(at)}`);
      this.drawn = true;
      return;
    }
    const decile = total === 0 ? 10 : Math.floor((this.done / total) * 10);
    if (now || decile > this.lastPlainDecile || at - this.lastPlainAt >= (this.options.plainEveryMs ?? 10_000)) {
      this.io.stderr.write(`${this.label}: ${this.describe(at)}\n`);
      this.lastPlainDecile = decile;
      this.lastPlainAt = at;
    }
  }

  /** Stop redrawing and print the summary line (`label: N events in T (R/s)`), plus `extra` if given. */
  finish(extra?: string): void {
    if (this.finished) return;
    this.finished = true;
    const at = this.now();
    const seconds = (at - this.started) / 1000;
    const rate = seconds > 0 ? this.done / seconds : 0;
    if (this.io.stderrIsTTY && this.drawn) this.io.stderr.write('\r\x1b[2K');
    this.io.stderr.write(
      `${this.label}: ${formatCount(this.done)} events in ${formatDuration(seconds)} (${formatCount(rate)}/s)${extra ? `; ${extra}` : ''}\n`,
    );
  }

  /** Stop redrawing without a summary (the command failed; its error says why). */
  abandon(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.io.stderrIsTTY && this.drawn) this.io.stderr.write('\n');
  }
}
