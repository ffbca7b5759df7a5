import { RefusedLetterCap, REFUSED_LETTER_WINDOW_MS, type SuppressedRefusals } from '../refusals/refused-letter-cap';

/** The log calls a watch makes (a {@link JsonLogger} in a service). */
export interface FullWatchLog {
  info(message: string, fields: Record<string, unknown>): void;
  warn(message: string, fields: Record<string, unknown>): void;
}

/** What a watch's lines say (see {@link FullWatch}). */
export interface FullWatchWords {
  /** The warn when a condition starts. */
  start: string;
  /** The warn summing up a window's refusals held back while the condition lasts. */
  still: string;
  /** The same after it ended (the refusals of a condition that flapped). */
  was: string;
  /** The info when it ends. */
  ended: string;
  /** The field naming what was refused (`subject`: `subject` on the start line, `first_subject`, `last_subject` on a summary). */
  what: string;
}

/** One condition a watch holds: a limit refusing writes, from its first refusal until it ends. */
export interface FullCondition<L extends string, S extends Record<string, unknown>> {
  readonly limit: L;
  /** Fields of the limit written on each of its lines (a stream's name). */
  readonly scope: S;
  /** When the first refusal came (ms since the epoch). */
  readonly since: number;
  /** Refusals since then. */
  refused: number;
  /** What the latest refusal refused. */
  last: string;
  /** The start line was written (else the refusal that began it was held back by the window's budget). */
  readonly announced: boolean;
}

export interface FullWatchOptions {
  /** At most one summary line a window per condition (default {@link REFUSED_LETTER_WINDOW_MS}, a minute). */
  windowMs?: number;
  now?: () => number;
}

/**
 * A limit refusing writes — a full JetStream inbox or account ({@link StorageFullWatch}), a full
 * Redis ({@link RedisFullWatch}) — said once rather than once per write.
 *
 * Log, per condition key: a warn `words.start` when refusals start; then at most one warn
 * `words.still` a window (a minute) with how many were held back since the last line
 * (`held_back`); an info `words.ended` when the condition ends, with how many it refused. The
 * budget is the refused letters' ({@link RefusedLetterCap}, one line a window per key): a condition
 * that flaps — a small write fits, the next does not — starts again without a line within the
 * window, and its refusals are in the window's summary (`words.was` once it ended). Every refusal is
 * in exactly one line: the start line's own, or a later line's `held_back`.
 */
export class FullWatch<L extends string, S extends Record<string, unknown> = Record<string, never>> {
  private readonly cap: RefusedLetterCap;
  private readonly held = new Map<string, FullCondition<L, S>>();
  /** Refusals, per key, that no line has counted yet. */
  private readonly heldBack = new Map<string, number>();
  private readonly sweeper: NodeJS.Timeout;
  private readonly now: () => number;

  constructor(
    private readonly log: FullWatchLog,
    private readonly words: FullWatchWords,
    options: FullWatchOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    this.cap = new RefusedLetterCap(1, options.windowMs ?? REFUSED_LETTER_WINDOW_MS, 64);
    // A window's summary is written once it ended, not only at the key's next refusal.
    this.sweeper = setInterval(() => this.summarize(this.cap.sweep(this.now())), Math.max(100, Math.min(5_000, Math.ceil(this.cap.windowMs / 4))));
    this.sweeper.unref();
  }

  /** The window of one summary line, ms. */
  get windowMs(): number {
    return this.cap.windowMs;
  }

  /**
   * One refusal by `limit` (condition `key`, its `scope`) of `what`; `fields` are added to the start
   * line when this refusal starts the condition (the error's words).
   */
  refuse(key: string, limit: L, scope: S, what: string, fields: Record<string, unknown> = {}): void {
    const at = this.now();
    const verdict = this.cap.refuse(key, limit, what, at);
    this.summarize(verdict.due);
    let condition = this.held.get(key);
    if (condition === undefined) {
      condition = { limit, scope, since: at, refused: 0, last: what, announced: verdict.letter };
      this.held.set(key, condition);
      if (verdict.letter) {
        condition.refused++;
        this.log.warn(this.words.start, { limit, ...scope, [this.words.what]: what, ...fields, lines_per_window: 1, window_ms: this.cap.windowMs });
        return;
      }
    }
    condition.refused++;
    condition.last = what;
    this.heldBack.set(key, (this.heldBack.get(key) ?? 0) + 1);
  }

  /** The condition `key` ended (a write it refused went through): its end line, when its start had one. */
  end(key: string): void {
    const condition = this.held.get(key);
    if (condition === undefined) return;
    this.held.delete(key);
    // A condition that began without a line (the window's budget spent) ends without one: the window's summary counts it.
    if (!condition.announced) return;
    const held = this.takeHeldBack(key);
    this.log.info(this.words.ended, {
      limit: condition.limit,
      ...condition.scope,
      refused: condition.refused,
      held_back: held,
      full_ms: this.now() - condition.since,
    });
  }

  /** Whether condition `key` holds now. */
  holds(key: string): boolean {
    return this.held.has(key);
  }

  /** The conditions holding now. */
  conditions(): ReadonlyArray<Readonly<FullCondition<L, S>>> {
    return [...this.held.values()];
  }

  /** Stop sweeping; refusals no line has counted yet are written in one last summary per key. */
  stop(): void {
    clearInterval(this.sweeper);
    this.summarize(this.cap.drain());
  }

  /** One summary line per window that held refusals back (none when a later line already counted them). */
  private summarize(due: SuppressedRefusals[]): void {
    for (const window of due) {
      const held = this.takeHeldBack(window.sender);
      if (held === 0) continue;
      const condition = this.held.get(window.sender);
      this.log.warn(condition !== undefined ? this.words.still : this.words.was, {
        limit: Object.keys(window.reasons)[0],
        ...(condition !== undefined ? { full: true, since: new Date(condition.since).toISOString(), refused: condition.refused } : { full: false }),
        ...(condition?.scope ?? {}),
        held_back: held,
        [`first_${this.words.what}`]: window.firstSubject,
        [`last_${this.words.what}`]: window.lastSubject,
      });
    }
  }

  private takeHeldBack(key: string): number {
    const held = this.heldBack.get(key) ?? 0;
    this.heldBack.delete(key);
    return held;
  }
}
