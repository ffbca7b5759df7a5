/**
 * The steps a service takes between its process starting and its port answering, in order. A
 * start that hangs in one of them (a broker that takes the connection but never answers, a
 * JetStream API backed up behind a meta leader election, a hook that waits on a flush) is named by
 * the step, so an operator knows where to look without raising the log level.
 */
export const StartPhases = {
  nats: 'connecting to NATS',
  streams: "creating or checking Baton's streams",
  redis: 'reaching Redis',
  modules: 'building its modules',
  consumers: 'creating its JetStream consumers and subscriptions',
  hooks: 'running its start hooks (subscriptions flushed to the server, buckets opened)',
  http: 'opening its HTTP port',
  after_start: 'running its after-start tasks',
} as const;
export type StartPhase = keyof typeof StartPhases;

/** The part of a logger the watch writes to. */
export interface StartWatchLogger {
  warn(message: string, fields: Record<string, unknown>): void;
}

export interface StartWatchOptions {
  /** How long a start may take before the first line, and between lines after it, ms (default {@link START_WATCH_EVERY_MS}). */
  everyMs?: number;
  /** The clock (tests). */
  now?: () => number;
}

/** A start slower than this is said, and said again each time as much more passes. */
export const START_WATCH_EVERY_MS = 10_000;

/**
 * Says, at warn level, when a service's start takes long: every `everyMs` until it is ready, one
 * line naming the step it is in (`phase`, with its words), how long the start and that step have
 * taken. A start that finishes in time writes nothing. Lines written before a logger is attached
 * (the configuration is still being read) are not written; the timer keeps going.
 */
export class StartWatch {
  private readonly everyMs: number;
  private readonly now: () => number;
  private readonly startedAt: number;
  private phase: StartPhase = 'nats';
  private phaseAt: number;
  private logger: StartWatchLogger | null = null;
  private timer: NodeJS.Timeout | null;
  private said = 0;

  constructor(
    private readonly service: string,
    options: StartWatchOptions = {},
  ) {
    this.everyMs = options.everyMs ?? START_WATCH_EVERY_MS;
    this.now = options.now ?? Date.now;
    this.startedAt = this.now();
    this.phaseAt = this.startedAt;
    this.timer = setInterval(() => this.say(), this.everyMs);
    // A start watch never keeps a process alive on its own.
    this.timer.unref();
  }

  /** Where the lines go, once the service has a logger. */
  attach(logger: StartWatchLogger): void {
    this.logger = logger;
  }

  /** The service entered `phase`. */
  enter(phase: StartPhase): void {
    this.phase = phase;
    this.phaseAt = this.now();
  }

  /** The step the start is in. */
  current(): StartPhase {
    return this.phase;
  }

  /** How many slow-start lines were written. */
  lines(): number {
    return this.said;
  }

  /** The service is ready (or its start failed): no more lines. */
  done(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  private say(): void {
    if (this.logger === null) return;
    const now = this.now();
    const waited = now - this.startedAt;
    this.said++;
    this.logger.warn(`${this.service} is not ready after ${Math.round(waited / 1000)} s: ${StartPhases[this.phase]}`, {
      start_phase: this.phase,
      waited_ms: waited,
      phase_ms: now - this.phaseAt,
    });
  }
}
