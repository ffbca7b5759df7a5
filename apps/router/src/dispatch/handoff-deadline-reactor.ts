import { Inject, Injectable } from '@nestjs/common';
import { HandoffEventSchemas, type EventEnvelope } from '@baton/contracts';
import { HandoffFailureReason, RunErrorCode } from '@baton/domain';
import { PoisonError } from '@baton/eventstore';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import type { z } from 'zod';
import { RunCommands, runRef } from '../runs/run-commands';
import { ROUTER_ACTOR } from '../shared/ids';

type HandoffDeadlineExpired = z.infer<(typeof HandoffEventSchemas)['handoff.deadline_expired']>;
type HandoffCreated = z.infer<(typeof HandoffEventSchemas)['handoff.created']>;

/** The code on `run.handoff_completed` (outcome `timeout`) when a child's deadline passed. */
export const HANDOFF_DEADLINE_CODE = 'deadline';

/**
 * The router's reactor over handoff events (`<prefix>.ev.*.handoff.*`, the ledger's aggregate,
 * read-only here): it closes the loop of a returnable handoff's deadline (issue 5).
 *
 * `handoff.deadline_expired` (the watchdog expired a handoff still pending or claimed past its
 * `deadline_at`) of a handoff that belongs to a workflow run (`workflow_run_id` on its
 * `handoff.created`) becomes the run command `handoff_failed` with reason `timeout`: when it is the
 * run's pending child handoff, the run records `run.handoff_completed` (outcome `timeout`,
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
  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    private readonly runs: RunCommands,
  ) {}

  /** Handle one stored handoff event. */
  async handle(raw: unknown): Promise<void> {
    const decoded = this.runtime.registry.decode(raw);
    if (!decoded.ok) throw new PoisonError(`handoff event cannot be decoded: ${decoded.rejection.message}`, decoded.rejection.code);
    const envelope = decoded.value;
    if (envelope.type !== 'handoff.deadline_expired') return;
    await this.timeOut(envelope as EventEnvelope<HandoffDeadlineExpired>);
  }

  private async timeOut(envelope: EventEnvelope<HandoffDeadlineExpired>): Promise<void> {
    const expired = envelope.payload;
    const handoffId = expired.handoff_id;
    const log = this.runtime.logger.child({ project: envelope.project, handoff_id: handoffId, event_id: envelope.id });
    const created = await this.createdEvent(envelope.project, handoffId);
    const workflowRunId = created?.workflow_run_id;
    if (workflowRunId === undefined) {
      log.debug('deadline of a handoff outside any run: ignored');
      return;
    }
    const now = expired.at;
    const message = `no result from ${created?.to_agent ?? 'the target'} by ${expired.deadline_at}${expired.claimed_by !== undefined ? ` (claimed by ${expired.claimed_by})` : ''}`;
    const outcome = await this.runs.runWithDefinitions(
      runRef(envelope.project, workflowRunId),
      (definitions) => ({
        kind: 'handoff_failed',
        failure: { handoff_id: handoffId, code: HANDOFF_DEADLINE_CODE, message, reason: HandoffFailureReason.timeout },
        definitions,
        metadata: { now, actor: ROUTER_ACTOR },
      }),
      { kind: 'handoff_failed', id: envelope.id, actor: ROUTER_ACTOR, origin: 'watchdog', workflowRunId, now },
    );
    if (!outcome.ok) {
      if (outcome.error.code === RunErrorCode.runNotFound) {
        log.warn('deadline of a handoff whose run does not exist: ignored', { workflow_run_id: workflowRunId });
        return;
      }
      throw new PoisonError(`handoff ${handoffId} timed out and ON_FAILURE could not run: ${outcome.error.code}: ${outcome.error.message}`, 'timeout_not_applied');
    }
    if (outcome.events.length === 0) {
      log.info('deadline of a handoff that is no longer pending (already ran, returned or timed out): no-op', { workflow_run_id: workflowRunId });
      return;
    }
    log.warn('returnable handoff timed out; ON_FAILURE applied', { workflow_run_id: workflowRunId, events: outcome.events.map((e) => e.type) });
  }

  /** The handoff's `handoff.created` (its first event), or null when its stream holds none. */
  private async createdEvent(project: string, handoffId: string): Promise<HandoffCreated | null> {
    const { events } = await this.runtime.store.read({ project, kind: 'handoff', id: handoffId });
    const created = events.find((event) => event.type === 'handoff.created');
    return created === undefined ? null : (created.payload as HandoffCreated);
  }
}
