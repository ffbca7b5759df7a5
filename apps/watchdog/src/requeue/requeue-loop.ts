import { assertNever } from '@baton/domain';
import type { JsonLogger } from '@baton/platform';
import type { Deadline, DeadlineTable } from '../deadlines/deadline-table';
import { ExpectedRefusals, requeueKey, type RequeueLedger } from './requeue-port';

/** What became of one `requeue_expired` request (for logs, tests and, later, metrics). */
export type RequeueOutcome =
  | { kind: 'requeued'; deadline: Deadline }
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
    const due = this.opts.table.takeDue(this.now(), this.opts.batch);
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

  private async requeue(deadline: Deadline): Promise<RequeueOutcome> {
    try {
      const reply = await this.opts.ledger.requeueExpired(deadline.project, {
        handoff_id: deadline.handoffId,
        claim_id: deadline.claimId,
        idempotency_key: requeueKey(deadline.handoffId, deadline.claimId),
      });
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
      case 'requeued':
        log.info('requeue_expired sent for an expired lease');
        break;
      case 'refused':
        if (outcome.expected) log.debug('requeue_expired refused (expected when racing)', { code: outcome.code });
        else log.warn('requeue_expired refused', { code: outcome.code });
        break;
      case 'failed':
        log.warn('requeue_expired got no answer; will retry', describe(outcome.error));
        break;
      default:
        return assertNever(outcome, 'requeue outcome');
    }
    this.opts.onOutcome?.(outcome);
  }
}

function describe(error: unknown): Record<string, unknown> {
  if (error instanceof Error) return { err: { name: error.name, message: error.message } };
  if (typeof error === 'object' && error !== null) return { err: error };
  return { err: String(error) };
}
