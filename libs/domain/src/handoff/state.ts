import type {
  CompletionReport,
  EscalationOutcome,
  EvidenceFloor,
  HandbackRecipient,
  HandoffActorKind,
  HandoffEvent,
  HandoffKind,
  HandoffPriority,
  HandoffRecord,
  LastRework,
  OfferGivenUp,
  TerminalHandoffStatus,
} from '@baton/contracts';
import { assertNever } from '../decider';
import { rememberScopedKey, scopedKeyUse, type KeyUse, type ScopedKey } from '../scoped-keys';
import type { HandoffCommand } from './commands';

/** How many recent idempotency keys a handoff remembers; a retry older than this re-decides. */
export const RECENT_KEYS_LIMIT = 256;

/**
 * One remembered idempotency key, with the command and the actor that stored it. A key counts as
 * a retry only for that same command from that same actor, so nobody can spend another caller's
 * key (a worker heartbeating with the watchdog's predictable requeue key, a second claimer reusing
 * the winner's claim key). `actor` or `actor_kind` is undefined when the event does not tell it: then
 * the command is one that only one principal may send (the watchdog's `requeue_expired`, the
 * ledger's own `complete_from_handback` / `rework_from_handback`), or the actor kind of a
 * non-create command (only its name is recorded).
 */
export type RecentKey = ScopedKey<HandoffCommand['type'], HandoffActorKind>;

/** A claim on a handoff: who holds it, its id, and when its lease runs out. */
export interface Claim {
  claimed_by: string;
  claim_id: string;
  claimed_at: string;
  lease_expires_at: string;
  /** How long the claim's lease was when it was taken, ms (what a heartbeat naming no length renews it to). */
  lease_ms: number;
  /** The kind of the principal that claimed it (`handoff.claimed`'s `claimed_by_kind`); undefined on claims stored before it was recorded. */
  claimed_by_kind?: HandoffActorKind | undefined;
}

/** A claim the watchdog took back, and the retry count the handoff had before. */
export interface LapsedClaim {
  claim_id: string;
  claimed_by: string;
  retry_count: number;
  /**
   * When its lease ran out: a result its agent sent by then (stored in the inbox at or before this
   * time) is still accepted under it while the handoff waits for a new claim (docs/handoffs.md rule 4b).
   */
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
  /** ... and its kind, when recorded: the worker is that kind and name (else the name alone). */
  reviewed_worker_kind?: HandoffActorKind;
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
  /**
   * On a returned parent: how many of its review's handbacks their reviewer released (declined)
   * since it was returned. Past {@link MAX_DECLINED_REVIEWS} the next handback goes to the operators.
   */
  reviews_declined?: number;
  completed_at?: string;
  terminal_reason?: string;
  escalation_outcome?: EscalationOutcome;
  /** On a handoff closed by `complete_from_result`: the agent result that closed it. */
  result_id?: string;
  /**
   * The last claim the watchdog requeued (`handoff.lease_expired`), with the retry count before it:
   * a result accepted under that claim before the requeue landed voids the lapse (rule 4a).
   */
  lapsed_claim?: LapsedClaim;
  /** Past this time a pending or claimed handoff fails with terminal_reason `deadline`. */
  deadline_at?: string;
  /** The last offer its addressed agent gave up on without claiming it (`handoff.offer_given_up`, or the escalation one caused). */
  offer_given_up?: OfferGivenUp;
  /** The last rework of its handback (`handoff.reworked`): the note the worker's next round reads. */
  last_rework?: LastRework;
  /** On a cross-project handoff: the delegator's project, and the decision that allowed it. */
  source_project?: string;
  cto_override?: string;
  created_at: string;
  updated_at: string;
  /** Number of events folded into this state. */
  version: number;
  /** Idempotency keys of the most recent commands applied, oldest first, at most {@link RECENT_KEYS_LIMIT}, each with who stored it. */
  recent_keys: readonly RecentKey[];
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

/** The key an event recorded, with the digest of the body that brought it (every key has the same shape). */
/**
 * Who a key belongs to: the actor's name, qualified by its project when that is not the handoff's
 * (a cross-project delegator acting from its source project). `/` is in no actor name, so an actor
 * of the handoff's own project never holds a qualified key: a name is someone only within its project.
 */
function keyActor(actor: string, project: string | undefined): string {
  return project === undefined ? actor : `${project}/${actor}`;
}

function recentKey(
  recorded: { idempotency_key: string; command_digest?: string | undefined },
  command: HandoffCommand['type'],
  actor: string | undefined,
  actorKind?: HandoffActorKind,
): RecentKey {
  return { key: recorded.idempotency_key, command, actor, actor_kind: actorKind, digest: recorded.command_digest };
}

/**
 * Who created a handoff, for its create's key: the recorded creator, else the agent in
 * `from_agent` (an agent only creates as itself; a router or operator create stored before the
 * creator was recorded is attributed to it too, so their retry of it is refused `already_exists`
 * rather than answered as theirs), except a completion handback, which only the ledger creates.
 */
function creatorKey(event: Extract<HandoffEvent, { type: 'handoff.created' }>): RecentKey {
  const data = event.data;
  if (data.created_by !== undefined) return recentKey(data, 'create', data.created_by, data.created_by_kind);
  if (data.kind === 'completion_handback') return recentKey(data, 'create', undefined, 'system');
  return recentKey(data, 'create', data.from_agent, 'agent');
}

/**
 * The command and actor that stored an event's key, read from the event (and, for a heartbeat,
 * from the claim it extended). Works on events stored before the scope mattered: nothing new is
 * written for it, except the creator of a `handoff.created` that is not its `from_agent` agent.
 */
function issuedKey(state: ExistingHandoff, event: Exclude<HandoffEvent, { type: 'handoff.created' }>): RecentKey {
  const key = event.data;
  switch (event.type) {
    case 'handoff.claimed':
      return recentKey(key, 'claim', event.data.claimed_by);
    case 'handoff.heartbeat':
      return recentKey(key, 'heartbeat', state.claim?.claimed_by);
    case 'handoff.returned':
      return recentKey(key, 'return', event.data.returned_by);
    case 'handoff.handback_decided':
      return recentKey(key, 'decide_handback', event.data.decided_by, event.data.decided_by_kind);
    case 'handoff.completed':
      return recentKey(key, 'complete_from_handback', undefined, 'system');
    case 'handoff.completed_by_result':
      return recentKey(key, 'complete_from_result', event.data.recorded_by, 'system');
    case 'handoff.reworked':
      return recentKey(key, 'rework_from_handback', undefined, 'system');
    case 'handoff.released':
      return recentKey(key, 'release', event.data.released_by);
    case 'handoff.lease_expired':
      return recentKey(key, 'requeue_expired', undefined);
    case 'handoff.escalated':
      switch (event.data.cause) {
        case 'rework':
          return recentKey(key, 'rework_from_handback', undefined, 'system');
        case 'offer_given_up':
          return recentKey(key, 'give_up_offer', event.data.given_up?.by, 'agent');
        case 'lease_expired':
          return recentKey(key, 'requeue_expired', undefined);
        default:
          return assertNever(event.data.cause, 'escalation cause');
      }
    case 'handoff.offer_given_up':
      return recentKey(key, 'give_up_offer', event.data.given_up_by, 'agent');
    case 'handoff.abandoned':
      return recentKey(key, 'abandon', keyActor(event.data.abandoned_by, event.data.abandoned_by_project));
    case 'handoff.failed':
      return event.data.cause === 'offer_given_up'
        ? recentKey(key, 'give_up_offer', event.data.failed_by, 'agent')
        : recentKey(key, 'fail', event.data.failed_by);
    case 'handoff.deadline_expired':
      return recentKey(key, 'expire_deadline', event.data.expired_by);
    case 'handoff.archived':
      return recentKey(key, 'archive', event.data.archived_by);
    case 'handoff.review_reopened':
      return recentKey(key, 'reopen_review', undefined, 'system');
    default:
      return assertNever(event, 'handoff event');
  }
}

/**
 * What `command`'s key is to this handoff: a retry of one it applied (its key remembered for the
 * same command from the same actor — and actor kind, where the event tells it — with the same body
 * where both recorded a digest), a reuse of that key with another body, or new.
 */
export function recentKeyUse(
  state: ExistingHandoff,
  command: {
    type: HandoffCommand['type'];
    data: { idempotency_key: string };
    metadata: { actor: string; actorKind: HandoffActorKind; digest?: string | undefined; actorProject?: string | undefined };
  },
): KeyUse {
  const from = command.metadata.actorProject;
  return scopedKeyUse(
    state.recent_keys,
    command.data.idempotency_key,
    command.type,
    keyActor(command.metadata.actor, from !== undefined && from !== state.project ? from : undefined),
    command.metadata.actorKind,
    command.metadata.digest,
  );
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

/** How a returnable child's failure by a given-up offer begins its reason (`handoff.failed`, cause `offer_given_up`). */
export function givenUpPrefix(agent: string, deliveries: number): string {
  return `offer given up unclaimed by ${agent} after ${deliveries} deliveries: `;
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
      recent_keys: [creatorKey(event)],
    };
    if (d.to_role !== undefined) created.to_role = d.to_role;
    if (d.to_agent !== undefined) created.to_agent = d.to_agent;
    if (d.reply_to_handoff_id !== undefined) created.reply_to_handoff_id = d.reply_to_handoff_id;
    if (d.reviewed_worker !== undefined) created.reviewed_worker = d.reviewed_worker;
    if (d.reviewed_worker_kind !== undefined) created.reviewed_worker_kind = d.reviewed_worker_kind;
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
    recent_keys: rememberScopedKey(state.recent_keys, issuedKey(state, event), RECENT_KEYS_LIMIT),
  };

  switch (event.type) {
    case 'handoff.claimed': {
      if (state.status !== 'pending') return state;
      const d = event.data;
      // The key the spread does not bring comes first: `{ ...state, claim }` would give every claimed
      // state a hidden class of its own on Node 20 (hidden-class.spec.ts).
      return {
        claim: {
          claimed_by: d.claimed_by,
          claim_id: d.claim_id,
          claimed_at: d.at,
          lease_expires_at: d.lease_expires_at,
          lease_ms: Math.max(0, Date.parse(d.lease_expires_at) - Date.parse(d.at)),
          claimed_by_kind: d.claimed_by_kind,
        },
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
      const { completion_report: _report, handback_id: _handback, handback_recipient: _recipient, reviews_declined: _declined, ...rest } = state;
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
      if (d.lapse_voided) completed.retry = { ...state.retry, retry_count: d.lapse_voided.retry_count };
      return completed;
    }
    case 'handoff.reworked': {
      if (state.status !== 'returned') return state;
      return {
        ...withoutRound(state),
        ...touched,
        status: 'pending',
        retry: { ...state.retry, retry_count: event.data.retry_count },
        last_rework: { by: event.data.reworked_by, at: event.data.at, handback_id: event.data.handback_id, note: event.data.note },
      };
    }
    case 'handoff.released': {
      if (state.status !== 'claimed') return state;
      return { ...state, ...touched, status: 'released', terminal_reason: event.data.reason };
    }
    case 'handoff.lease_expired': {
      if (state.status !== 'claimed') return state;
      const { claim, lapsed_claim: _previous, ...rest } = state;
      return {
        lapsed_claim: {
          claim_id: claim.claim_id,
          claimed_by: claim.claimed_by,
          retry_count: state.retry.retry_count,
          lease_expires_at: event.data.lease_expires_at,
        },
        ...rest,
        ...touched,
        status: 'pending',
        retry: { ...state.retry, retry_count: event.data.retry_count },
      };
    }
    case 'handoff.escalated': {
      // From pending only when its agent gave up on the offer (cause `offer_given_up`).
      if (state.status !== 'claimed' && state.status !== 'returned' && !(state.status === 'pending' && event.data.cause === 'offer_given_up')) return state;
      const d = event.data;
      const reason =
        'escalate_to' in d.outcome
          ? `retry cap ${d.max_retries} reached (${d.cause}); escalated to ${d.outcome.escalate_to}`
          : `retry cap ${d.max_retries} reached (${d.cause}); nobody to escalate to (${d.outcome.stop_why})`;
      const failed: EndedHandoff = { ...state, ...touched, status: 'failed', terminal_reason: reason, escalation_outcome: d.outcome };
      if (d.given_up !== undefined) failed.offer_given_up = { by: d.given_up.by, at: d.at, deliveries: d.given_up.deliveries, reason: d.given_up.reason };
      return failed;
    }
    case 'handoff.offer_given_up': {
      if (state.status !== 'pending') return state;
      const d = event.data;
      return {
        ...state,
        ...touched,
        retry: { ...state.retry, retry_count: d.retry_count },
        offer_given_up: { by: d.given_up_by, at: d.at, deliveries: d.deliveries, reason: d.reason },
      };
    }
    case 'handoff.abandoned': {
      if (state.status !== 'pending' && state.status !== 'claimed' && state.status !== 'returned') return state;
      return { ...state, ...touched, status: 'abandoned', terminal_reason: event.data.reason };
    }
    case 'handoff.failed': {
      if (state.status !== 'pending' && state.status !== 'claimed' && state.status !== 'returned') return state;
      const d = event.data;
      const failed: EndedHandoff = { ...state, ...touched, status: 'failed', terminal_reason: d.reason };
      if (d.cause === 'offer_given_up') {
        // The record keeps the agent's own reason; the terminal reason says the rest.
        const prefix = givenUpPrefix(d.failed_by, d.deliveries ?? 1);
        failed.offer_given_up = {
          by: d.failed_by,
          at: d.at,
          deliveries: d.deliveries ?? 1,
          reason: d.reason.startsWith(prefix) ? d.reason.slice(prefix.length) : d.reason,
        };
      }
      return failed;
    }
    case 'handoff.deadline_expired': {
      if (state.status !== 'pending' && state.status !== 'claimed') return state;
      return { ...state, ...touched, status: 'failed', terminal_reason: 'deadline' };
    }
    case 'handoff.archived': {
      if (state.status !== event.data.archived_from) return state;
      return { ...state, ...touched, status: 'archived', archived_from: event.data.archived_from };
    }
    case 'handoff.review_reopened': {
      // The parent stays returned with the same report; its open handback is the new one.
      if (state.status !== 'returned' || state.handback_id !== event.data.previous_handback_id) return state;
      const declined = event.data.ended === 'released' ? { reviews_declined: (state.reviews_declined ?? 0) + 1 } : {};
      return { ...state, ...touched, handback_id: event.data.handback_id, handback_recipient: event.data.handback_recipient, ...declined };
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
    reviewed_worker_kind: state.reviewed_worker_kind,
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
    offer_given_up: state.offer_given_up,
    last_rework: state.last_rework,
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
