import { LoggerService } from '@nestjs/common';
import { currentTraceId } from '@baton/eventstore';
import { setOwn } from '@baton/contracts';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/** Fields that tie a log line to Baton's records; carried whenever known. */
export interface LogContext {
  run_id?: string;
  workflow_run_id?: string;
  handoff_id?: string;
  event_id?: string;
  project?: string;
  subject?: string;
  [key: string]: unknown;
}

/**
 * A JSON-lines logger: one object per line on stdout (stderr for errors) with time, level, service,
 * message, the active trace id (`trace_id`, when the line is written inside a trace) and any ids
 * passed in the context. Also a NestJS `LoggerService`, so framework logs come
 * out in the same shape.
 */
export class JsonLogger implements LoggerService {
  /** The logger this one is a child of: its context is merged under this one's when a line is written. */
  private parent: JsonLogger | null = null;

  constructor(
    private readonly service: string,
    private readonly level: LogLevel = 'info',
    private readonly base: LogContext = {},
    private readonly sink: (line: string, level: LogLevel) => void = defaultSink,
  ) {}

  /**
   * A logger whose lines also carry `context` (over this one's). Handlers make one per message and
   * most never write a line at the configured level, so the contexts are merged only when one does.
   */
  child(context: LogContext): JsonLogger {
    const child = new JsonLogger(this.service, this.level, context, this.sink);
    child.parent = this;
    return child;
  }

  private context(): LogContext {
    return this.parent === null ? this.base : { ...this.parent.context(), ...this.base };
  }

  debug(message: unknown, ...rest: unknown[]): void {
    this.write('debug', message, rest);
  }
  info(message: unknown, ...rest: unknown[]): void {
    this.write('info', message, rest);
  }
  log(message: unknown, ...rest: unknown[]): void {
    this.write('info', message, rest);
  }
  warn(message: unknown, ...rest: unknown[]): void {
    this.write('warn', message, rest);
  }
  error(message: unknown, ...rest: unknown[]): void {
    this.write('error', message, rest);
  }
  verbose(message: unknown, ...rest: unknown[]): void {
    this.write('debug', message, rest);
  }

  private write(level: LogLevel, message: unknown, rest: unknown[]): void {
    if (rank[level] < rank[this.level]) return;
    const fields: Record<string, unknown> = {};
    for (const item of rest) {
      if (item && typeof item === 'object' && !(item instanceof Error)) for (const [key, value] of Object.entries(item)) setOwn(fields, key, value);
      else if (item instanceof Error) fields['err'] = { name: item.name, message: item.message, stack: item.stack };
      else if (typeof item === 'string') fields['context'] = item;
    }
    const traceId = currentTraceId();
    const line = JSON.stringify({
      time: new Date().toISOString(),
      level,
      service: this.service,
      msg: message instanceof Error ? message.message : String(message),
      ...(traceId ? { trace_id: traceId } : {}),
      ...this.context(),
      ...fields,
    });
    this.sink(line, level);
  }
}

function defaultSink(line: string, level: LogLevel): void {
  if (level === 'error') process.stderr.write(line + '\n');
  else process.stdout.write(line + '\n');
}
