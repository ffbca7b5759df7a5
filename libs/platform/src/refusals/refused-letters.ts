import {
  DeadLetterReason,
  deadLetter,
  isCoreRequestStream,
  letterLogFields,
  newUniqueId,
  redrivableLetter,
  type ConsumedMessage,
  type DeadLetterInput,
  type LetterGateOutcome,
} from '@baton/eventstore';
import type { ServiceRuntime } from '../service/runtime';
import { inboxSenderOf, RefusedLetterCap, type StoredRefusals, type SuppressedRefusals } from './refused-letter-cap';

/** The most a summary letter is written after its sender's window ended (the sweep's period). */
const SUMMARY_SWEEP_MAX_MS = 5_000;

/** What became of one refusal: its own letter is being written, or it was counted for its sender's summary. */
export type RefusalOutcome = 'refused' | 'suppressed';

/**
 * Writes the dead letters of what a service refuses from outside (the ledger: agent edge messages
 * and rejected commands; every service: agents' inbox messages its consumers give up on) under a
 * per-sender budget ({@link RefusedLetterCap}): within it a refusal gets a letter of its own; past
 * it the refusal is counted, and the sender's window ends in one `refusals_suppressed` letter (of
 * the same source) saying how many, why, the first and last subjects, and — for messages a stream
 * stored — that stream and their sequences. So a client refused in a loop can neither push other
 * letters out of the shared DLQ stream nor spend the service's time writing them, and nothing
 * refused goes unrecorded. Budgets are per source and sender.
 *
 * The budget is for what has another way back or none is owed: a core message (its sender was
 * answered, or its reply subject was not its own) and a stored message whose letter redrive would
 * refuse anyway (`redrivableLetter`: refused for itself, a foreign id, a source redrive does not
 * publish for). A stored message whose letter redrive would republish — a start of a workflow not
 * published yet, a result for a run not started: acknowledged by the stream, cured by a fix
 * elsewhere — always gets its own letter, outside the budget (it spends none of it): that letter is
 * its only way back. The owner calls {@link stop} on shutdown, after it stopped receiving: open
 * windows are summed up then.
 */
export class RefusedLetters {
  private readonly sweeper: NodeJS.Timeout | null = null;
  /** Letters being written: awaited on shutdown, so a summary is not lost to the connection's close. */
  private readonly writing = new Set<Promise<void>>();

  constructor(
    private readonly runtime: Pick<ServiceRuntime, 'nats' | 'config' | 'logger' | 'instance'>,
    readonly cap: RefusedLetterCap,
    /** What is refused, for logs and summaries ("refusals": "edge messages", "ledger commands"). */
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
   * Record one refusal of `sender` (budgets are per `letter.source` and sender): write `letter`
   * while the budget lasts — logged here as every dead-lettering is (`message dead-lettered`, the
   * fields of {@link letterLogFields}, with the caller's `refused` words) — else count it for the
   * sender's summary (logged once a window). `written` settles once the letter is stored, at once when there is none; it
   * rejects when the letter could not be written (also logged here) — a caller that does not wait
   * for it must still catch it.
   */
  refuse(sender: string, letter: DeadLetterInput, refused?: string): { outcome: RefusalOutcome; written: Promise<void> } {
    const stored = !isCoreRequestStream(letter.stream);
    // The only way back of a message a stream acknowledged: never counted, never summed up.
    if (stored && redrivableLetter(this.runtime.config.BATON_PREFIX, letter)) {
      this.runtime.logger.warn('message dead-lettered', { ...letterLogFields(letter), sender, ...(refused !== undefined ? { refused } : {}) });
      return { outcome: 'refused', written: this.record(letter) };
    }
    const original = stored ? { stream: letter.stream, seq: letter.seq } : undefined;
    const verdict = this.cap.refuse(senderKey(letter.source, sender), letter.reason, letter.subject, Date.now(), original);
    this.summarize(verdict.due);
    if (verdict.letter) {
      this.runtime.logger.warn('message dead-lettered', { ...letterLogFields(letter), sender, ...(refused !== undefined ? { refused } : {}) });
      return { outcome: 'refused', written: this.record(letter) };
    }
    // One line per window of suppression, not one per refusal: a flood must not flood the logs.
    if (verdict.firstSuppressed)
      this.runtime.logger.warn(`refused ${this.what} over budget: counted, not recorded one by one, until the window ends`, {
        sender,
        source: letter.source,
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
      const { source, sender } = splitSenderKey(s.sender);
      const reasons = Object.entries(s.reasons)
        .map(([reason, count]) => `${reason} ${count}`)
        .join(', ');
      const first = new Date(s.firstAt).toISOString();
      const last = new Date(s.lastAt).toISOString();
      const stored = s.stored.map(storedBody);
      this.runtime.logger.warn(`refused ${this.what} suppressed`, {
        sender,
        source,
        suppressed: s.count,
        reasons: s.reasons,
        first_subject: s.firstSubject,
        last_subject: s.lastSubject,
        ...(stored.length > 0 ? { stored: stored.map((o) => `${o.stream} ${o.first_seq}..${o.last_seq} (${o.count})`).join(', ') } : {}),
      });
      const body = {
        sender,
        suppressed: s.count,
        reasons: s.reasons,
        first_subject: s.firstSubject,
        last_subject: s.lastSubject,
        first_at: first,
        last_at: last,
        window_started_at: new Date(s.windowStart).toISOString(),
        window_ms: this.cap.windowMs,
        letters_per_window: this.cap.perWindow,
        ...(stored.length > 0 ? { stored } : {}),
      };
      // Where the messages are: a summary of stored messages names their stream (its first one and
      // sequence in Baton-Dlq-Stream / -Seq, every one in the body); one of core messages none.
      const where = s.stored.length > 0 ? storedWhere(s.stored) : 'no stream stores them (core messages; each was answered or relayed nowhere)';
      const head = s.stored[0];
      this.record({
        prefix: this.runtime.config.BATON_PREFIX,
        source,
        reason: DeadLetterReason.refusalsSuppressed,
        detail: `${s.count} refused ${this.what} of ${sender} from ${first} to ${last} had no letter of their own (its ${this.cap.perWindow} letters a window were spent): ${reasons}; ${where}; first ${s.firstSubject}, last ${s.lastSubject}`,
        subject: s.firstSubject,
        headers: {},
        data: new TextEncoder().encode(JSON.stringify(body)),
        deliveries: 1,
        // The letter's id follows: one summary per source, stream and first sequence (written twice, stored once).
        ...(head !== undefined ? { stream: head.stream, seq: head.firstSeq } : { stream: `core-${newUniqueId()}`, seq: 0 }),
        consumer: this.runtime.instance,
        part: 'suppressed',
      }).catch(() => undefined); // logged by record
    }
  }

  /** Write `letter`; the returned promise rejects on failure (logged here), the tracked one never does. */
  private record(letter: DeadLetterInput): Promise<void> {
    // baton_dead_letters_total counts it: the instrumented handle counts every publish on `<prefix>.dlq.>`.
    const written = deadLetter(this.runtime.nats.js, letter).then(() => undefined);
    const tracked = written.catch((error: unknown) =>
      this.runtime.logger.error(`cannot record refused ${this.what}`, error instanceof Error ? error : { error: String(error) }),
    );
    this.writing.add(tracked);
    void tracked.finally(() => this.writing.delete(tracked));
    return written;
  }
}

/** A summary's stored messages of one stream, as its body lists them. */
function storedBody(s: StoredRefusals): {
  stream: string;
  count: number;
  first_seq: number;
  last_seq: number;
  sequences: string[];
  sequences_unlisted: number;
} {
  return {
    stream: s.stream,
    count: s.count,
    first_seq: s.firstSeq,
    last_seq: s.lastSeq,
    sequences: s.runs.map(([from, to]) => (from === to ? String(from) : `${from}-${to}`)),
    sequences_unlisted: s.unlisted,
  };
}

/** Where a summary's stored messages are, for its detail (one line; the body lists every sequence). */
function storedWhere(stored: StoredRefusals[]): string {
  const streams = stored.map((s) => `${s.count} stored in ${s.stream}, sequences ${s.firstSeq} to ${s.lastSeq}`).join('; ');
  return `${streams} (the body's stored[].sequences list them: nats stream get <stream> <seq>); not redriven: their letters would be refused by redrive (docs/sre.md, What a redrive republishes)`;
}

/**
 * The runner's `letterGate` for a service's consumers: a message an agent published on its inbox
 * subject (`inboxSenderOf`) and refused is lettered through {@link RefusedLetters.refuse} under its
 * sender's budget — which writes the letter of one redrive would republish whatever the budget
 * (`redrivableLetter`), and sums up only the others. Anything else is written as it comes: a
 * message of an operator or a service, and a message given up on after `max_deliveries` — a
 * failure of the consumer, not of the message, whose letter is what redrives it once the fault is
 * fixed: suppressing it would lose what was acknowledged. The promise says whether the refusal got
 * a letter of its own (`written`) or was counted in its sender's summary (`suppressed`).
 */
export function inboxLetterGate(
  prefix: string,
  letters: Pick<RefusedLetters, 'refuse'>,
): (msg: Pick<ConsumedMessage, 'subject'>, letter: DeadLetterInput) => Promise<LetterGateOutcome> | null {
  return (msg, letter) => {
    if (letter.reason === DeadLetterReason.maxDeliveries) return null;
    const sender = inboxSenderOf(prefix, msg.subject);
    if (sender === null) return null;
    const { outcome, written } = letters.refuse(sender, letter);
    return written.then(() => (outcome === 'suppressed' ? 'suppressed' : 'written'));
  };
}

/** A cap key: budgets are per source (which consumer or path refused) and sender. */
function senderKey(source: string, sender: string): string {
  return `${source}\u0000${sender}`;
}

function splitSenderKey(key: string): { source: string; sender: string } {
  const cut = key.indexOf('\u0000');
  return cut < 0 ? { source: '', sender: key } : { source: key.slice(0, cut), sender: key.slice(cut + 1) };
}
