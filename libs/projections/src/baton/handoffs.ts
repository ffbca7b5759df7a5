import { HandoffStatus, type HandoffEvent, type HandoffRecord } from '@baton/contracts';
import { evolveHandoff, initialHandoffState, toHandoffRecord, type HandoffState } from '@baton/domain';
import type { JsonValue } from '../canonical-json';
import { Op, type ProjectionOp } from '../ops';
import type { SequencedEvent } from '../store';
import { domainEvent, timelineOp } from './common';
import { ID_LOOKUP_KEY, idLookupMember, projectRef } from './refs';
import { toJson, type FoldingProjection } from './fold';

/**
 * Keys of the `handoffs` projection (relative to its generation). A handoff is named by its
 * project and id (`<project>:<id>`, see {@link projectRef}): the same handoff id in two projects
 * is two handoffs, each with its own record, claim and timeline. The ref is always the last part.
 */
export const HandoffKeys = {
  /**
   * The folded HandoffState the next event evolves (JSON; `recent_keys` left empty), from which
   * the HandoffRecord is rendered when read ({@link handoffRecordOfState}).
   */
  state: (project: string, id: string) => `hs:${projectRef(project, id)}`,
  /** Sorted set of TimelineEntry JSON scored by stream seq. */
  timeline: (project: string, id: string) => `ht:${projectRef(project, id)}`,
  /**
   * Sorted set of the handoffs a workflow run (of `project`) created, scored by the seq that
   * created them; members are handoff refs `<project>:<id>` (a cross-project handoff lives in its
   * target project, the run in the source project).
   */
  byRun: (project: string, workflowRunId: string) => `hr:${projectRef(project, workflowRunId)}`,
  /** The id lookup (members `<id> <project>`): which projects hold a handoff of a given id. */
  ids: ID_LOOKUP_KEY,
  /**
   * Sorted set of the handoffs in an open status (pending, claimed, returned), members
   * `<project>:<id>` scored by the seq that brought them there: counted by the open-handoffs
   * gauge with ZCARD instead of reading every handoff. A handoff leaves it when its status changes.
   */
  byOpenStatus: (status: OpenHandoffStatus) => `hq:${status}`,
  /** True for the key of a handoff's folded state (`hs:<project>:<id>`), whatever the id holds. */
  isState: (key: string): boolean => key.startsWith('hs:'),
} as const;

/**
 * The HandoffRecord of a handoff as the `handoffs` projection stores it: rendered from its folded
 * state with the domain's `toHandoffRecord` (what the ledger computes), or null when there is no
 * handoff. The record is not stored beside the state: both held nearly the same 1–2 KB, and both
 * were written again on every handoff event.
 */
export function handoffRecordOfState(stored: JsonValue | null): HandoffRecord | null {
  if (stored === null || typeof stored !== 'object' || Array.isArray(stored) || typeof stored['status'] !== 'string') return null;
  return toHandoffRecord(stored as unknown as HandoffState);
}

/** One sentence per handoff event for the timeline. */
export function summarizeHandoffEvent(event: HandoffEvent): string {
  switch (event.type) {
    case 'handoff.created': {
      const d = event.data;
      const to = d.to_agent ?? (d.to_role ? `role ${d.to_role}` : 'any agent');
      return `created ${d.kind} (${d.priority}) from ${d.from_agent} to ${to}: ${d.summary}`;
    }
    case 'handoff.claimed':
      return `claimed by ${event.data.claimed_by}; lease until ${event.data.lease_expires_at}`;
    case 'handoff.heartbeat':
      return `lease extended to ${event.data.lease_expires_at}`;
    case 'handoff.returned':
      return `returned by ${event.data.returned_by} (${event.data.report.outcome}${event.data.evidence_floor ? ', evidence floor applied' : ''}); handback ${event.data.handback_id}`;
    case 'handoff.handback_decided':
      return `handback ${event.data.decision === 'accept' ? 'accepted' : 'sent back for rework'} by ${event.data.decided_by}${event.data.note ? `: ${event.data.note}` : ''}`;
    case 'handoff.completed':
      return `completed; handback accepted by ${event.data.accepted_by}`;
    case 'handoff.completed_by_result': {
      const d = event.data;
      const voided = d.lapse_voided
        ? `; the lapse of ${d.lapse_voided.claimer}'s claim ${d.lapse_voided.claim_id} is void (the result was accepted before it; retry back to ${d.lapse_voided.retry_count})`
        : '';
      return `completed by ${d.agent}'s result ${d.result_id} (${d.report.outcome})${voided}`;
    }
    case 'handoff.reworked':
      return `back to pending for rework (retry ${event.data.retry_count}) by ${event.data.reworked_by}: ${event.data.note}`;
    case 'handoff.released':
      return `released by ${event.data.released_by}: ${event.data.reason}`;
    case 'handoff.lease_expired':
      return `lease of ${event.data.expired_claimer} expired; requeued (retry ${event.data.retry_count})`;
    case 'handoff.escalated': {
      const o = event.data.outcome;
      const gaveUp = event.data.given_up !== undefined ? ` after ${event.data.given_up.by} gave up its offer unclaimed: ${event.data.given_up.reason}` : '';
      return 'escalate_to' in o
        ? `retry cap ${event.data.max_retries} reached (${event.data.cause}); escalated to ${o.escalate_to}${gaveUp}`
        : `retry cap ${event.data.max_retries} reached (${event.data.cause}); nobody to escalate to (${o.stop_why}): ${o.detail}${gaveUp}`;
    }
    case 'handoff.abandoned':
      return `abandoned by ${event.data.abandoned_by}${event.data.abandoned_by_project !== undefined ? ` of project ${event.data.abandoned_by_project}` : ''}: ${event.data.reason}`;
    case 'handoff.failed':
      return `failed (${event.data.failed_by}): ${event.data.reason}`;
    case 'handoff.deadline_expired':
      return `deadline ${event.data.deadline_at} passed; failed (deadline)`;
    case 'handoff.archived':
      return `archived from ${event.data.archived_from} by ${event.data.archived_by}`;
    case 'handoff.offer_given_up': {
      const d = event.data;
      return `offer given up by ${d.given_up_by} unclaimed after ${d.deliveries} deliveries (retry ${d.retry_count}): ${d.reason}`;
    }
    case 'handoff.review_reopened':
      return `review reopened: handback ${event.data.previous_handback_id} ${event.data.ended.replace('_', ' ')} undecided; new handback ${event.data.handback_id}`;
    default: {
      const never: never = event;
      return `event ${(never as { type: string }).type}`;
    }
  }
}

/** Handoff statuses that count as open (not yet completed, released, abandoned, failed or archived). */
export const OPEN_HANDOFF_STATUSES = [HandoffStatus.pending, HandoffStatus.claimed, HandoffStatus.returned] as const;
export type OpenHandoffStatus = (typeof OPEN_HANDOFF_STATUSES)[number];

function isOpenHandoffStatus(status: string): status is OpenHandoffStatus {
  return (OPEN_HANDOFF_STATUSES as readonly string[]).includes(status);
}

/**
 * The `handoffs` projection: per handoff, its folded state (the domain's `evolveHandoff` fold,
 * exactly what the ledger computes; the HandoffRecord is rendered from it when read,
 * {@link handoffRecordOfState}) and its timeline; per workflow run, the handoffs it created.
 */
export function handoffsProjection(): FoldingProjection<JsonValue> {
  return {
    name: 'handoffs',
    // 2: keys hold the project as well as the id (`h:<project>:<id>`...), plus the id lookup.
    // 3: the record is rendered from the folded state when read (no `h:` key): one value written
    //    per handoff event instead of two nearly alike.
    // 4: the open handoffs by status (`hq:<status>`), counted without reading the states.
    // 5: the folded state keeps the claim a lapse took back (`lapsed_claim`), and a completion that
    //    voids that lapse restores the retry count (docs/handoffs.md rule 4a).
    // 6: an escalation with nobody to consult reads "nobody to escalate to" (terminal reason and
    //    timeline; it said "stop requested", which a handoff of no run never gets).
    // 7: the folded state keeps the last rework (`last_rework`: who, when, the note), which the
    //    record shows.
    // 8: the claim a lapse took back keeps its lease's expiry (`lapsed_claim.lease_expires_at`):
    //    the router accepts a result stored by then under it (docs/handoffs.md rule 4b).
    // 9: the claim keeps its claimer's kind (`claim.claimed_by_kind`) and a completion handback the
    //    reviewed worker's (`reviewed_worker_kind`), which the record shows: the worker is kind and
    //    name (docs/handoffs.md rule 12).
    version: 9,
    handles: (type) => type.startsWith('handoff.'),
    stateKeyOf: (event) => HandoffKeys.state(event.project, event.aggregate.id),
    step(prior, event: SequencedEvent) {
      const { project } = event;
      const id = event.aggregate.id;
      const domain = domainEvent<HandoffEvent>(event);
      const before = (prior as HandoffState | null) ?? initialHandoffState();
      const after = evolveHandoff(before, domain);
      const ops: ProjectionOp[] = [timelineOp(HandoffKeys.timeline(project, id), event, summarizeHandoffEvent(domain))];
      if (after === before) return { ops };
      if (after.status !== 'absent' && before.status === 'absent') ops.push(Op.zadd(HandoffKeys.ids, 0, idLookupMember(project, id)));
      if (after.status !== before.status) {
        if (isOpenHandoffStatus(before.status)) ops.push(Op.zrem(HandoffKeys.byOpenStatus(before.status), projectRef(project, id)));
        if (isOpenHandoffStatus(after.status)) ops.push(Op.zadd(HandoffKeys.byOpenStatus(after.status), event.seq, projectRef(project, id)));
      }
      if (domain.type === 'handoff.created' && domain.data.workflow_run_id !== undefined) {
        // The run lives in the delegator's project (`source_project` on a cross-project handoff).
        const runProject = domain.data.source_project ?? project;
        ops.push(Op.zadd(HandoffKeys.byRun(runProject, domain.data.workflow_run_id), event.seq, projectRef(project, id)));
      }
      // The projection never decides, so it needs no idempotency keys: keep the stored state small.
      const state = after.status === 'absent' ? after : { ...after, recent_keys: [] };
      return { state: toJson(state), ops };
    },
  };
}
