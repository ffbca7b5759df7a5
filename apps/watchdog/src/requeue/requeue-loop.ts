import { LedgerErrorCode } from '@baton/contracts';
import { assertNever } from '@baton/domain';
import { hopTrace, TRACEPARENT_HEADER } from '@baton/eventstore';
import type { JsonLogger } from '@baton/platform';
import type { Deadline, DeadlineTable } from '../deadlines/deadline-table';
import { ExpectedRefusals, requeueKey, type RequeueLedger } from './requeue-port';

/** What became of one `requeue_expired` request (for logs, tests and, later, metrics). */
export type RequeueOutcome =
  | { kind: 'requeued'; deadline: Deadline }
  /** Not sent yet: the events stream held events this watchdog had not read when the deadline came (`behind` of them). */
  | { kind: 'deferred'; deadline: Deadline; behind: number }
  | { kind: 'refused'; deadline: Deadline; code: string; expected: boolean }
  | { kind: 'failed'; deadline: Deadline; error: unknown };

export interface RequeueLoopOptions {
  table: DeadlineTable;
  ledger: RequeueLedger;
  logger: JsonLogger;
  /** Interval between scans, ms. */
  tickMs: number;
  /** Delay before asking again about a claim after a refusal, a failure or an unconfirmed requeue, ms. */
  retryMs: number;
  /** Most requests in flight at once. */
  maxInflight: number;
  /** Most leases handled per tick. */
  batch: number;
  /**
   * How far the watchdog has read the events stream (its shared follow): a deadline is acted on
   * only once every event stored when it came due has been read — a result recorded just before a
   * lease's expiry, which a watchdog behind on the stream has not seen yet, then holds the lease
   * (WATCHDOG_ANSWERED_HOLD_MS) instead of the claim being requeued and worked twice. Without it,
   * or when the position cannot be known, a due deadline is acted on at once.
   */
  position?: { lastSeq(): number; behind(): Promise<number | null> };
  /** The clock (epoch ms); injectable for tests. */
  now?: () => number;
  onOutcome?: (outcome: RequeueOutcome) => void;
}

/**
 * Every `tickMs`, send `requeue_expired` for each lease in the table that is past its expiry, with
 * the claim id the table holds and the key `requeue:<handoff>:<claim_id>`. Ticks never overlap
 * and at most `maxInflight` requests run at once.
 *
 * Exactly-once is the ledger's job: its decider accepts a requeue only for the live claim after
 * its expiry, and a repeated key yields no event, so any number of watchdog instances (or retries)
 * requeue a claim once. After a send the lease is asked about again only after `retryMs`: normally
 * the `handoff.lease_expired` event has removed it from the table by then. Refusals the race makes
 * likely (see {@link ExpectedRefusals}) are logged at debug, others at warn; a request that got no
 * answer is retried after `retryMs`.
 */
export class RequeueLoop {
  private timer: NodeJS.Timeout | null = null;
  /** The stream sequence each deferred deadline waits for the follow to reach (see {@link readThrough}). */
  private readonly marks = new Map<string, number>();
  private running: Promise<void> | null = null;
  private stopped = false;
  private readonly now: () => number;

  constructor(private readonly opts: RequeueLoopOptions) {
    this.now = opts.now ?? Date.now;
  }

  /** Start ticking (idempotent). */
  start(): void {
    if (this.timer || this.stopped) return;
    this.timer = setInterval(() => {
      if (!this.running) this.running = this.tick().finally(() => (this.running = null));
    }, this.opts.tickMs);
    this.timer.unref?.();
  }

  /** Stop ticking and wait for the requests of the current tick to be answered. Safe to call twice. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** One scan: send a requeue for every due lease (at most `batch`). Exposed for tests. */
  async tick(): Promise<void> {
    // Where the follow stands is asked before any deadline is handed out: a handed-out deadline
    // ignores the answer (a result's hold) its events may bring while we wait.
    const position = this.opts.position;
    let seen: { behind: number | null; read: number } | null = null;
    if (position !== undefined && this.opts.table.hasDue(this.now())) {
      const behind = await position.behind();
      seen = { behind, read: position.lastSeq() };
    }
    const due = this.readThrough(this.opts.table.takeDue(this.now(), this.opts.batch), seen);
    let next = 0;
    const worker = async () => {
      while (next < due.length && !this.stopped) {
        const deadline = due[next++] as Deadline;
        const outcome = await this.requeue(deadline);
        this.opts.table.postpone(deadline.project, deadline.handoffId, deadline.claimId, this.now() + this.opts.retryMs);
        this.report(outcome);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.opts.maxInflight, due.length) }, worker));
  }

  /**
   * The due deadlines this watchdog has read the stream far enough for: every event stored when a
   * deadline was first seen due (the stream's end then, `lastSeq + behind`, its mark). The others
   * are deferred to the next tick; the events they wait for are read meanwhile (a result among
   * them takes the lease off the due list). A mark is kept until the follow passes it, so a
   * watchdog that stays behind under load still acts once it has read what was there at the
   * deadline.
   */
  private readThrough(due: Deadline[], seen: { behind: number | null; read: number } | null): Deadline[] {
    if (seen === null || due.length === 0) return due;
    const { behind, read } = seen;
    if (behind === null || behind === 0) {
      for (const d of due) this.marks.delete(markKey(d));
      this.forgetPassed(read);
      return due;
    }
    const ready: Deadline[] = [];
    for (const deadline of due) {
      const key = markKey(deadline);
      let mark = this.marks.get(key);
      if (mark === undefined) {
        mark = read + behind;
        this.marks.set(key, mark);
        // Bounded: the oldest mark goes first (its deadline is acted on at once when next due).
        if (this.marks.size > MAX_MARKS) this.marks.delete(this.marks.keys().next().value as string);
      }
      if (read >= mark) {
        this.marks.delete(key);
        ready.push(deadline);
        continue;
      }
      this.opts.table.postpone(deadline.project, deadline.handoffId, deadline.claimId, this.now() + this.opts.tickMs);
      this.report({ kind: 'deferred', deadline, behind });
    }
    this.forgetPassed(read);
    return ready;
  }

  /** A mark the follow has passed belongs to a deadline no longer due (answered, requeued by another watchdog, released): forget it. */
  private forgetPassed(read: number): void {
    for (const [key, mark] of this.marks) if (mark <= read) this.marks.delete(key);
  }

  private async requeue(deadline: Deadline): Promise<RequeueOutcome> {
    try {
      // The requeue continues the trace of the claim it ends (the run's, for an SDK agent): its
      // event and the offer after it stay in the run's trace.
      const trace = deadline.traceparent !== undefined ? hopTrace({ [TRACEPARENT_HEADER]: deadline.traceparent }, false) : undefined;
      const reply = await this.opts.ledger.requeueExpired(
        deadline.project,
        {
          handoff_id: deadline.handoffId,
          claim_id: deadline.claimId,
          idempotency_key: requeueKey(deadline.handoffId, deadline.claimId),
        },
        trace !== undefined ? { trace } : undefined,
      );
      if (reply.ok) return { kind: 'requeued', deadline };
      if (reply.error.kind === 'unavailable') return { kind: 'failed', deadline, error: reply.error };
      return { kind: 'refused', deadline, code: reply.error.code, expected: ExpectedRefusals.has(reply.error.code) };
    } catch (error) {
      return { kind: 'failed', deadline, error };
    }
  }

  private report(outcome: RequeueOutcome): void {
    const { deadline } = outcome;
    const log = this.opts.logger.child({
      handoff_id: deadline.handoffId,
      project: deadline.project,
      claim_id: deadline.claimId,
      lease_expires_at: new Date(deadline.leaseExpiresAt).toISOString(),
    });
    switch (outcome.kind) {
      case 'deferred':
        log.debug('deadline due; reading the events stored before it first', { behind: outcome.behind });
        break;
      case 'requeued':
        log.info('requeue_expired sent for an expired lease');
        break;
      case 'refused':
        if (outcome.expected) log.debug('requeue_expired refused (expected when racing)', { code: outcome.code });
        else log.warn('requeue_expired refused', { code: outcome.code });
        break;
      case 'failed': {
        // A ledger at its in-flight bound answered, and did nothing: not "no answer".
        const overloaded = (outcome.error as { code?: unknown } | null)?.code === LedgerErrorCode.overloaded;
        log.warn(
          overloaded ? 'requeue_expired: the ledger was overloaded and did nothing; will retry' : 'requeue_expired got no answer; will retry',
          describe(outcome.error),
        );
        break;
      }
      default:
        return assertNever(outcome, 'requeue outcome');
    }
    this.opts.onOutcome?.(outcome);
  }
}

/** Most deferred deadlines remembered at once. */
const MAX_MARKS = 10_000;

const markKey = (d: Deadline) => `${d.project}\u0000${d.handoffId}\u0000${d.claimId}`;

function describe(error: unknown): Record<string, unknown> {
  if (error instanceof Error) return { err: { name: error.name, message: error.message } };
  if (typeof error === 'object' && error !== null) return { err: error };
  return { err: String(error) };
}
