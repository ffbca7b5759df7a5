import { DeadLetterReason, deadLetter, newUniqueId, type DeadLetterInput } from '@baton/eventstore';
import type { ServiceRuntime } from '@baton/platform';
import { RefusedLetterCap, type SuppressedRefusals } from './refused-letter-cap';

/** The most a summary letter is written after its sender's window ended (the sweep's period). */
const SUMMARY_SWEEP_MAX_MS = 5_000;

/** Injection tokens of the ledger's two recorders: refused agent edge messages, rejected ledger commands. */
export const EDGE_REFUSED_LETTERS = Symbol('EDGE_REFUSED_LETTERS');
export const COMMAND_REFUSED_LETTERS = Symbol('COMMAND_REFUSED_LETTERS');

/** What became of one refusal: its own letter is being written, or it was counted for its sender's summary. */
export type RefusalOutcome = 'refused' | 'suppressed';

/**
 * Writes the dead letters of what one part of the ledger refuses (the agent edge's messages, the
 * ledger's rejected commands) under a per-sender budget ({@link RefusedLetterCap}): within it a
 * refusal gets a letter of its own; past it the refusal is counted, and the sender's window ends
 * in one `refusals_suppressed` letter saying how many, why, and the first and last subjects. So a
 * client refused in a loop can neither push other letters out of the shared DLQ stream nor spend
 * the ledger's time writing them, and nothing refused goes unrecorded. The owner calls
 * {@link stop} on shutdown, after it stopped receiving: open windows are summed up then.
 */
export class RefusedLetters {
  private readonly sweeper: NodeJS.Timeout | null = null;
  /** Letters being written: awaited on shutdown, so a summary is not lost to the connection's close. */
  private readonly writing = new Set<Promise<void>>();

  constructor(
    private readonly runtime: ServiceRuntime,
    readonly cap: RefusedLetterCap,
    /** The letters' source (`ledger-edge`, `ledger`). */
    private readonly source: string,
    /** What is refused, for logs and summaries ("edge messages", "ledger commands"). */
    private readonly what: string,
  ) {
    if (cap.active) {
      // A quiet sender's summary is written once its window ends, not only at its next refusal.
      const period = Math.max(100, Math.min(SUMMARY_SWEEP_MAX_MS, Math.ceil(cap.windowMs / 4)));
      this.sweeper = setInterval(() => this.summarize(this.cap.sweep(Date.now())), period);
      this.sweeper.unref();
    }
  }

  /** Refusals not written as letters of their own (summed up in `refusals_suppressed` letters) so far. */
  get suppressed(): number {
    return this.cap.suppressed;
  }

  /**
   * Record one refusal of `sender`: write `letter` (the caller logs it) while the sender's budget
   * lasts, else count it for the sender's summary (logged once a window). `written` settles once
   * the letter is stored (or could not be: logged), at once when there is none.
   */
  refuse(sender: string, letter: DeadLetterInput): { outcome: RefusalOutcome; written: Promise<void> } {
    const verdict = this.cap.refuse(sender, letter.reason, letter.subject, Date.now());
    this.summarize(verdict.due);
    if (verdict.letter) return { outcome: 'refused', written: this.record(letter) };
    // One line per window of suppression, not one per refusal: a flood must not flood the logs.
    if (verdict.firstSuppressed)
      this.runtime.logger.warn(`refused ${this.what} over budget: counted, not recorded one by one, until the window ends`, {
        sender,
        subject: letter.subject,
        reason: letter.reason,
        letters_per_window: this.cap.perWindow,
        window_ms: this.cap.windowMs,
      });
    return { outcome: 'suppressed', written: Promise.resolve() };
  }

  /** Stop sweeping, write the summaries of every window still open, and wait for the letters in flight. */
  async stop(): Promise<void> {
    if (this.sweeper !== null) clearInterval(this.sweeper);
    this.summarize(this.cap.drain());
    await Promise.all([...this.writing]);
  }

  /** Write one `refusals_suppressed` letter per summary: the refusals of a window that had no letter of their own. */
  private summarize(summaries: SuppressedRefusals[]): void {
    for (const s of summaries) {
      const reasons = Object.entries(s.reasons)
        .map(([reason, count]) => `${reason} ${count}`)
        .join(', ');
      const first = new Date(s.firstAt).toISOString();
      const last = new Date(s.lastAt).toISOString();
      this.runtime.logger.warn(`refused ${this.what} suppressed`, {
        sender: s.sender,
        suppressed: s.count,
        reasons: s.reasons,
        first_subject: s.firstSubject,
        last_subject: s.lastSubject,
      });
      const body = {
        sender: s.sender,
        suppressed: s.count,
        reasons: s.reasons,
        first_subject: s.firstSubject,
        last_subject: s.lastSubject,
        first_at: first,
        last_at: last,
        window_started_at: new Date(s.windowStart).toISOString(),
        window_ms: this.cap.windowMs,
        letters_per_window: this.cap.perWindow,
      };
      void this.record({
        prefix: this.runtime.config.BATON_PREFIX,
        source: this.source,
        reason: DeadLetterReason.refusalsSuppressed,
        detail: `${s.count} refused ${this.what} of ${s.sender} from ${first} to ${last} had no letter of their own (its ${this.cap.perWindow} letters a window were spent): ${reasons}; first ${s.firstSubject}, last ${s.lastSubject}`,
        subject: s.firstSubject,
        headers: {},
        data: new TextEncoder().encode(JSON.stringify(body)),
        deliveries: 1,
        stream: `core-${newUniqueId()}`,
        seq: 0,
        consumer: this.runtime.instance,
        part: 'suppressed',
      });
    }
  }

  private record(letter: DeadLetterInput): Promise<void> {
    // baton_dead_letters_total counts it: the instrumented handle counts every publish on `<prefix>.dlq.>`.
    const written = deadLetter(this.runtime.nats.js, letter).then(
      () => undefined,
      (error: unknown) => this.runtime.logger.error(`cannot record refused ${this.what}`, error instanceof Error ? error : { error: String(error) }),
    );
    this.writing.add(written);
    void written.finally(() => this.writing.delete(written));
    return written;
  }
}
