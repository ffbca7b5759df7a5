import { ExitCode } from './errors';

/** Where a command writes. Tests pass buffers; the real command passes the process streams. */
export interface CliIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  /** True when stderr is a terminal (progress bars redraw one line; otherwise plain lines). */
  stderrIsTTY: boolean;
}

/**
 * The process's streams, as every command writes to them. A reader that goes away before the
 * output ends (`baton streams | head -1`) closes the pipe: the next write fails with EPIPE, which
 * Node reports as an 'error' event that, unhandled, kills the process with a stack trace. Here the
 * rest of the output is dropped quietly and the command ends as it would have, with its exit code
 * (a command that changes something, `dlq redrive`, `replay`, is not cut off half-way because its
 * reader stopped reading). A terminal that hung up (its window closed, its SSH session dropped)
 * fails every later write with EIO: dropped quietly the same way, so a `replay` told of the
 * hang-up (SIGHUP, `interruptible` in rebuild.ts) finishes its clean-up. Any other write failure is one
 * line on stderr and exit 1.
 */
export function processIo(): CliIo {
  return { stdout: closable(process.stdout), stderr: closable(process.stderr), stderrIsTTY: Boolean(process.stderr.isTTY) };
}

/** One guard per stream, however many times {@link processIo} is called. */
const guarded = new WeakMap<NodeJS.WriteStream, CliIo['stdout']>();

function closable(stream: NodeJS.WriteStream): CliIo['stdout'] {
  const existing = guarded.get(stream);
  if (existing) return existing;
  let closed = false;
  stream.on('error', (error: NodeJS.ErrnoException) => {
    closed = true;
    if (error.code === 'EPIPE' || error.code === 'EIO') return;
    if (stream !== process.stderr) process.stderr.write(`baton: cannot write the output: ${error.message}\n`);
    process.exit(ExitCode.failure);
  });
  const writer = { write: (text: string) => (closed ? false : stream.write(text)) };
  guarded.set(stream, writer);
  return writer;
}

/** Collects what a command writes (tests, and callers that want the text). */
export interface BufferedIo extends CliIo {
  out(): string;
  err(): string;
}

export function bufferedIo(stderrIsTTY = false): BufferedIo {
  let out = '';
  let err = '';
  return {
    stdout: { write: (text: string) => (out += text) },
    stderr: { write: (text: string) => (err += text) },
    stderrIsTTY,
    out: () => out,
    err: () => err,
  };
}

/** Print a value as pretty JSON with a trailing newline (the `--json` output of every read command). */
export function printJson(io: CliIo, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export interface Column<T> {
  header: string;
  value: (row: T) => unknown;
  /** Cut longer cells to this many characters (default 60). */
  max?: number;
  /** Never cut: an id a person copies into the next command (`baton answer <id>`). Other columns are cut instead. */
  whole?: boolean;
}

/** Render rows as an aligned text table (headers uppercased); `empty` when there are no rows. */
export function renderTable<T>(rows: readonly T[], columns: readonly Column<T>[], empty = '(none)'): string {
  if (rows.length === 0) return `${empty}\n`;
  const cells = rows.map((row) => columns.map((col) => (col.whole === true ? cellText(col.value(row)) : clip(cellText(col.value(row)), col.max ?? 60))));
  const headers = columns.map((col) => col.header.toUpperCase());
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]!.length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => (i === values.length - 1 ? v : v.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...cells.map(line)].join('\n') + '\n';
}

/** Render `key: value` lines, aligned, skipping undefined values. */
export function renderFields(fields: Record<string, unknown>): string {
  const entries = Object.entries(fields).filter(([, v]) => v !== undefined);
  const width = Math.max(0, ...entries.map(([k]) => k.length));
  return entries.map(([k, v]) => `${`${k}:`.padEnd(width + 1)} ${cellText(v)}`).join('\n') + '\n';
}

/**
 * Characters that would steer the operator's terminal rather than be shown (a stored reason or an
 * agent's text can hold them): C0 controls as their visible pictures (ESC as ␛, NUL as ␀), DEL as
 * ␡, C1 controls and bidirectional overrides and isolates as �.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is what this is for
const TERMINAL_CONTROLS = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

function visible(text: string): string {
  return text.replace(TERMINAL_CONTROLS, (c) => {
    const code = c.charCodeAt(0);
    if (code < 0x20) return String.fromCharCode(0x2400 + code);
    return code === 0x7f ? '\u2421' : '\ufffd';
  });
}

function cellText(value: unknown): string {
  if (value === undefined || value === null) return '-';
  if (typeof value === 'string') return visible(value.replace(/[\r\n\t]+/g, ' '));
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(1, max - 1))}…`;
}

/** ISO time of an epoch-millisecond value, or '-' when absent. */
export function isoOf(ms: unknown): string {
  return typeof ms === 'number' && Number.isFinite(ms) ? new Date(ms).toISOString() : '-';
}

/**
 * Progress on stderr: on a terminal, one bar redrawn in place (`label [#####.....] 120/400`);
 * otherwise a plain line at most every 10% and at the end, so logs stay readable.
 */
export class Progress {
  private done = 0;
  private lastPlain = -1;
  private lastPrinted = -1;

  constructor(
    private readonly io: CliIo,
    private readonly label: string,
    private readonly total: number,
  ) {}

  tick(count = 1): void {
    this.done += count;
    this.render(false);
  }

  finish(): void {
    this.render(true);
    if (this.io.stderrIsTTY) this.io.stderr.write('\n');
  }

  private render(final: boolean): void {
    const total = Math.max(this.total, this.done);
    if (this.io.stderrIsTTY) {
      if (!final && this.done % 50 !== 0) return;
      const width = 30;
      const filled = total === 0 ? width : Math.round((this.done / total) * width);
      this.io.stderr.write(`\r${this.label} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${this.done}/${total} events`);
      return;
    }
    const decile = total === 0 ? 10 : Math.floor((this.done / total) * 10);
    if (decile > this.lastPlain || (final && this.lastPrinted !== this.done)) {
      this.io.stderr.write(`${this.label}: ${this.done}/${total} events applied\n`);
      this.lastPlain = decile;
      this.lastPrinted = this.done;
    }
  }
}
