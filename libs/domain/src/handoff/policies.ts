import type { CompletionReport, EvidenceFloor, HandoffCommandMetadata, HandoffEvent, HandoffEventData, HandoffPriority } from '@baton/contracts';
import { clipText as clip } from '@baton/contracts';
import { assertNever } from '../decider';
import type { CreateHandoff, HandoffCommand } from './commands';
import { handoffRun } from './run-ref';
import type { ExistingHandoff, HandoffState } from './state';

/*
 * Cross-aggregate effects of handoff events, as pure policies (reactors). The decider of one
 * handoff never writes another handoff; instead the ledger feeds every appended event through
 * {@link reactToHandoffEvent} and sends the commands it returns to their aggregates. Every command
 * a policy returns carries a deterministic id and idempotency key derived from the event, so
 * running a policy twice (redelivery, restart) decides the same command twice and the second time
 * the target's idempotency check yields no events.
 */

/** The actor name the ledger's policies act under (actor kind `system`). */
export const LEDGER_ACTOR = 'baton-ledger';

/** What a policy may use besides the event. All of it is supplied by the ledger. */
export interface HandoffReactionContext {
  /** The state of the handoff that emitted the event, after the event was applied. */
  state: HandoffState;
  /**
   * Derives an id from its parts. MUST be deterministic (same parts, same id) and return a valid
   * Id (the ledger hashes the parts); it is how policy-created handoffs and keys stay idempotent.
   */
  deriveId: (...parts: string[]) => string;
  /** The project's default lead, looked up by the ledger (used when a rework hits the retry cap). */
  projectLead?: string;
}

/** A command for a handoff aggregate, as a policy returns it. */
export interface HandoffReaction {
  aggregateId: string;
  command: HandoffCommand;
}

function systemMetadata(at: string): HandoffCommandMetadata {
  return { now: at, actor: LEDGER_ACTOR, actorKind: 'system' };
}

const PriorityRank: Record<HandoffPriority, number> = { low: 0, medium: 1, high: 2, urgent: 3 };

/**
 * The run a handoff derived from `origin` (its handback, its escalation's consult) carries: the
 * origin's, when that run is in the project both live in. A cross-project origin's run is its
 * source project's, and the derived handoff (created in the target project, with no
 * `source_project`) could only pair that id with the wrong project — so it names no run.
 */
function runOfDerived(origin: ExistingHandoff): { workflow_run_id?: string } {
  const run = handoffRun(origin);
  return run !== null && run.project === origin.project ? { workflow_run_id: run.workflow_run_id } : {};
}

/**
 * On `handoff.returned` (and `handoff.review_reopened`, the same review opened again): create the
 * completion handback (kind `completion_handback`, `reply_to_handoff_id` = the parent, id = the
 * event's `handback_id`) addressed to the recipient the return chose, carrying the worker it
 * reviews so that worker can never accept it. A reopened review carries the report the parent
 * keeps from its return.
 */
export function handbackPolicy(
  event:
    | { type: 'handoff.returned'; data: HandoffEventData<'handoff.returned'> }
    | { type: 'handoff.review_reopened'; data: HandoffEventData<'handoff.review_reopened'> },
  parent: HandoffState,
  context: Pick<HandoffReactionContext, 'deriveId'>,
): HandoffReaction[] {
  if (parent.status === 'absent') return [];
  let report: CompletionReport;
  let floor: EvidenceFloor | undefined;
  if (event.type === 'handoff.returned') {
    report = event.data.report;
    floor = event.data.evidence_floor;
  } else {
    // Reopened: the parent is still returned with that report (else the decider emitted nothing).
    if (parent.status !== 'returned' || parent.handback_id !== event.data.handback_id) return [];
    report = parent.completion_report;
    floor = parent.evidence_floor;
  }
  const d = { ...event.data, report, evidence_floor: floor };
  const recipient = d.handback_recipient;
  const create: CreateHandoff = {
    type: 'create',
    data: {
      handoff_id: d.handback_id,
      project: parent.project,
      kind: 'completion_handback',
      priority: parent.priority,
      from_agent: d.worker,
      ...('to_agent' in recipient ? { to_agent: recipient.to_agent } : { to_role: recipient.to_role }),
      reply_to_handoff_id: d.handoff_id,
      reviewed_worker: d.worker,
      // What the worker is (its claim's kind, recorded on the return or the reopened review): the
      // handback's self-decision rule compares kind and name. Absent when it was not recorded.
      ...(d.worker_kind !== undefined ? { reviewed_worker_kind: d.worker_kind } : {}),
      summary: clip(`Review the return of ${d.handoff_id}: ${d.report.summary}`),
      context: {
        completion_report: d.report,
        ...(d.evidence_floor ? { evidence_floor: d.evidence_floor } : {}),
        parent_summary: parent.summary,
      },
      acceptance: parent.acceptance,
      max_retries: 0,
      ...(parent.parent_goal_id !== undefined ? { parent_goal_id: parent.parent_goal_id } : {}),
      ...runOfDerived(parent),
      idempotency_key: context.deriveId('handback-create', d.handback_id),
    },
    metadata: systemMetadata(d.at),
  };
  return [{ aggregateId: d.handback_id, command: create }];
}

/**
 * On `handoff.handback_decided`: accept → the parent completes; rework → the parent goes back to
 * pending with retry_count + 1, or escalates (consult to the lead) when that would pass the cap.
 * The parent's decider checks the handback id, so a stale handback can never move the parent.
 */
export function handbackDecisionPolicy(
  event: { type: 'handoff.handback_decided'; data: HandoffEventData<'handoff.handback_decided'> },
  context: Pick<HandoffReactionContext, 'deriveId' | 'projectLead'>,
): HandoffReaction[] {
  const d = event.data;
  const parentId = d.parent_handoff_id;
  const metadata = systemMetadata(d.at);
  if (d.decision === 'accept') {
    return [
      {
        aggregateId: parentId,
        command: {
          type: 'complete_from_handback',
          data: {
            handoff_id: parentId,
            handback_id: d.handoff_id,
            accepted_by: d.decided_by,
            idempotency_key: context.deriveId('handback-accept', d.handoff_id),
          },
          metadata,
        },
      },
    ];
  }
  return [
    {
      aggregateId: parentId,
      command: {
        type: 'rework_from_handback',
        data: {
          handoff_id: parentId,
          handback_id: d.handoff_id,
          note: d.note ?? '',
          reworked_by: d.decided_by,
          ...(context.projectLead !== undefined ? { project_lead: context.projectLead } : {}),
          escalation_handoff_id: context.deriveId('escalation', parentId, d.handoff_id),
          idempotency_key: context.deriveId('handback-rework', d.handoff_id),
        },
        metadata,
      },
    },
  ];
}

/**
 * On `handoff.escalated` with `escalate_to`: create the CONSULT handoff to the lead (id from the
 * event), replying to the escalated handoff. The `stop_why` variant creates nothing here: the
 * watchdog turns it into a stop request for the handoff's workflow run.
 */
export function escalationPolicy(
  event: { type: 'handoff.escalated'; data: HandoffEventData<'handoff.escalated'> },
  escalated: HandoffState,
  context: Pick<HandoffReactionContext, 'deriveId'>,
): HandoffReaction[] {
  if (escalated.status === 'absent') return [];
  const d = event.data;
  if (!('escalate_to' in d.outcome)) return [];
  const consultId = d.outcome.consult_handoff_id;
  const priority: HandoffPriority = PriorityRank[escalated.priority] >= PriorityRank.high ? escalated.priority : 'high';
  const create: CreateHandoff = {
    type: 'create',
    data: {
      handoff_id: consultId,
      project: escalated.project,
      kind: 'consult',
      priority,
      from_agent: escalated.from_agent,
      to_agent: d.outcome.escalate_to,
      reply_to_handoff_id: d.handoff_id,
      summary: clip(`Escalation: ${d.handoff_id} hit its retry cap (${d.max_retries}) after ${d.cause}: ${escalated.summary}`),
      context: {
        escalated_handoff_id: d.handoff_id,
        cause: d.cause,
        attempted_retry: d.attempted_retry,
        ...(d.note !== undefined ? { note: d.note } : {}),
      },
      acceptance: {},
      max_retries: 0,
      ...(escalated.parent_goal_id !== undefined ? { parent_goal_id: escalated.parent_goal_id } : {}),
      ...runOfDerived(escalated),
      idempotency_key: context.deriveId('escalation-create', consultId),
    },
    metadata: systemMetadata(d.at),
  };
  return [{ aggregateId: consultId, command: create }];
}

/** The terminal events that end a handback without a decision, and the `ended` they are reported as. */
const UNDECIDED_ENDS: Partial<Record<HandoffEvent['type'], 'released' | 'abandoned' | 'failed' | 'escalated' | 'deadline_expired'>> = {
  'handoff.released': 'released',
  'handoff.abandoned': 'abandoned',
  'handoff.failed': 'failed',
  'handoff.escalated': 'escalated',
  'handoff.deadline_expired': 'deadline_expired',
};

/**
 * On a completion handback ending without a decision (its reviewer released it, a person abandoned
 * or failed it; `escalated` and `deadline_expired` end none today — a review's lapse only requeues
 * it and a review has no deadline — but handbacks escalated before that are read the same): reopen
 * the review on the parent, which stays `returned` and would otherwise wait for a decision that
 * can no longer come. The parent's decider opens it only while that handback is still its open
 * one; the new handback's id is derived from the ended one, so a redelivered event reopens once.
 */
export function reopenReviewPolicy(event: HandoffEvent, context: Pick<HandoffReactionContext, 'state' | 'deriveId'>): HandoffReaction[] {
  const ended = UNDECIDED_ENDS[event.type];
  const handback = context.state;
  if (ended === undefined || handback.status === 'absent' || handback.kind !== 'completion_handback') return [];
  const parentId = handback.reply_to_handoff_id;
  const worker = handback.reviewed_worker;
  if (parentId === undefined || worker === undefined) return [];
  return [
    {
      aggregateId: parentId,
      command: {
        type: 'reopen_review',
        data: {
          handoff_id: parentId,
          handback_id: handback.id,
          ended,
          // `hb-` and 32 hex digits: the ledger's reserved handback shape, which no caller may create first.
          new_handback_id: `hb-${context.deriveId('handback-reopen', handback.id).replace(/^d-/, '')}`,
          worker,
          ...(handback.reviewed_worker_kind !== undefined ? { worker_kind: handback.reviewed_worker_kind } : {}),
          idempotency_key: context.deriveId('review-reopen', handback.id),
        },
        metadata: systemMetadata(event.data.at),
      },
    },
  ];
}

/**
 * On a returned parent ending without its review (an operator abandoned or failed it): withdraw
 * the open handback (abandon it as the ledger, which then reopens nothing: the parent has moved
 * on), so no one is left asked for a decision that can no longer move anything.
 */
export function withdrawReviewPolicy(event: HandoffEvent, context: Pick<HandoffReactionContext, 'state' | 'deriveId'>): HandoffReaction[] {
  if (event.type !== 'handoff.abandoned' && event.type !== 'handoff.failed') return [];
  const parent = context.state;
  if (parent.status === 'absent' || parent.kind === 'completion_handback' || parent.handback_id === undefined) return [];
  const handbackId = parent.handback_id;
  return [
    {
      aggregateId: handbackId,
      command: {
        type: 'abandon',
        data: {
          handoff_id: handbackId,
          reason: `the work it reviews (${parent.id}) was ${parent.status === 'abandoned' ? 'abandoned' : 'failed'}`,
          idempotency_key: context.deriveId('review-withdraw', handbackId),
        },
        metadata: systemMetadata(event.data.at),
      },
    },
  ];
}

/**
 * Every cross-aggregate effect of one handoff event, as commands for other handoffs. Pure and
 * idempotent (see the module note); events with no cross-aggregate effect return []. There is no
 * auto-accept: nothing here ever decides a handback.
 */
export function reactToHandoffEvent(event: HandoffEvent, context: HandoffReactionContext): HandoffReaction[] {
  const reopen = reopenReviewPolicy(event, context);
  if (reopen.length > 0) return event.type === 'handoff.escalated' ? [...escalationPolicy(event, context.state, context), ...reopen] : reopen;
  const withdraw = withdrawReviewPolicy(event, context);
  if (withdraw.length > 0) return withdraw;
  switch (event.type) {
    case 'handoff.returned':
    case 'handoff.review_reopened':
      return handbackPolicy(event, context.state, context);
    case 'handoff.handback_decided':
      return handbackDecisionPolicy(event, context);
    case 'handoff.escalated':
      return escalationPolicy(event, context.state, context);
    case 'handoff.created':
    case 'handoff.claimed':
    case 'handoff.heartbeat':
    case 'handoff.completed':
    case 'handoff.completed_by_result':
    case 'handoff.deadline_expired':
    case 'handoff.reworked':
    case 'handoff.released':
    case 'handoff.lease_expired':
    case 'handoff.abandoned':
    case 'handoff.failed':
    case 'handoff.archived':
    case 'handoff.offer_given_up':
      return [];
    default:
      return assertNever(event, 'handoff event');
  }
}
