import type { HandoffEvent, HandoffEventType } from '@baton/contracts';
import { assertNever } from '@baton/domain';
import type { DeadlineTable } from './deadline-table';

/**
 * What one handoff event does to the lease table, mirroring `evolveHandoff` for the only question
 * the watchdog asks ("is it claimed, under which claim, until when?"):
 * - `claim`: pending → claimed, track the new lease;
 * - `extend`: a heartbeat moved the lease;
 * - `clear`: the event ends a claim (return, release, expiry requeue, escalation, abandon, fail,
 *   a decided handback, a result recorded by the handoff's run);
 * - `none`: the event never applies to a claimed handoff.
 * A `Record` over every event type, so a new handoff event type fails to compile until it is
 * classified here.
 */
export const DeadlineEffectByType: Record<HandoffEventType, 'claim' | 'extend' | 'clear' | 'none'> = {
  'handoff.created': 'none',
  'handoff.claimed': 'claim',
  'handoff.heartbeat': 'extend',
  'handoff.returned': 'clear',
  'handoff.handback_decided': 'clear',
  'handoff.completed': 'none',
  'handoff.completed_by_result': 'clear',
  'handoff.reworked': 'none',
  'handoff.released': 'clear',
  'handoff.lease_expired': 'clear',
  'handoff.escalated': 'clear',
  'handoff.abandoned': 'clear',
  'handoff.failed': 'clear',
  'handoff.archived': 'none',
  'handoff.deadline_expired': 'clear',
  'handoff.review_reopened': 'none',
  'handoff.offer_given_up': 'none',
};

/** The effect of an event type read from a stream header; `unknown` for a type this build does not know. */
export function deadlineEffectOf(type: string): 'claim' | 'extend' | 'clear' | 'none' | 'unknown' {
  return Object.prototype.hasOwnProperty.call(DeadlineEffectByType, type) ? DeadlineEffectByType[type as HandoffEventType] : 'unknown';
}

/**
 * Apply one (decoded) handoff event of `project` to the table. Idempotent for a replayed suffix:
 * applying the same claim or heartbeat again sets the same lease.
 */
export function applyHandoffEvent(table: DeadlineTable, project: string, event: HandoffEvent, traceparent?: string): void {
  switch (event.type) {
    case 'handoff.claimed':
      table.claim(event.data.handoff_id, project, event.data.claim_id, Date.parse(event.data.lease_expires_at), traceparent);
      return;
    case 'handoff.heartbeat':
      table.extend(project, event.data.handoff_id, Date.parse(event.data.lease_expires_at));
      return;
    case 'handoff.returned':
    case 'handoff.handback_decided':
    case 'handoff.completed_by_result':
    case 'handoff.released':
    case 'handoff.lease_expired':
    case 'handoff.escalated':
    case 'handoff.abandoned':
    case 'handoff.failed':
    case 'handoff.deadline_expired':
      table.release(project, event.data.handoff_id);
      return;
    case 'handoff.created':
    case 'handoff.completed':
    case 'handoff.reworked':
    case 'handoff.archived':
    case 'handoff.review_reopened':
    case 'handoff.offer_given_up':
      return;
    default:
      return assertNever(event, 'handoff event');
  }
}
