import type {
  CompletionReport,
  EscalationOutcome,
  EvidenceFloor,
  HandbackRecipient,
  HandoffEvent,
  HandoffKind,
  HandoffPriority,
  HandoffRecord,
  TerminalHandoffStatus,
} from '@baton/contracts';
import { assertNever } from '../decider';

/** How many recent idempotency keys a handoff remembers; a retry older than this re-decides. */
export const RECENT_KEYS_LIMIT = 256;

/** A claim on a handoff: who holds it, its id, and when its lease runs out. */
export interface Claim {
  claimed_by: string;
  claim_id: string;
  claimed_at: string;
  lease_expires_at: string;
}

/** The fields every existing handoff has, whatever its status. */
export interface HandoffCore {
  id: string;
  project: string;
  kind: HandoffKind;
  priority: HandoffPriority;
  from_agent: string;
  to_role?: string;
  to_agent?: string;
  reply_to_handoff_id?: string;
  /** On a completion handback: the worker whose work it reviews. */
  reviewed_worker?: string;
  summary: string;
  context: Record<string, unknown>;
  acceptance: Record<string, unknown>;
  retry: { max_retries: number; retry_count: number };
  escalation: { to?: string };
  parent_goal_id?: string;
  workflow_run_id?: string;
  /** The current claim (claimed, returned) or the one that did the work (completed, released...). */
  claim?: Claim;
  completion_report?: CompletionReport;
  evidence_floor?: EvidenceFloor;
  handback_id?: string;
  handback_recipient?: HandbackRecipient;
  completed_at?: string;
  terminal_reason?: string;
  escalation_outcome?: EscalationOutcome;
  /** On a handoff closed by `complete_from_result`: the agent result that closed it. */
  result_id?: string;
  /** Past this time a pending or claimed handoff fails with terminal_reason `deadline`. */
  deadline_at?: string;
  /** On a cross-project handoff: the delegator's project, and the decision that allowed it. */
  source_project?: string;
  cto_override?: string;
  created_at: string;
  updated_at: string;
  /** Number of events folded into this state. */
  version: number;
  /** Idempotency keys of the most recent commands applied, oldest first, at most {@link RECENT_KEYS_LIMIT}. */
  recent_keys: readonly string[];
}

/** No `handoff.created` yet: only `create` is allowed. */
export interface AbsentHandoff {
  status: 'absent';
}
export type PendingHandoff = HandoffCore & { status: 'pending'; claim?: undefined };
export type ClaimedHandoff = HandoffCore & { status: 'claimed'; claim: Claim };
export type ReturnedHandoff = HandoffCore & {
  status: 'returned';
  claim: Claim;
  completion_report: CompletionReport;
  handback_id: string;
  handback_recipient: HandbackRecipient;
};
export type CompletedHandoff = HandoffCore & { status: 'completed'; completed_at: string };
export type EndedHandoff = HandoffCore & { status: 'released' | 'abandoned' | 'failed'; terminal_reason: string };
export type ArchivedHandoff = HandoffCore & { status: 'archived'; archived_from: TerminalHandoffStatus };

/** A handoff that exists. */
export type ExistingHandoff = PendingHandoff | ClaimedHandoff | ReturnedHandoff | CompletedHandoff | EndedHandoff | ArchivedHandoff;

/** The folded state of one handoff, keyed on `status`. */
export type HandoffState = AbsentHandoff | ExistingHandoff;

export function initialHandoffState(): HandoffState {
  return { status: 'absent' };
}

function remember(keys: readonly string[], key: string): readonly string[] {
  if (keys.includes(key)) return keys;
  const next = [...keys, key];
  return next.length > RECENT_KEYS_LIMIT ? next.slice(next.length - RECENT_KEYS_LIMIT) : next;
}

/** The core of a state with its claim removed (for transitions back to `pending`). */
function withoutClaim(state: ExistingHandoff): Omit<HandoffCore, 'claim'> {
  const { claim: _claim, ...rest } = state;
  return rest;
}

/** The core of a state without the fields of one review round (cleared on rework). */
function withoutRound(state: ExistingHandoff): Omit<HandoffCore, 'claim' | 'completion_report' | 'evidence_floor' | 'handback_id' | 'handback_recipient'> {
  const { claim: _claim, completion_report: _report, evidence_floor: _floor, handback_id: _handback, handback_recipient: _recipient, ...rest } = state;
  return rest;
}

/**
 * Apply one event to a handoff. Pure and deterministic; never mutates its input. An event that
 * cannot follow the state (which the decider never produces) leaves the state unchanged, so a
 * projection replaying a damaged stream does not crash; the ledger only appends decided events.
 */
export function evolveHandoff(state: HandoffState, event: HandoffEvent): HandoffState {
  if (event.type === 'handoff.created') {
    if (state.status !== 'absent') return state;
    const d = event.data;
    const created: PendingHandoff = {
      status: 'pending',
      id: d.handoff_id,
      project: d.project,
      kind: d.kind,
      priority: d.priority,
      from_agent: d.from_agent,
      summary: d.summary,
      context: d.context,
      acceptance: d.acceptance,
      retry: { max_retries: d.max_retries, retry_count: 0 },
      escalation: d.escalate_to !== undefined ? { to: d.escalate_to } : {},
      created_at: d.at,
      updated_at: d.at,
      version: 1,
      recent_keys: [d.idempotency_key],
    };
    if (d.to_role !== undefined) created.to_role = d.to_role;
    if (d.to_agent !== undefined) created.to_agent = d.to_agent;
    if (d.reply_to_handoff_id !== undefined) created.reply_to_handoff_id = d.reply_to_handoff_id;
    if (d.reviewed_worker !== undefined) created.reviewed_worker = d.reviewed_worker;
    if (d.parent_goal_id !== undefined) created.parent_goal_id = d.parent_goal_id;
    if (d.workflow_run_id !== undefined) created.workflow_run_id = d.workflow_run_id;
    if (d.deadline_at !== undefined) created.deadline_at = d.deadline_at;
    if (d.source_project !== undefined) created.source_project = d.source_project;
    if (d.cto_override !== undefined) created.cto_override = d.cto_override;
    return created;
  }
  if (state.status === 'absent') return state;

  const touched = {
    updated_at: event.data.at,
    version: state.version + 1,
    recent_keys: remember(state.recent_keys, event.data.idempotency_key),
  };

  switch (event.type) {
    case 'handoff.claimed': {
      if (state.status !== 'pending') return state;
      const d = event.data;
      // The key the spread does not bring comes first: `{ ...state, claim }` would give every claimed
      // state a hidden class of its own on Node 20 (hidden-class.spec.ts).
      return {
        claim: { claimed_by: d.claimed_by, claim_id: d.claim_id, claimed_at: d.at, lease_expires_at: d.lease_expires_at },
        ...withoutClaim(state),
        ...touched,
        status: 'claimed',
      };
    }
    case 'handoff.heartbeat': {
      if (state.status !== 'claimed') return state;
      return { ...state, ...touched, claim: { ...state.claim, lease_expires_at: event.data.lease_expires_at } };
    }
    case 'handoff.returned': {
      if (state.status !== 'claimed') return state;
      const d = event.data;
      // The fields this event brings go before the spread of a state that has none of them.
      const { completion_report: _report, handback_id: _handback, handback_recipient: _recipient, ...rest } = state;
      const returned: ReturnedHandoff = {
        completion_report: d.report,
        handback_id: d.handback_id,
        handback_recipient: d.handback_recipient,
        ...rest,
        ...touched,
        status: 'returned',
      };
      if (d.evidence_floor) returned.evidence_floor = d.evidence_floor;
      return returned;
    }
    case 'handoff.handback_decided': {
      if (state.status !== 'pending' && state.status !== 'claimed') return state;
      // completed_at is new to the state: before the spread (see 'handoff.claimed').
      return { completed_at: event.data.at, ...state, ...touched, status: 'completed' };
    }
    case 'handoff.completed': {
      if (state.status !== 'returned') return state;
      return { completed_at: event.data.at, ...state, ...touched, status: 'completed' };
    }
    case 'handoff.completed_by_result': {
      if (state.status !== 'pending' && state.status !== 'claimed') return state;
      const d = event.data;
      // The fields this event brings go before the spread of a state that has none of them.
      const { completion_report: _report, result_id: _result, ...rest } = state;
      const completed: CompletedHandoff = {
        completed_at: d.at,
        completion_report: d.report,
        result_id: d.result_id,
        ...rest,
        ...touched,
        status: 'completed',
      };
      if (d.evidence_floor) completed.evidence_floor = d.evidence_floor;
      return completed;
    }
    case 'handoff.reworked': {
      if (state.status !== 'returned') return state;
      return {
        ...withoutRound(state),
        ...touched,
        status: 'pending',
        retry: { ...state.retry, retry_count: event.data.retry_count },
      };
    }
    case 'handoff.released': {
      if (state.status !== 'claimed') return state;
      return { ...state, ...touched, status: 'released', terminal_reason: event.data.reason };
    }
    case 'handoff.lease_expired': {
      if (state.status !== 'claimed') return state;
      return {
        ...withoutClaim(state),
        ...touched,
        status: 'pending',
        retry: { ...state.retry, retry_count: event.data.retry_count },
      };
    }
    case 'handoff.escalated': {
      if (state.status !== 'claimed' && state.status !== 'returned') return state;
      const d = event.data;
      const reason =
        'escalate_to' in d.outcome
          ? `retry cap ${d.max_retries} reached (${d.cause}); escalated to ${d.outcome.escalate_to}`
          : `retry cap ${d.max_retries} reached (${d.cause}); stop requested: ${d.outcome.stop_why}`;
      return { ...state, ...touched, status: 'failed', terminal_reason: reason, escalation_outcome: d.outcome };
    }
    case 'handoff.abandoned': {
      if (state.status !== 'pending' && state.status !== 'claimed' && state.status !== 'returned') return state;
      return { ...state, ...touched, status: 'abandoned', terminal_reason: event.data.reason };
    }
    case 'handoff.failed': {
      if (state.status !== 'pending' && state.status !== 'claimed' && state.status !== 'returned') return state;
      return { ...state, ...touched, status: 'failed', terminal_reason: event.data.reason };
    }
    case 'handoff.deadline_expired': {
      if (state.status !== 'pending' && state.status !== 'claimed') return state;
      return { ...state, ...touched, status: 'failed', terminal_reason: 'deadline' };
    }
    case 'handoff.archived': {
      if (state.status !== event.data.archived_from) return state;
      return { ...state, ...touched, status: 'archived', archived_from: event.data.archived_from };
    }
    default:
      return assertNever(event, 'handoff event');
  }
}

/**
 * The view of a handoff that projections, the API and the CLI show (validates against
 * `HandoffRecordSchema`). Returns null while the handoff does not exist.
 */
export function toHandoffRecord(state: HandoffState): HandoffRecord | null {
  if (state.status === 'absent') return null;
  const record: HandoffRecord = {
    id: state.id,
    project: state.project,
    kind: state.kind,
    priority: state.priority,
    status: state.status,
    from_agent: state.from_agent,
    summary: state.summary,
    context: state.context,
    acceptance: state.acceptance,
    retry: { ...state.retry },
    escalation: { ...state.escalation },
    created_at: state.created_at,
    updated_at: state.updated_at,
    version: state.version,
  };
  const optional: Partial<HandoffRecord> = {
    to_role: state.to_role,
    to_agent: state.to_agent,
    reply_to_handoff_id: state.reply_to_handoff_id,
    reviewed_worker: state.reviewed_worker,
    claimed_by: state.claim?.claimed_by,
    claimed_at: state.claim?.claimed_at,
    completed_at: state.completed_at,
    terminal_reason: state.terminal_reason,
    parent_goal_id: state.parent_goal_id,
    workflow_run_id: state.workflow_run_id,
    completion_report: state.completion_report,
    evidence_floor: state.evidence_floor,
    handback_id: state.handback_id,
    handback_recipient: state.handback_recipient,
    escalation_outcome: state.escalation_outcome,
    result_id: state.result_id,
    deadline_at: state.deadline_at,
    source_project: state.source_project,
    cto_override: state.cto_override,
  };
  // The lease is only meaningful while the claim is live; the claim id until the return is decided.
  if (state.status === 'claimed') {
    optional.claim_id = state.claim.claim_id;
    optional.lease_expires_at = state.claim.lease_expires_at;
  }
  if (state.status === 'returned') optional.claim_id = state.claim.claim_id;
  if (state.status === 'archived') optional.archived_from = state.archived_from;
  for (const [key, value] of Object.entries(optional)) {
    if (value !== undefined) (record as Record<string, unknown>)[key] = value;
  }
  return record;
}
