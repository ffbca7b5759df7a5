import {
  DeadLetterReason,
  deadLetter,
  isCoreRequestStream,
  isRefusedMessageReason,
  letterLogFields,
  newUniqueId,
  redrivableLetter,
  REFUSED_LETTER_BYTES,
  type ConsumedMessage,
  type DeadLetterInput,
  type LetterGateOutcome,
} from '@baton/eventstore';
import { RejectionCode } from '@baton/contracts';
import type { ServiceRuntime } from '../service/runtime';
import { inboxSenderOf, RefusedLetterCap, type StoredRefusals, type SuppressedRefusals } from './refused-letter-cap';

/**
 * Injection token of a service's one {@link RefusedLetters} for what agents publish on its inbox
 * (built by `runService`, whose consumers' `letterGate` letters through it): a service that also
 * records refusals of those messages on its aggregates (the router's `RefusalBudget`) counts them
 * against the same budget, so a sender has one budget per source and service instance, not two.
 */
export const INBOX_REFUSED_LETTERS = Symbol('BATON_INBOX_REFUSED_LETTERS');

/** The most a summary letter is written after its sender's window ended (the sweep's period). */
const SUMMARY_SWEEP_MAX_MS = 5_000;

/** What became of one refusal: its own letter is being written, or it was counted for its sender's summary. */
export type RefusalOutcome = 'refused' | 'suppressed';

/**
 * Reasons whose letters redrive would republish and that are budgeted all the same, because nothing
 * before the router bounds how many an agent can have refused:
 *
 * - `not_found`: a message naming a run or mesh that does not exist costs its sender nothing to
 *   make up (any id of its project will do);
 * - `unknown_mesh`: a mesh start naming a mesh the project does not define — the agent edge checks
 *   no mesh start (it refuses a run start of an unknown workflow, `checkStart`), so any name, under
 *   a new `mesh_run_id` each time, reaches the router;
 * - `unknown_agent`: no router path letters it today (a result of an agent the project does not
 *   list is refused on its run, under the run's cap of refusals of agents it does not wait for);
 *   budgeted should one ever be, as nothing at the edge checks an agent name against the definition.
 *
 * A flood of any of them would otherwise fill the shared DLQ with whole letters. Within the budget
 * each keeps its own whole letter (redrivable: published, the mesh or run then exists and redrive
 * runs it); past it the summary names the inbox stream and sequence of each (`stored`), where the
 * original stays. Not `unknown_workflow`: an agent's start of a workflow its project does not
 * define is refused at the edge (`unknown_workflow`, under the edge's letter budget), so what the
 * router letters for it comes from clients with the project's admin credentials (a start published
 * before its workflow, the case redrive is for), or from a start the edge relayed unsure (its read
 * of the definition failed); those keep a whole letter each, whatever the budget.
 */
export const BUDGETED_REDRIVABLE_REASONS: ReadonlySet<string> = new Set([RejectionCode.notFound, 'unknown_mesh', RejectionCode.unknownAgent]);

/** What a refusal recorded elsewhere than in a letter (an event on its run or mesh) is counted by: where it came from and why. */
export type RecordedRefusal = Pick<DeadLetterInput, 'source' | 'reason' | 'subject' | 'stream' | 'seq'>;

/**
 * Writes the dead letters of what a service refuses from outside (the ledger: agent edge messages
 * and rejected commands; every service: agents' inbox messages its consumers give up on) under a
 * per-sender budget ({@link RefusedLetterCap}): within it a refusal gets a letter of its own (keeping at
 * most {@link REFUSED_LETTER_BYTES} of the message when redrive would not republish it); past
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
 * elsewhere — always gets its own letter, whole, outside the budget (it spends none of it): that
 * letter is its only way back; except a `not_found` ({@link BUDGETED_REDRIVABLE_REASONS}), whose
 * letters are whole within the budget and summed up past it. A refusal a service records on its
 * aggregate instead of in a letter (a router's `run.result_rejected`, `mesh.turn_rejected`) goes
 * through {@link record}, under the same kind of budget. The owner calls {@link stop} on shutdown,
 * after it stopped receiving: open windows are summed up then.
 */
export class RefusedLetters {
  private readonly sweeper: NodeJS.Timeout | null = null;
  /** Letters being written: awaited on shutdown, so a summary is not lost to the connection's close. */
  private readonly writing = new Set<Promise<void>>();
  /**
   * Per source and sender: how many of the refusals suppressed since its last summary were
   * refusals recorded elsewhere than in a letter ({@link record}: acknowledged, on their run or
   * mesh), which its summary says apart. An entry lives until that summary is written.
   */
  private readonly suppressedRecords = new Map<string, number>();

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
    const redrivable = !isCoreRequestStream(letter.stream) && redrivableLetter(this.runtime.config.BATON_PREFIX, letter);
    const logged = (kept: DeadLetterInput) => {
      this.runtime.logger.warn('message dead-lettered', { ...letterLogFields(kept), sender, ...(refused !== undefined ? { refused } : {}) });
      return { outcome: 'refused' as const, written: this.write(kept) };
    };
    // The only way back of a message a stream acknowledged: never counted, never summed up, never cut.
    if (redrivable && !BUDGETED_REDRIVABLE_REASONS.has(letter.reason)) return logged(letter);
    if (!this.admit(sender, letter)) return { outcome: 'suppressed', written: Promise.resolve() };
    // A letter redrive would not republish keeps the message's first bytes only (its detail says how many of how many).
    return logged(redrivable ? letter : { ...letter, keepBytes: letter.keepBytes ?? REFUSED_LETTER_BYTES });
  }

  /**
   * Record one refusal of `sender` that its service records elsewhere than in a letter — an event
   * on the refused message's run or mesh — under the same budget (per `refusal.source` and sender):
   * within it `record` is called and its value returned (`recorded`); past it `record` is not
   * called and the refusal is counted for the sender's `refusals_suppressed` letter, which names
   * the stream and sequence of the message (`suppressed`). No refusal is exempt: the message is
   * acknowledged either way (its refusal is not redriven), and the inbox keeps it.
   */
  async record<T>(sender: string, refusal: RecordedRefusal, record: () => Promise<T>): Promise<{ outcome: 'recorded'; value: T } | { outcome: 'suppressed' }> {
    if (!this.admit(sender, refusal)) {
      const key = senderKey(refusal.source, sender);
      this.suppressedRecords.set(key, (this.suppressedRecords.get(key) ?? 0) + 1);
      return { outcome: 'suppressed' };
    }
    return { outcome: 'recorded', value: await record() };
  }

  /** Count one refusal against its sender's budget: true while the budget lasts, else it is counted for the summary (logged once a window). */
  private admit(sender: string, refusal: RecordedRefusal): boolean {
    const original = isCoreRequestStream(refusal.stream) ? undefined : { stream: refusal.stream, seq: refusal.seq };
    const verdict = this.cap.refuse(senderKey(refusal.source, sender), refusal.reason, refusal.subject, Date.now(), original);
    this.summarize(verdict.due);
    if (verdict.letter) return true;
    // One line per window of suppression, not one per refusal: a flood must not flood the logs.
    if (verdict.firstSuppressed)
      this.runtime.logger.warn(`refused ${this.what} over budget: counted, not recorded one by one, until the window ends`, {
        sender,
        source: refusal.source,
        subject: refusal.subject,
        reason: refusal.reason,
        letters_per_window: this.cap.perWindow,
        window_ms: this.cap.windowMs,
      });
    return false;
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
      // Of the refusals summed up, those recorded elsewhere than in a letter (acknowledged, on their run or mesh).
      const onAggregate = Math.min(s.count, this.suppressedRecords.get(s.sender) ?? 0);
      this.suppressedRecords.delete(s.sender);
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
        ...(onAggregate > 0 ? { on_run_or_mesh: onAggregate } : {}),
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
        ...(onAggregate > 0 ? { on_run_or_mesh: onAggregate } : {}),
      };
      // Where the messages are: a summary of stored messages names their stream (its first one and
      // sequence in Baton-Dlq-Stream / -Seq, every one in the body); one of core messages none.
      const where =
        s.stored.length > 0 ? storedWhere(s.stored, Object.keys(s.reasons)) : 'no stream stores them (core messages; each was answered or relayed nowhere)';
      const head = s.stored[0];
      this.write({
        prefix: this.runtime.config.BATON_PREFIX,
        source,
        reason: DeadLetterReason.refusalsSuppressed,
        detail: `${s.count} refused ${this.what} of ${sender} from ${first} to ${last} had no letter of their own (its ${this.cap.perWindow} letters a window were spent)${onAggregate > 0 ? `, ${onAggregate} of them inbox messages refused on their run or mesh (not recorded there; acknowledged)` : ''}: ${reasons}; ${where}; first ${s.firstSubject}, last ${s.lastSubject}`,
        subject: s.firstSubject,
        headers: {},
        data: new TextEncoder().encode(JSON.stringify(body)),
        deliveries: 1,
        // The letter's id follows: one summary per source, stream and first sequence (written twice, stored once).
        ...(head !== undefined ? { stream: head.stream, seq: head.firstSeq } : { stream: `core-${newUniqueId()}`, seq: 0 }),
        consumer: this.runtime.instance,
        part: 'suppressed',
      }).catch(() => undefined); // logged by write
    }
  }

  /** Write `letter`; the returned promise rejects on failure (logged here), the tracked one never does. */
  private write(letter: DeadLetterInput): Promise<void> {
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

/**
 * Where a summary's stored messages are, for its detail (one line; the body lists every sequence),
 * and what may become of them: refused for themselves (their letters would be refused by redrive),
 * or — `not_found`, a refusal a router recorded on a run or mesh — refused for the state they met,
 * to be published again from the stream by hand once that is cured (a summary is never redriven).
 */
function storedWhere(stored: StoredRefusals[], reasons: readonly string[]): string {
  const streams = stored.map((s) => `${s.count} stored in ${s.stream}, sequences ${s.firstSeq} to ${s.lastSeq}`).join('; ');
  const fate = reasons.every(isRefusedMessageReason)
    ? 'not redriven: their letters would be refused by redrive (docs/sre.md, What a redrive republishes)'
    : 'not redriven (a summary holds none of them): those refused for the state they met (not_found: no such run or mesh; unknown_mesh, unknown_agent: not in the published definition; a run or mesh that refused them) are published again from there by hand once that is cured (docs/sre.md, The budget of refused letters)';
  return `${streams} (the body's stored[].sequences list them: nats stream get <stream> <seq>); ${fate}`;
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
