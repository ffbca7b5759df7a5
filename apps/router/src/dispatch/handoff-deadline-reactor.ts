import { Inject, Injectable } from '@nestjs/common';
import type { HandoffEvent } from '@baton/contracts';
import { HandoffFailureReason, RunErrorCode, handoffClaimFold, handoffRun, type HandoffState } from '@baton/domain';
import { PoisonError, reactor, type HopTrace, type Reactor, type ReactorEvent } from '@baton/eventstore';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { RunCommands, runRef } from '../runs/run-commands';
import { ROUTER_ACTOR } from '../shared/ids';

type HandoffDeadlineExpiredEvent = ReactorEvent<Extract<HandoffEvent, { type: 'handoff.deadline_expired' }>>;
type HandoffEndedEvent = ReactorEvent<Extract<HandoffEvent, { type: 'handoff.failed' | 'handoff.abandoned' | 'handoff.released' | 'handoff.completed' }>>;

/**
 * The code on the run when a handoff it waits on ended without a result: `handoff_failed` /
 * `handoff_abandoned` / `handoff_released`, or `handoff_returned` — its claimer returned it (a
 * report for review, not a result) and the review accepted it, closing it with nothing to route on.
 */
export const HandoffEndedCode = {
  failed: 'handoff_failed',
  abandoned: 'handoff_abandoned',
  released: 'handoff_released',
  returned: 'handoff_returned',
} as const;

/** The code on `run.handoff_completed` (outcome `timeout`) when a child's deadline passed. */
export const HANDOFF_DEADLINE_CODE = 'deadline';

/**
 * The router's reactor over handoff events (`<prefix>.ev.*.handoff.*`, the ledger's aggregate,
 * read-only here): it closes the loop of a run's handoff that ends without a result — past its
 * deadline (issue 5), below, or failed / abandoned ({@link HandoffDeadlineReactor.ended}).
 *
 * `handoff.deadline_expired` (the watchdog expired a handoff still pending or claimed past its
 * `deadline_at`) of a handoff that belongs to a workflow run (`workflow_run_id` on its
 * `handoff.created`, kept in the handoff's folded state, read from the store's fold cache)
 * becomes the run command `handoff_failed` with reason `timeout`, sent to the run in ITS project
 * (on a cross-project handoff, which lives in the target project, that is `source_project`): when
 * it is the run's pending child handoff, the run records `run.handoff_completed` (outcome `timeout`,
 * durationMs, cause, code `deadline`) and the waiting parent resumes per its ON_FAILURE
 * (continue / RESPOND / ESCALATE). The command's time is the expiry's event time, so every
 * instance and every redelivery decides alike.
 *
 * Idempotent: the run's events get ids derived from the deadline event's id (a redelivery
 * re-publishes the same Nats-Msg-Ids), and the decider ignores a handoff that is no longer pending
 * (its child already produced a result or returned, or the timeout was applied before): no-op.
 * Every other handoff event, and a handoff with no run (or whose run does not exist), is ignored.
 * A run whose definition cannot be found is a PoisonError (dead letter: an SRE must look);
 * store faults propagate (the transport naks and retries).
 */
@Injectable()
export class HandoffDeadlineReactor {
  /** The reactor table: `handoff.deadline_expired`, with the handoff as it stood before it. */
  readonly table: Reactor<HandoffEvent, HandoffState> = reactor({
    name: 'handoff-deadline reactor',
    aggregate: 'handoff',
    // The claim readers' fold (no work item), so this reactor and the claim check share one cache entry.
    decider: handoffClaimFold,
    on: {
      'handoff.deadline_expired': (event, state, ctx) => this.timeOut(event, state.before, ctx.trace),
      'handoff.failed': (event, state, ctx) => this.ended(event, state.before, ctx.trace),
      'handoff.abandoned': (event, state, ctx) => this.ended(event, state.before, ctx.trace),
      'handoff.released': (event, state, ctx) => this.ended(event, state.before, ctx.trace),
      // A returned handoff whose handback was accepted: completed, and no result ever came.
      'handoff.completed': (event, state, ctx) => this.ended(event, state.before, ctx.trace),
    },
  });

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly runs: RunCommands,
  ) {}

  /**
   * A handoff of a run that ended without a result — failed by its claimer or a person, abandoned
   * by a person or by the router (its abandon of a stopped run's handoff: the run is stopped, so a
   * pending returnable child's end is recorded, `run.handoff_completed`, and nothing else moves —
   * without it the child stayed pending and its parent waiting for ever, even once the run was
   * terminated), released by its claimer (declined: a released handoff is never offered again) —
   * becomes `handoff_failed` with reason `ended`: a pending returnable child applies its ON_FAILURE
   * (a running run) or is recorded as ended (a stopped or held one), the handoff the running run's
   * agent worked on holds the run for a person; anything else is a no-op (see the run decider: an
   * answered stop routes on with a new handoff, so the router's abandon of the old one never holds it).
   */
  private async ended(envelope: HandoffEndedEvent, handoff: HandoffState, trace: HopTrace): Promise<void> {
    const data = envelope.payload;
    const ending = endingOf(envelope);
    const by = ending.by;
    const created = handoff.status === 'absent' ? null : handoff;
    const run = created === null ? null : handoffRun(created);
    if (run === null) return;
    const code = ending.code;
    const message = `${ending.verb} by ${by}: ${ending.reason}`;
    const log = this.runtime.logger.child({ trace_id: trace.traceId, project: envelope.project, handoff_id: data.handoff_id, event_id: envelope.id });
    const outcome = await this.runs.runWithDefinitions(
      runRef(run.project, run.workflow_run_id),
      (definitions) => ({
        kind: 'handoff_failed',
        failure: { handoff_id: data.handoff_id, code, message, reason: HandoffFailureReason.ended },
        definitions,
        metadata: { now: data.at, actor: ROUTER_ACTOR },
      }),
      { kind: 'handoff_failed', id: envelope.id, actor: ROUTER_ACTOR, origin: 'engine_fallback', workflowRunId: run.workflow_run_id, now: data.at, trace },
    );
    if (!outcome.ok) {
      // A run that does not exist, or is not this router's to decide now: the handoff was the run's business only if the run could take it.
      log.warn('a run handoff ended without a result; the run did not take it', { workflow_run_id: run.workflow_run_id, code: outcome.error.code });
      return;
    }
    if (outcome.events.length > 0)
      log.warn('a run handoff ended without a result; the run applied it', { workflow_run_id: run.workflow_run_id, events: outcome.events.map((e) => e.type) });
  }

  private async timeOut(envelope: HandoffDeadlineExpiredEvent, handoff: HandoffState, trace: HopTrace): Promise<void> {
    const expired = envelope.payload;
    const handoffId = expired.handoff_id;
    const log = this.runtime.logger.child({ trace_id: trace.traceId, project: envelope.project, handoff_id: handoffId, event_id: envelope.id });
    // What the handoff's `handoff.created` said (never changed by a later event).
    const created = handoff.status === 'absent' ? null : handoff;
    const run = created === null ? null : handoffRun(created);
    if (run === null) {
      log.debug('deadline of a handoff outside any run: ignored');
      return;
    }
    const workflowRunId = run.workflow_run_id;
    const now = expired.at;
    const message = `no result from ${created?.to_agent ?? 'the target'} by ${expired.deadline_at}${expired.claimed_by !== undefined ? ` (claimed by ${expired.claimed_by})` : ''}`;
    const outcome = await this.runs.runWithDefinitions(
      runRef(run.project, workflowRunId),
      (definitions) => ({
        kind: 'handoff_failed',
        failure: { handoff_id: handoffId, code: HANDOFF_DEADLINE_CODE, message, reason: HandoffFailureReason.timeout },
        definitions,
        metadata: { now, actor: ROUTER_ACTOR },
      }),
      { kind: 'handoff_failed', id: envelope.id, actor: ROUTER_ACTOR, origin: 'watchdog', workflowRunId, now, trace },
    );
    if (!outcome.ok) {
      if (outcome.error.code === RunErrorCode.runNotFound) {
        log.warn('deadline of a handoff whose run does not exist: ignored', { workflow_run_id: workflowRunId, run_project: run.project });
        return;
      }
      throw new PoisonError(
        `handoff ${handoffId} timed out and ON_FAILURE could not run: ${outcome.error.code}: ${outcome.error.message}`,
        'timeout_not_applied',
      );
    }
    if (outcome.events.length === 0) {
      log.info('deadline of a handoff that is no longer pending (already ran, returned or timed out): no-op', { workflow_run_id: workflowRunId });
      return;
    }
    log.warn('returnable handoff timed out; ON_FAILURE applied', { workflow_run_id: workflowRunId, events: outcome.events.map((e) => e.type) });
  }
}

/** How a handoff ended without a result: the run's code, the verb its reason uses, and who ended it. */
function endingOf(envelope: HandoffEndedEvent): { code: string; verb: string; by: string; reason: string } {
  switch (envelope.type) {
    case 'handoff.failed':
      return { code: HandoffEndedCode.failed, verb: 'failed', by: envelope.payload.failed_by, reason: envelope.payload.reason };
    case 'handoff.abandoned':
      return { code: HandoffEndedCode.abandoned, verb: 'abandoned', by: envelope.payload.abandoned_by, reason: envelope.payload.reason };
    case 'handoff.released':
      return { code: HandoffEndedCode.released, verb: 'released', by: envelope.payload.released_by, reason: envelope.payload.reason };
    case 'handoff.completed':
      return {
        code: HandoffEndedCode.returned,
        verb: 'returned, its handback accepted',
        by: envelope.payload.accepted_by,
        reason: `handback ${envelope.payload.handback_id} (a return is a report for review; the run routes on a result)`,
      };
  }
}
