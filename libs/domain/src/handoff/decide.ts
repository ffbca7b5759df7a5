import type { EscalationOutcome, HandbackRecipient, HandoffActorKind, HandoffCommandMetadata, HandoffEvent, HandoffEventData } from '@baton/contracts';
import { clipText, handoffEnding, ServiceActors } from '@baton/contracts';
import { accept, assertNever, DecisionResult, reject } from '../decider';
import { ROUTER_HANDOFF_ID_PREFIXES } from '../run/ids';
import type {
  AbandonHandoff,
  ArchiveHandoff,
  ClaimHandoff,
  CompleteFromHandback,
  CompleteFromResult,
  CreateHandoff,
  DecideHandback,
  ExpireDeadline,
  FailHandoff,
  GiveUpOffer,
  HandoffCommand,
  HeartbeatHandoff,
  ProjectRoster,
  ReleaseHandoff,
  RequeueExpired,
  ReturnHandoff,
  ReopenReview,
  ReworkFromHandback,
} from './commands';
import { applyEvidenceFloor } from './evidence';
import { LEDGER_ACTOR } from './policies';
import { checkRunPart, RunPartErrorCode } from './run-turn';
import { givenUpPrefix, recentKeyUse, type ClaimedHandoff, type ExistingHandoff, type HandoffState, type ReturnedHandoff } from './state';
import type { KeyUse } from '../scoped-keys';

/** The stable codes of every refusal the handoff decider gives. */
export const HandoffErrorCode = {
  notFound: 'not_found',
  alreadyExists: 'already_exists',
  wrongAggregate: 'wrong_aggregate',
  handoffNotPending: 'handoff_not_pending',
  handoffNotClaimed: 'handoff_not_claimed',
  handoffNotReturned: 'handoff_not_returned',
  handoffNotOpen: 'handoff_not_open',
  handoffNotTerminal: 'handoff_not_terminal',
  notTheClaimer: 'not_the_claimer',
  notTheAddressee: 'not_the_addressee',
  notTheDelegator: 'not_the_delegator',
  staleClaim: 'stale_claim',
  leaseNotExpired: 'lease_not_expired',
  leaseExpired: 'lease_expired',
  notReturnable: 'not_returnable',
  notAHandback: 'not_a_handback',
  handbackAlreadyDecided: 'handback_already_decided',
  staleHandback: 'stale_handback',
  selfAcceptForbidden: 'self_accept_forbidden',
  selfReviewForbidden: 'self_review_forbidden',
  handbackCreateForbidden: 'handback_create_forbidden',
  internalCommand: 'internal_command',
  deadlineNotReached: 'deadline_not_reached',
  /** A claim of a pending handoff whose `deadline_at` has passed: it fails `deadline` at the watchdog's next tick, nobody's failure. */
  deadlinePassed: 'deadline_passed',
  noDeadline: 'no_deadline',
  crossProjectUnresolved: 'cross_project_unresolved',
  ctoOverrideRequired: 'cto_override_required',
  delegatorNotInSourceRoster: 'delegator_not_in_source_roster',
  addresseeNotInTargetRoster: 'addressee_not_in_target_roster',
  /** A local create to an agent (or with an `escalate_to`) the project's definition does not name. */
  addresseeNotInRoster: 'addressee_not_in_roster',
  /** A local create by an agent the project's definition does not name. */
  delegatorNotInRoster: 'delegator_not_in_roster',
  reservedId: 'reserved_id',
  crossProjectNotAccepted: 'cross_project_not_accepted',
  reviewEndForbidden: 'review_end_forbidden',
  /** A handback decided after the work it reviews was abandoned or failed by a person: the review is being withdrawn, its decision could move nothing. */
  reviewWithdrawn: 'review_withdrawn',
  /** An `abandon` of a run's handoff whose run already recorded its agent's result: the router is closing it with that result. */
  resultAlreadyRecorded: 'result_already_recorded',
  idempotencyKeyReused: 'idempotency_key_reused',
  /** A `give_up_offer` naming an offer of an earlier round: the handoff moved on since (`offered_version` is not its version). */
  staleOffer: 'stale_offer',
  /** An agent's `create` naming a run (`workflow_run_id`) that does not wait for it (run-turn.ts). */
  notInRun: RunPartErrorCode.notInRun,
} as const;
export type HandoffErrorCode = (typeof HandoffErrorCode)[keyof typeof HandoffErrorCode];

type Decision = DecisionResult<HandoffEvent>;

/** Operators and humans act on anything in their inbox; they are never the subject of the floor. */
function isPerson(kind: HandoffActorKind): boolean {
  return kind === 'operator' || kind === 'human';
}

/**
 * Is the caller the worker a completion handback reviews? The worker is a principal: its kind and
 * its name together, as the return recorded them from the claim (`reviewed_worker_kind`), so a
 * person whose token is named like the worker agent is someone else, and so is an agent named like
 * a person who did the work. People are one kind here (`operator` and `human`: a person is a
 * person however the notifier or the admin relays them). A handback created before the kind was
 * recorded, or of work whose claim did not record it, keeps the name rule: any caller of that name
 * is the worker, whatever its kind.
 */
function isReviewedWorker(state: ExistingHandoff, metadata: HandoffCommandMetadata): boolean {
  if (state.reviewed_worker === undefined || metadata.actor !== state.reviewed_worker) return false;
  const kind = state.reviewed_worker_kind;
  return kind === undefined || partyOf(kind) === partyOf(metadata.actorKind);
}

/** The kind of party an actor kind is: people are one (`operator`, `human`); agents, services and the watchdog their own. */
function partyOf(kind: HandoffActorKind): string {
  return isPerson(kind) ? 'person' : kind;
}

function plusMs(iso: string, ms: number): string {
  return new Date(Date.parse(iso) + ms).toISOString();
}

function isAtOrAfter(now: string, deadline: string): boolean {
  return Date.parse(now) >= Date.parse(deadline);
}

/**
 * An event's payload: the fields every handoff event starts with, then its own. Built by adding to
 * a fresh literal, never as `{ ...base, own }`: on Node 20 a literal that spreads and then adds keys
 * gets a hidden class of its own per object once warm (see hidden-class.spec.ts).
 */
function base<const Own extends object>(
  data: { handoff_id: string; idempotency_key: string },
  metadata: HandoffCommandMetadata,
  own: Own,
): { handoff_id: string; at: string; idempotency_key: string } & Own {
  return Object.assign({ handoff_id: data.handoff_id, at: metadata.now, idempotency_key: data.idempotency_key }, own);
}

function wrongState(code: HandoffErrorCode, state: ExistingHandoff, wanted: string): Decision {
  // How it ended (or was returned), from its state: a claimer told its claim is gone reads whether claiming again can work.
  const ended = handoffEnding(state);
  return reject('wrong_state', code, `handoff ${state.id} is ${state.status}; this needs it ${wanted}`, {
    handoff_id: state.id,
    status: state.status,
    ...(ended !== null ? { ended } : {}),
  });
}

/**
 * Check that a caller holds the live claim: the claim id must be the current one (else
 * `stale_claim`) and the caller must be the claimer (else `not_the_claimer`). Operators and
 * humans may act without the claim id; a claim id they do send must still be current.
 */
function checkClaimer(state: ClaimedHandoff, claimId: string | undefined, metadata: HandoffCommandMetadata): Decision | null {
  if (isPerson(metadata.actorKind)) {
    if (claimId !== undefined && claimId !== state.claim.claim_id) return staleClaim(state, claimId);
    return null;
  }
  if (claimId === undefined || claimId !== state.claim.claim_id) return staleClaim(state, claimId);
  if (metadata.actor !== state.claim.claimed_by) {
    return reject('forbidden', HandoffErrorCode.notTheClaimer, `${metadata.actor} does not hold the claim on handoff ${state.id}`, {
      handoff_id: state.id,
    });
  }
  return null;
}

function staleClaim(state: ClaimedHandoff, claimId: string | undefined): Decision {
  return reject('wrong_state', HandoffErrorCode.staleClaim, `claim ${claimId ?? '(none)'} is not the current claim on handoff ${state.id}`, {
    handoff_id: state.id,
    claim_id: claimId ?? null,
  });
}

/**
 * Who reviews a return: the delegator when it is a visible actor, else the project's default lead;
 * never the worker itself (seed 002 known hole: same-recipient auto-accept). When neither is
 * eligible the handback goes to the operators. `fromAgent` is undefined when the delegator is not
 * an actor of this project at all (a cross-project handoff's, an agent of the source project).
 */
export function handbackRecipient(fromAgent: string | undefined, worker: string, roster: ProjectRoster): HandbackRecipient {
  if (fromAgent !== undefined && roster.visible_actors.includes(fromAgent) && fromAgent !== worker) return { to_agent: fromAgent, reason: 'delegator' };
  if (roster.project_lead !== undefined && roster.project_lead !== worker) {
    return { to_agent: roster.project_lead, reason: 'project_lead' };
  }
  return { to_role: 'operator', reason: 'no_eligible_reviewer' };
}

/**
 * What the retry cap does: consult the handoff's escalation target or the project's lead, or,
 * when there is no lead at all, request a stop (`guard_failed`).
 */
function escalationOutcome(state: ExistingHandoff, projectLead: string | undefined, consultId: string, gaveUp?: { agent: string }): EscalationOutcome {
  const lead = state.escalation.to ?? projectLead;
  // Never back to the agent that held the work when it failed: a lead whose own claim lapsed (its
  // consult of an earlier escalation, or work addressed to it) would be asked again, and again. The
  // same for the agent that gave up on the offer without claiming it.
  const heldBy = gaveUp?.agent ?? state.claim?.claimed_by;
  if (lead !== undefined && lead !== heldBy) return { escalate_to: lead, consult_handoff_id: consultId };
  return {
    stop_why: 'guard_failed',
    detail:
      lead === undefined
        ? `handoff ${state.id} reached its retry cap (${state.retry.max_retries}) and project ${state.project} has no lead`
        : `handoff ${state.id} reached its retry cap (${state.retry.max_retries}) and its escalation target, ${lead}, is the agent that ${gaveUp ? 'gave up its offer' : 'held it'}`,
  };
}

/**
 * The shape of the handoff ids the ledger derives for what its policies create: `hb-` (a return's
 * completion handback), `esc-` (the consult of an escalation on lease expiry) and `d-` (the consult
 * of an escalation on rework), each followed by 32 hex digits of SHA-256 (`apps/ledger/src/ids.ts`).
 * Anyone can compute them, so only the ledger's policies may create a handoff with such an id.
 */
export const LEDGER_DERIVED_HANDOFF_ID = /^(?:hb|esc|d)-[0-9a-f]{32}$/;

/**
 * The shape of the handoff ids the router derives for a run's or a mesh's routes: `ho-<cause>-<id>`
 * (`s` start, `r` result, `a` answer, `x` stop, `m` message, `f` failed handoff) and `mh-s-` /
 * `mh-r-` (a mesh's entry and turns), built from the prefixes the id builders use
 * (`ROUTER_HANDOFF_ID_PREFIXES`, `libs/domain/src/run/ids.ts`). An agent chooses
 * its own result ids, so it could compute the id of the handoff its next result will route to and
 * create it first — the router takes `already_exists` as its create done, and the run would go on
 * with the agent's forged handoff. Only the router may create such an id.
 */
export const ROUTER_DERIVED_HANDOFF_ID = new RegExp(`^(?:${ROUTER_HANDOFF_ID_PREFIXES.join('|')})-`);

/** May this caller create `handoffId`? Ids in the ledger's or the router's derived space are theirs alone. */
function checkReservedId(handoffId: string, metadata: HandoffCommandMetadata): Decision | null {
  const owner = LEDGER_DERIVED_HANDOFF_ID.test(handoffId)
    ? { actor: LEDGER_ACTOR, who: 'the ledger' }
    : ROUTER_DERIVED_HANDOFF_ID.test(handoffId)
      ? { actor: ServiceActors.router.actor, who: 'the router' }
      : null;
  if (owner === null) return null;
  if (metadata.actorKind === 'system' && metadata.actor === owner.actor) return null;
  return reject('invalid', HandoffErrorCode.reservedId, `handoff id ${handoffId} is reserved for the handoffs ${owner.who} creates; choose another id`, {
    handoff_id: handoffId,
  });
}

/**
 * What a create may not do whoever holds the id: take a reserved id, forge a handback, create
 * from another agent. Checked before anything about the handoff of that id (so the answer never
 * tells whether it exists: a caller probing reserved ids — `ho-s-<run>`, `hb-…` — learns nothing).
 */
function checkCreator(command: CreateHandoff): Decision | null {
  const { data, metadata } = command;
  const reserved = checkReservedId(data.handoff_id, metadata);
  if (reserved) return reserved;
  if (data.kind === 'completion_handback') {
    // Only the ledger's own handback policy creates handbacks, so nobody forges a reviewer.
    if (metadata.actorKind !== 'system' || data.reviewed_worker === undefined || data.reply_to_handoff_id === undefined) {
      return reject('forbidden', HandoffErrorCode.handbackCreateForbidden, 'completion handbacks are created by the ledger when work is returned');
    }
    if (data.to_agent !== undefined && data.to_agent === data.reviewed_worker) {
      return reject('forbidden', HandoffErrorCode.selfReviewForbidden, 'a handback is never addressed to the worker it reviews');
    }
  }
  if (metadata.actorKind === 'agent' && data.from_agent !== metadata.actor) {
    return reject('forbidden', HandoffErrorCode.notTheDelegator, `${metadata.actor} cannot create a handoff from ${data.from_agent}`);
  }
  return null;
}

function decideCreate(command: CreateHandoff, state: HandoffState): Decision {
  const { data, metadata } = command;
  if (state.status !== 'absent') {
    return reject('wrong_state', HandoffErrorCode.alreadyExists, `handoff ${data.handoff_id} already exists`, { handoff_id: data.handoff_id });
  }
  const event: HandoffEvent = {
    type: 'handoff.created',
    data: base(data, metadata, {
      project: data.project,
      kind: data.kind,
      priority: data.priority,
      from_agent: data.from_agent,
      summary: data.summary,
      context: data.context,
      acceptance: data.acceptance,
      max_retries: data.max_retries,
    }),
  };
  const optional = {
    to_role: data.to_role,
    to_agent: data.to_agent,
    reply_to_handoff_id: data.reply_to_handoff_id,
    reviewed_worker: data.kind === 'completion_handback' ? data.reviewed_worker : undefined,
    reviewed_worker_kind: data.kind === 'completion_handback' ? data.reviewed_worker_kind : undefined,
    escalate_to: data.escalate_to,
    parent_goal_id: data.parent_goal_id,
    workflow_run_id: data.workflow_run_id,
    deadline_at: data.deadline_at,
    source_project: data.cross_project?.source_project,
    cto_override: data.cross_project ? data.cto_override : undefined,
    // An agent creates only as itself (`from_agent`); anyone else is recorded, to scope the key.
    created_by: metadata.actorKind === 'agent' ? undefined : metadata.actor,
    created_by_kind: metadata.actorKind === 'agent' ? undefined : metadata.actorKind,
  };
  for (const [key, value] of Object.entries(optional)) {
    if (value !== undefined) (event.data as Record<string, unknown>)[key] = value;
  }
  return accept(event);
}

/**
 * A local create checked against the project's roster (its definition's agents), when it has one:
 * work addressed to an agent the definition does not name would wait, pending, for a claimer that
 * never comes, and an agent the definition does not name is no delegator of the project. A project
 * without a definition names no roster: nothing is checked.
 */
function checkLocalRoster({ data, metadata }: CreateHandoff): Decision | null {
  const roster = data.roster;
  if (roster === undefined || roster.length === 0 || data.cross_project !== undefined) return null;
  if (metadata.actorKind === 'agent' && !roster.includes(metadata.actor)) {
    return reject('forbidden', HandoffErrorCode.delegatorNotInRoster, `${metadata.actor} is not an agent of project ${data.project} (its definition)`, {
      project: data.project,
    });
  }
  for (const [field, agent] of [
    ['to_agent', data.to_agent],
    ['escalate_to', data.escalate_to],
  ] as const) {
    if (agent !== undefined && !roster.includes(agent)) {
      return reject('forbidden', HandoffErrorCode.addresseeNotInRoster, `${agent} is not an agent of project ${data.project} (its definition)`, {
        project: data.project,
        field,
      });
    }
  }
  return null;
}

/**
 * Cross-project create (seed 002: "validates both rosters; never cross-registers"): the ledger
 * resolved both rosters (`cross_project`) and made the target the command's project. Needs a
 * `cto_override` decision id, a delegator visible in the SOURCE project and an addressee
 * (`to_agent`) visible in the TARGET project. Nothing here registers anyone anywhere.
 */
function checkCrossProject(data: CreateHandoff['data']): Decision | null {
  if (data.target_project === undefined && data.cross_project === undefined) return null;
  const cross = data.cross_project;
  if (cross === undefined || data.target_project === undefined || data.project !== data.target_project) {
    return reject('invalid', HandoffErrorCode.crossProjectUnresolved, 'a cross-project create needs both rosters resolved by the ledger');
  }
  if (data.cto_override === undefined) {
    return reject(
      'forbidden',
      HandoffErrorCode.ctoOverrideRequired,
      `a handoff from ${cross.source_project} to ${data.target_project} needs a cto_override decision id`,
    );
  }
  // The target consents before anything about its roster is told (an addressee's refusal would name it).
  if (!cross.target_accepts) {
    return reject(
      'forbidden',
      HandoffErrorCode.crossProjectNotAccepted,
      `project ${data.target_project} does not accept handoffs from ${cross.source_project} (its definition's accepts_handoffs_from)`,
      { source_project: cross.source_project, target_project: data.target_project },
    );
  }
  if (!cross.source_visible.includes(data.from_agent)) {
    return reject('forbidden', HandoffErrorCode.delegatorNotInSourceRoster, `${data.from_agent} is not on the roster of project ${cross.source_project}`, {
      source_project: cross.source_project,
    });
  }
  if (data.to_agent === undefined || !cross.target_visible.includes(data.to_agent)) {
    return reject(
      'forbidden',
      HandoffErrorCode.addresseeNotInTargetRoster,
      `${data.to_agent ?? '(no to_agent)'} is not on the roster of project ${data.target_project}`,
      {
        target_project: data.target_project,
      },
    );
  }
  // The escalation's consult is created where the handoff lives: its addressee is a target actor too.
  if (data.escalate_to !== undefined && !cross.target_visible.includes(data.escalate_to)) {
    return reject(
      'forbidden',
      HandoffErrorCode.addresseeNotInTargetRoster,
      `escalate_to ${data.escalate_to} is not on the roster of project ${data.target_project}`,
      { target_project: data.target_project, field: 'escalate_to' },
    );
  }
  return null;
}

/**
 * Watchdog (or an operator): the deadline passed. A pending or claimed handoff fails with
 * terminal_reason `deadline`, once: a second expiry finds it failed (`handoff_not_open`), which is
 * what makes two watchdogs safe. Refused before the deadline (`deadline_not_reached`) and for a
 * handoff without one (`no_deadline`); agents may not issue it.
 */
function decideExpireDeadline({ data, metadata }: ExpireDeadline, state: ExistingHandoff): Decision {
  if (metadata.actorKind === 'agent') {
    return reject('forbidden', HandoffErrorCode.internalCommand, 'expire_deadline is issued by the watchdog or an operator');
  }
  if (state.deadline_at === undefined) return reject('invalid', HandoffErrorCode.noDeadline, `handoff ${state.id} has no deadline`);
  if (state.status !== 'pending' && state.status !== 'claimed') return wrongState(HandoffErrorCode.handoffNotOpen, state, 'pending or claimed');
  if (!isAtOrAfter(metadata.now, state.deadline_at)) {
    return reject('wrong_state', HandoffErrorCode.deadlineNotReached, `handoff ${state.id} is due at ${state.deadline_at}`, {
      deadline_at: state.deadline_at,
    });
  }
  const event: HandoffEvent = {
    type: 'handoff.deadline_expired',
    data: base(data, metadata, { deadline_at: state.deadline_at, expired_by: metadata.actor }),
  };
  if (state.status === 'claimed') event.data.claimed_by = state.claim.claimed_by;
  return accept(event);
}

function decideClaim({ data, metadata }: ClaimHandoff, state: ExistingHandoff): Decision {
  if (state.status !== 'pending') return wrongState(HandoffErrorCode.handoffNotPending, state, 'pending');
  if (isReviewedWorker(state, metadata)) {
    return reject('forbidden', HandoffErrorCode.selfReviewForbidden, `${metadata.actor} cannot review its own work`);
  }
  if (state.to_agent !== undefined && state.to_agent !== metadata.actor) {
    return reject('forbidden', HandoffErrorCode.notTheAddressee, `handoff ${state.id} is addressed to ${state.to_agent}`, {
      to_agent: state.to_agent,
    });
  }
  if (state.to_role !== undefined && !data.claimer_roles.includes(state.to_role)) {
    return reject('forbidden', HandoffErrorCode.notTheAddressee, `handoff ${state.id} is addressed to role ${state.to_role}`, {
      to_role: state.to_role,
    });
  }
  // Work already past its deadline is not given out: the claimer could not do it in time, and the
  // lapse the watchdog records next would be charged to it (a deadline passing on a pending handoff is nobody's).
  if (state.deadline_at !== undefined && isAtOrAfter(metadata.now, state.deadline_at)) {
    return reject('wrong_state', HandoffErrorCode.deadlinePassed, `handoff ${state.id} was due at ${state.deadline_at}; it fails at its deadline, unclaimed`, {
      deadline_at: state.deadline_at,
    });
  }
  return accept({
    type: 'handoff.claimed',
    data: base(data, metadata, {
      claimed_by: metadata.actor,
      // What the claimer is, from its connection: the worker is this kind and name (a handback's self-decision rule).
      claimed_by_kind: metadata.actorKind,
      claim_id: data.claim_id,
      lease_expires_at: plusMs(metadata.now, data.lease_ms),
    }),
  });
}

function decideHeartbeat({ data, metadata }: HeartbeatHandoff, state: ExistingHandoff): Decision {
  if (state.status !== 'claimed') return wrongState(HandoffErrorCode.handoffNotClaimed, state, 'claimed');
  if (data.claim_id !== state.claim.claim_id) return staleClaim(state, data.claim_id);
  if (metadata.actor !== state.claim.claimed_by) {
    return reject('forbidden', HandoffErrorCode.notTheClaimer, `${metadata.actor} does not hold the claim on handoff ${state.id}`);
  }
  if (isAtOrAfter(metadata.now, state.claim.lease_expires_at)) {
    return reject('wrong_state', HandoffErrorCode.leaseExpired, `the lease on handoff ${state.id} expired at ${state.claim.lease_expires_at}`, {
      handoff_id: state.id,
      lease_expires_at: state.claim.lease_expires_at,
    });
  }
  return accept({
    type: 'handoff.heartbeat',
    data: base(data, metadata, { claim_id: data.claim_id, lease_expires_at: plusMs(metadata.now, data.lease_ms ?? state.claim.lease_ms) }),
  });
}

function decideReturn({ data, metadata }: ReturnHandoff, state: ExistingHandoff): Decision {
  if (state.kind === 'completion_handback') {
    return reject('invalid', HandoffErrorCode.notReturnable, `handoff ${state.id} is a completion handback: decide it (accept | rework)`);
  }
  if (state.status !== 'claimed') return wrongState(HandoffErrorCode.handoffNotClaimed, state, 'claimed');
  const refused = checkClaimer(state, data.claim_id, metadata);
  if (refused) return refused;
  const worker = state.claim.claimed_by;
  const floored = applyEvidenceFloor(data.report, metadata.actorKind);
  const event: HandoffEvent = {
    type: 'handoff.returned',
    data: base(data, metadata, {
      claim_id: state.claim.claim_id,
      returned_by: metadata.actor,
      worker,
      worker_kind: state.claim.claimed_by_kind,
      report: floored.report,
      handback_id: data.handback_id,
      // A cross-project handoff's delegator is an agent of the source project: an agent of the same
      // name here is someone else, so the target project's lead (or its operators) reviews it.
      handback_recipient: handbackRecipient(state.source_project === undefined ? state.from_agent : undefined, worker, data.roster),
    }),
  };
  if (floored.evidence_floor) event.data.evidence_floor = floored.evidence_floor;
  return accept(event);
}

function decideHandback({ data, metadata }: DecideHandback, state: ExistingHandoff): Decision {
  if (state.kind !== 'completion_handback' || state.reply_to_handoff_id === undefined) {
    return reject('invalid', HandoffErrorCode.notAHandback, `handoff ${state.id} is not a completion handback`);
  }
  if (state.status === 'completed' || state.status === 'archived') {
    return wrongState(HandoffErrorCode.handbackAlreadyDecided, state, 'pending or claimed');
  }
  if (state.status !== 'pending' && state.status !== 'claimed') return wrongState(HandoffErrorCode.handoffNotOpen, state, 'pending or claimed');
  // Known hole (c): the worker never decides on its own work — the worker being the principal that
  // claimed it, kind and name (a person named like the worker agent is someone else; handbacks
  // recorded without the kind: the name alone).
  if (isReviewedWorker(state, metadata)) {
    return data.decision === 'accept'
      ? reject('forbidden', HandoffErrorCode.selfAcceptForbidden, `${metadata.actor} did the work and cannot accept it`)
      : reject('forbidden', HandoffErrorCode.selfReviewForbidden, `${metadata.actor} did the work and cannot review it`);
  }
  // The work it reviews ended without it (a person abandoned or failed the returned parent): the
  // ledger is withdrawing this review, and a decision could move nothing.
  if (data.parent_status === 'abandoned' || data.parent_status === 'failed') {
    return reject(
      'wrong_state',
      HandoffErrorCode.reviewWithdrawn,
      `the work handback ${state.id} reviews (${state.reply_to_handoff_id}) was ${data.parent_status}; its review is being withdrawn`,
      { handoff_id: state.id, parent_handoff_id: state.reply_to_handoff_id, parent_status: data.parent_status },
    );
  }
  const addressee =
    isPerson(metadata.actorKind) ||
    (state.to_agent !== undefined && state.to_agent === metadata.actor) ||
    (state.status === 'claimed' && state.claim.claimed_by === metadata.actor);
  if (!addressee) {
    return reject('forbidden', HandoffErrorCode.notTheAddressee, `handback ${state.id} is not addressed to ${metadata.actor}`);
  }
  const event: HandoffEvent = {
    type: 'handoff.handback_decided',
    data: base(data, metadata, {
      parent_handoff_id: state.reply_to_handoff_id,
      decision: data.decision,
      decided_by: metadata.actor,
      decided_by_kind: metadata.actorKind,
    }),
  };
  if (data.note !== undefined) event.data.note = data.note;
  return accept(event);
}

/**
 * The worker whose work a handback reviews may not end that handback (abandon, release, fail):
 * its from_agent is the worker, and a handback that ends undecided leaves the parent `returned`.
 * The worker is kind and name when the handback recorded the kind ({@link isReviewedWorker}).
 */
function checkNotReviewedWorker(state: ExistingHandoff, metadata: HandoffCommandMetadata, what: string): Decision | null {
  if (!isReviewedWorker(state, metadata)) return null;
  return reject('forbidden', HandoffErrorCode.reviewEndForbidden, `${metadata.actor} did the work handback ${state.id} reviews and cannot ${what} it`, {
    handoff_id: state.id,
  });
}

function decideRelease({ data, metadata }: ReleaseHandoff, state: ExistingHandoff): Decision {
  // The worker may never end its own review, whatever its status (rule 12): said first.
  const worker = checkNotReviewedWorker(state, metadata, 'release');
  if (worker) return worker;
  if (state.status !== 'claimed') return wrongState(HandoffErrorCode.handoffNotClaimed, state, 'claimed');
  const refused = checkClaimer(state, data.claim_id, metadata);
  if (refused) return refused;
  return accept({
    type: 'handoff.released',
    data: base(data, metadata, { claim_id: state.claim.claim_id, released_by: metadata.actor, reason: data.reason }),
  });
}

function decideAbandon({ data, metadata }: AbandonHandoff, state: ExistingHandoff): Decision {
  // A name is someone only within its project. A cross-project handoff's delegator is an agent of
  // the source project and reaches it from there (`actorProject`); an agent of the project it
  // lives in that shares the name is someone else. People and Baton act within the handoff's own
  // project only. A caller from another project is told who may before anything of the
  // handoff's state: only its delegator learns that.
  const foreign = metadata.actorProject !== undefined && metadata.actorProject !== state.project;
  const delegatorProject = state.source_project ?? state.project;
  const isDelegator = metadata.actorKind === 'agent' && metadata.actor === state.from_agent && (metadata.actorProject ?? state.project) === delegatorProject;
  if (foreign && !isDelegator) return notTheDelegator(state, delegatorProject);
  if (state.status !== 'pending' && state.status !== 'claimed' && state.status !== 'returned') {
    // The ledger's own withdrawal of a review whose parent ended: a review that ended meanwhile needs nothing.
    if (metadata.actorKind === 'system' && metadata.actor === LEDGER_ACTOR) return accept();
    return wrongState(HandoffErrorCode.handoffNotOpen, state, 'pending, claimed or returned');
  }
  const worker = checkNotReviewedWorker(state, metadata, 'abandon');
  if (worker) return worker;
  if (!isDelegator && !isPerson(metadata.actorKind) && metadata.actorKind !== 'system') return notTheDelegator(state, delegatorProject);
  // A returned handoff whose review was decided is being completed (accept) or offered again
  // (rework) by that decision: abandoning it now would leave the decision reported applied and
  // without effect. Once the decision has moved it, it can be abandoned if it is open.
  const decided = data.review_decided;
  if (state.status === 'returned' && decided !== undefined && decided.handback_id === state.handback_id) {
    return reject(
      'wrong_state',
      HandoffErrorCode.handbackAlreadyDecided,
      `handoff ${state.id}'s review ${decided.handback_id} was decided; the decision is moving it (accept completes it, rework offers it again)`,
      { handoff_id: state.id, handback_id: decided.handback_id },
    );
  }
  // The handoff's run took its agent's result already (the router read the claim current); the
  // router's completion is on its way. Withdrawing the work now would say it was withdrawn while
  // the run goes on with it. Baton's own abandons (a stopped run's handoff) are not held back.
  const recorded = data.result_recorded;
  if (recorded !== undefined && metadata.actorKind !== 'system' && (state.status === 'pending' || state.status === 'claimed')) {
    return reject(
      'wrong_state',
      HandoffErrorCode.resultAlreadyRecorded,
      `run ${recorded.workflow_run_id} already recorded result ${recorded.result_id} of '${recorded.agent}' for handoff ${state.id}; the router is closing the handoff with it`,
      { handoff_id: state.id, workflow_run_id: recorded.workflow_run_id, result_id: recorded.result_id },
    );
  }
  return accept({
    type: 'handoff.abandoned',
    data: base(data, metadata, {
      abandoned_by: metadata.actor,
      ...(foreign ? { abandoned_by_project: metadata.actorProject } : {}),
      reason: data.reason,
    }),
  });
}

function notTheDelegator(state: ExistingHandoff, delegatorProject: string): Decision {
  // A completion handback's from_agent is the worker whose work it reviews, who may not end it
  // (review_end_forbidden): only the project's operators may.
  if (state.reviewed_worker !== undefined && state.reviewed_worker === state.from_agent) {
    return reject('forbidden', HandoffErrorCode.notTheDelegator, `only an operator of project ${state.project} may abandon handback ${state.id}`, {
      handoff_id: state.id,
    });
  }
  const who = state.source_project !== undefined ? `${state.from_agent} of project ${state.source_project}` : state.from_agent;
  return reject('forbidden', HandoffErrorCode.notTheDelegator, `only ${who} or an operator of project ${state.project} may abandon handoff ${state.id}`, {
    handoff_id: state.id,
    delegator: state.from_agent,
    delegator_project: delegatorProject,
  });
}

function decideFail({ data, metadata }: FailHandoff, state: ExistingHandoff): Decision {
  if (state.status !== 'pending' && state.status !== 'claimed' && state.status !== 'returned') {
    return wrongState(HandoffErrorCode.handoffNotOpen, state, 'pending, claimed or returned');
  }
  const worker = checkNotReviewedWorker(state, metadata, 'fail');
  if (worker) return worker;
  const overseer = isPerson(metadata.actorKind) || metadata.actorKind === 'watchdog' || metadata.actorKind === 'system';
  if (!overseer) {
    // An agent may fail only the work it holds. Naming a claim the handoff no longer has (its lease
    // lapsed and the watchdog requeued it, say) is the same refusal as a late return or release.
    if (state.status !== 'claimed') {
      if (data.claim_id !== undefined) return wrongState(HandoffErrorCode.handoffNotClaimed, state, 'claimed');
      return reject('forbidden', HandoffErrorCode.notTheClaimer, `${metadata.actor} does not hold a claim on handoff ${state.id}`);
    }
    const refused = checkClaimer(state, data.claim_id, metadata);
    if (refused) return refused;
  }
  return accept({ type: 'handoff.failed', data: base(data, metadata, { failed_by: metadata.actor, reason: data.reason }) });
}

function decideArchive({ data, metadata }: ArchiveHandoff, state: ExistingHandoff): Decision {
  switch (state.status) {
    case 'completed':
    case 'released':
    case 'abandoned':
    case 'failed':
      return accept({
        type: 'handoff.archived',
        data: base(data, metadata, { archived_by: metadata.actor, archived_from: state.status }),
      });
    case 'pending':
    case 'claimed':
    case 'returned':
    case 'archived':
      return wrongState(HandoffErrorCode.handoffNotTerminal, state, 'completed, released, abandoned or failed');
    default:
      return assertNever(state, 'handoff state');
  }
}

/**
 * The retry round a lapse or a give-up starts: the count it would record, and whether that passes
 * the cap. A completion handback has no retry cap (rule 5): its round keeps the count and never
 * passes it.
 */
function retryRound(state: ExistingHandoff): { nextRetry: number; pastCap: boolean } {
  if (state.kind === 'completion_handback') return { nextRetry: state.retry.retry_count, pastCap: false };
  const nextRetry = state.retry.retry_count + 1;
  return { nextRetry, pastCap: nextRetry > state.retry.max_retries };
}

/**
 * The escalation that takes the place of a retry round past the cap: the one `handoff.escalated`
 * shape a lapsed lease, a given-up offer and a rework all record, with what is particular to the
 * cause (the claim that lapsed; who gave up and why; the handback and its note).
 */
function escalatePastCap(
  data: { handoff_id: string; idempotency_key: string },
  metadata: HandoffCommandMetadata,
  state: ExistingHandoff,
  attemptedRetry: number,
  cause: HandoffEventData<'handoff.escalated'>['cause'],
  outcome: EscalationOutcome,
  own: Pick<HandoffEventData<'handoff.escalated'>, 'claim_id' | 'handback_id' | 'note' | 'given_up'>,
): Decision {
  return accept({
    type: 'handoff.escalated',
    data: base(data, metadata, { cause, attempted_retry: attemptedRetry, max_retries: state.retry.max_retries, outcome, ...own }),
  });
}

/**
 * Lease expiry, issued by the watchdog with the claim id it saw. Requeues exactly once: a second
 * requeue for the same claim finds the handoff no longer claimed (or claimed under a new id) and
 * is refused, which is what makes two watchdogs safe. Over the retry cap it escalates instead —
 * except a completion handback: a review has no retry cap (it waits for its decision, and
 * escalating it would fail the review and stop its run for one reviewer's lapse), so its lapse
 * always requeues it to its recipient, `retry_count` unchanged.
 */
function decideRequeue({ data, metadata }: RequeueExpired, state: ExistingHandoff): Decision {
  if (state.status !== 'claimed') return wrongState(HandoffErrorCode.handoffNotClaimed, state, 'claimed');
  if (data.claim_id !== state.claim.claim_id) return staleClaim(state, data.claim_id);
  if (!isAtOrAfter(metadata.now, state.claim.lease_expires_at)) {
    return reject('wrong_state', HandoffErrorCode.leaseNotExpired, `the lease on handoff ${state.id} runs until ${state.claim.lease_expires_at}`, {
      lease_expires_at: state.claim.lease_expires_at,
    });
  }
  const round = retryRound(state);
  if (round.pastCap) {
    return escalatePastCap(data, metadata, state, round.nextRetry, 'lease_expired', escalationOutcome(state, data.project_lead, data.escalation_handoff_id), {
      claim_id: data.claim_id,
    });
  }
  const nextRetry = round.nextRetry;
  return accept({
    type: 'handoff.lease_expired',
    data: base(data, metadata, {
      claim_id: data.claim_id,
      expired_claimer: state.claim.claimed_by,
      lease_expires_at: state.claim.lease_expires_at,
      retry_count: nextRetry,
    }),
  });
}

/**
 * The addressed agent gave up on the offer of a pending handoff without claiming it (its handler
 * kept failing; the SDK terminated the offer). Nothing is left silently pending: like a lapsed lease
 * the give-up is a retry (`retry_count + 1`, the handoff offered again by the ledger's reactor), and
 * the one that would pass the cap escalates instead (cause `offer_given_up`: a consult to the
 * lead, never to the agent that gave up, else a `guard_failed` stop). A completion handback has no
 * retry cap (rule 5): its give-up is recorded with the count unchanged and it is not offered again —
 * its operator inbox item stays open for a person. Only the addressee (`to_agent`) may give up, only
 * while the handoff is pending, and only on the current round's offer (`offered_version`, when given).
 */
function decideGiveUpOffer({ data, metadata }: GiveUpOffer, state: ExistingHandoff): Decision {
  if (state.status !== 'pending') return wrongState(HandoffErrorCode.handoffNotPending, state, 'pending');
  if (metadata.actorKind !== 'agent' || state.to_agent === undefined || state.to_agent !== metadata.actor) {
    return reject(
      'forbidden',
      HandoffErrorCode.notTheAddressee,
      state.to_agent === undefined
        ? `handoff ${state.id} is offered to no agent; nobody gives up its offer`
        : `handoff ${state.id} is addressed to ${state.to_agent}; only it gives up its offer`,
      { handoff_id: state.id, ...(state.to_agent !== undefined ? { to_agent: state.to_agent } : {}) },
    );
  }
  if (data.offered_version !== undefined && data.offered_version !== state.version) {
    return reject(
      'wrong_state',
      HandoffErrorCode.staleOffer,
      `the give-up names the offer of handoff ${state.id} at version ${data.offered_version}, but the handoff is at version ${state.version}: that is not the offer it holds now`,
      { handoff_id: state.id, offered_version: data.offered_version, version: state.version },
    );
  }
  const review = state.kind === 'completion_handback';
  // A review is not offered again once given up: it waits for a person, and its record and inbox
  // item already say so. A second give-up changes nothing (an offer named after it never existed).
  if (review && state.offer_given_up !== undefined) return accept();
  // A returnable child (a run's handoff with a deadline): its run waits on it, and seed 001 says
  // ON_FAILURE runs when the handoff fails before the child accepts it. It fails at once (the
  // router then applies ON_FAILURE: continue, RESPOND or ESCALATE), with no retry round.
  if (!review && state.workflow_run_id !== undefined && state.deadline_at !== undefined) {
    const reason = `${givenUpPrefix(metadata.actor, data.deliveries)}${data.reason}`;
    return accept({
      type: 'handoff.failed',
      data: base(data, metadata, {
        failed_by: metadata.actor,
        reason: clipText(reason),
        cause: 'offer_given_up',
        deliveries: data.deliveries,
      }),
    });
  }
  const round = retryRound(state);
  if (round.pastCap) {
    const outcome = escalationOutcome(state, data.project_lead, data.escalation_handoff_id, { agent: metadata.actor });
    return escalatePastCap(data, metadata, state, round.nextRetry, 'offer_given_up', outcome, {
      note: data.reason,
      given_up: { by: metadata.actor, deliveries: data.deliveries, reason: data.reason },
    });
  }
  return accept({
    type: 'handoff.offer_given_up',
    data: base(data, metadata, { given_up_by: metadata.actor, deliveries: data.deliveries, reason: data.reason, retry_count: round.nextRetry }),
  });
}

/**
 * Router only: close a pending or claimed handoff with the agent result its workflow run recorded
 * (no handback: the run owns what happens next). The report is built from the result and goes
 * through the evidence floor exactly as a return does (actor kind `system` is floored). Refused
 * with `internal_command` for any other actor kind, `not_returnable` on a completion handback
 * (handbacks are decided) and `handoff_not_open` in any other status. Idempotent by key.
 */
function decideCompleteFromResult({ data, metadata }: CompleteFromResult, state: ExistingHandoff): Decision {
  if (metadata.actorKind !== 'system') {
    return reject('forbidden', HandoffErrorCode.internalCommand, 'complete_from_result is issued by the router only');
  }
  if (state.kind === 'completion_handback') {
    return reject('invalid', HandoffErrorCode.notReturnable, `handoff ${state.id} is a completion handback: decide it (accept | rework)`);
  }
  if (state.status !== 'pending' && state.status !== 'claimed') return wrongState(HandoffErrorCode.handoffNotOpen, state, 'pending or claimed');
  const report = {
    summary: data.summary ?? `agent ${data.agent} recorded result ${data.result_id}`,
    files_changed: [],
    verification: '',
    next_steps: '',
    outcome: 'completed' as const,
    evidence: data.evidence,
  };
  const floored = applyEvidenceFloor(report, metadata.actorKind);
  const event: HandoffEvent = {
    type: 'handoff.completed_by_result',
    data: base(data, metadata, {
      result_id: data.result_id,
      agent: data.agent,
      recorded_by: metadata.actor,
      report: floored.report,
    }),
  };
  if (data.workflow_run_id !== undefined) event.data.workflow_run_id = data.workflow_run_id;
  if (floored.evidence_floor) event.data.evidence_floor = floored.evidence_floor;
  const voided = voidedLapse(data.claim_id, state);
  if (voided !== null) event.data.lapse_voided = voided;
  return accept(event);
}

/**
 * Rule 4a: the router accepted the result under `claimId` while that claim was current, and the
 * watchdog's requeue of the same claim reached the ledger before the completion did. The result
 * came first, so the lapse counts for nothing: the completion names it and restores the retry
 * count it took. Null when the result names no claim or not the one that lapsed last.
 */
function voidedLapse(claimId: string | undefined, state: ExistingHandoff): NonNullable<HandoffEventData<'handoff.completed_by_result'>['lapse_voided']> | null {
  const lapsed = state.lapsed_claim;
  if (claimId === undefined || lapsed === undefined || lapsed.claim_id !== claimId) return null;
  return { claim_id: lapsed.claim_id, claimer: lapsed.claimed_by, retry_count: lapsed.retry_count };
}

function checkInternalOnReturned(
  command: CompleteFromHandback | ReworkFromHandback,
  state: ExistingHandoff,
): { ok: true; state: ReturnedHandoff } | { ok: false; decision: Decision } {
  if (command.metadata.actorKind !== 'system') {
    return { ok: false, decision: reject('forbidden', HandoffErrorCode.internalCommand, `${command.type} is issued by the ledger's handback policy only`) };
  }
  if (state.status !== 'returned') return { ok: false, decision: wrongState(HandoffErrorCode.handoffNotReturned, state, 'returned') };
  if (state.handback_id !== command.data.handback_id) {
    return {
      ok: false,
      decision: reject('wrong_state', HandoffErrorCode.staleHandback, `handback ${command.data.handback_id} is not the open handback of ${state.id}`),
    };
  }
  return { ok: true, state };
}

function decideCompleteFromHandback(command: CompleteFromHandback, state: ExistingHandoff): Decision {
  const checked = checkInternalOnReturned(command, state);
  if (!checked.ok) return checked.decision;
  const { data, metadata } = command;
  return accept({
    type: 'handoff.completed',
    data: base(data, metadata, { handback_id: data.handback_id, accepted_by: data.accepted_by }),
  });
}

function decideReworkFromHandback(command: ReworkFromHandback, state: ExistingHandoff): Decision {
  const checked = checkInternalOnReturned(command, state);
  if (!checked.ok) return checked.decision;
  const { data, metadata } = command;
  const nextRetry = state.retry.retry_count + 1;
  if (nextRetry > state.retry.max_retries) {
    return escalatePastCap(data, metadata, state, nextRetry, 'rework', escalationOutcome(state, data.project_lead, data.escalation_handoff_id), {
      handback_id: data.handback_id,
      note: data.note,
    });
  }
  return accept({
    type: 'handoff.reworked',
    data: base(data, metadata, { handback_id: data.handback_id, note: data.note, reworked_by: data.reworked_by, retry_count: nextRetry }),
  });
}

/**
 * The parent's handback ended without a decision: open the review again under a new handback
 * (the handback policy then creates it, as on a return). Only while the parent is still `returned`
 * with that handback open: a parent an operator abandoned or failed meanwhile, or whose review
 * was already reopened, decides nothing (no events; the reaction is idempotent).
 */
function decideReopenReview(command: ReopenReview, state: ExistingHandoff): Decision {
  if (command.metadata.actorKind !== 'system') {
    return reject('forbidden', HandoffErrorCode.internalCommand, `${command.type} is issued by the ledger's handback policy only`);
  }
  const { data, metadata } = command;
  if (state.status !== 'returned' || state.handback_id !== data.handback_id) return accept();
  // A reviewer that keeps declining (releasing each new handback) is asked again at most
  // MAX_DECLINED_REVIEWS times; then the review goes to the operators, who decide it in the inbox.
  const declined = (state.reviews_declined ?? 0) + (data.ended === 'released' ? 1 : 0);
  const recipient: HandbackRecipient = declined >= MAX_DECLINED_REVIEWS ? { to_role: 'operator', reason: 'no_eligible_reviewer' } : state.handback_recipient;
  return accept({
    type: 'handoff.review_reopened',
    data: base(data, metadata, {
      previous_handback_id: data.handback_id,
      ended: data.ended,
      handback_id: data.new_handback_id,
      worker: data.worker,
      ...(data.worker_kind !== undefined ? { worker_kind: data.worker_kind } : {}),
      handback_recipient: recipient,
    }),
  });
}

/**
 * How many handbacks of one review their reviewer may release (decline) before the review goes to
 * the operators: without a bound, a reviewer that declines every handback it is offered had the
 * ledger create and offer a new one at once, for ever (a soak saw 930 in two minutes).
 */
export const MAX_DECLINED_REVIEWS = 3;

/**
 * What this create's key is to the handoff that exists: its idempotency key was applied there by a
 * create from the same creator (see `RecentKey`), and it comes from the same project — a retry, or a
 * reuse when the creator's body then differed. Keys are chosen by callers and repeat across
 * projects, so a key met on another project's handoff (a cross-project create naming an id the
 * target project uses, or one whose key was guessed), or another caller's key, is not this
 * caller's: `new`, and the create yields `already_exists`.
 */
function createKeyUse(command: CreateHandoff, state: ExistingHandoff): KeyUse {
  const from = command.data.cross_project?.source_project ?? command.data.project;
  return from === (state.source_project ?? state.project) ? recentKeyUse(state, command) : { use: 'new' };
}

/** The refusal of a key the same caller used for the same command with another body (rule 13). */
function keyReused(command: HandoffCommand, handoffId: string): Decision {
  return reject(
    'wrong_state',
    HandoffErrorCode.idempotencyKeyReused,
    `idempotency_key ${command.data.idempotency_key} was used for another ${command.type} of handoff ${handoffId}; a retry sends the same body, a new request a new key`,
    { handoff_id: handoffId, idempotency_key: command.data.idempotency_key, command: command.type },
  );
}

/**
 * The events of a decision, each caused by the command's own key stamped with the digest of the
 * caller's body (so a later reuse of the key with another body is recognised). The services' own
 * commands carry no digest and their events are left as decided.
 */
function stamped(command: HandoffCommand, decision: Decision): Decision {
  const digest = command.metadata.digest;
  if (digest === undefined || !decision.ok || decision.events.length === 0) return decision;
  const key = command.data.idempotency_key;
  return {
    ok: true,
    events: decision.events.map((event) =>
      event.data.idempotency_key === key ? ({ ...event, data: { ...event.data, command_digest: digest } } as HandoffEvent) : event,
    ),
  };
}

/**
 * Decide one handoff command. Pure: never throws for a business reason and never reads the clock.
 * A command whose idempotency key this handoff already applied for the same command from the same
 * actor yields no events (ok, empty), so a retried request is harmless — unless both carried a body
 * digest and the bodies differ: `idempotency_key_reused`. Another command or another actor with
 * that key is decided as usual. Illegal commands yield a typed DomainError ({@link HandoffErrorCode}).
 */
export function decideHandoff(command: HandoffCommand, state: HandoffState): Decision {
  return stamped(command, decideUnstamped(command, state));
}

function decideUnstamped(command: HandoffCommand, state: HandoffState): Decision {
  if (command.type === 'create') {
    // A cross-project create is checked before anything about the target's handoff is told: its
    // caller may not learn that the id exists there, nor get its record, without passing.
    const crossRefusal = checkCrossProject(command.data);
    if (crossRefusal) return crossRefusal;
    const rosterRefusal = checkLocalRoster(command);
    if (rosterRefusal) return rosterRefusal;
    const creatorRefusal = checkCreator(command);
    if (creatorRefusal) return creatorRefusal;
    if (state.status !== 'absent') {
      const key = createKeyUse(command, state);
      if (key.use === 'retry') return accept();
      if (key.use === 'reused') return keyReused(command, state.id);
    }
    // After the retry: a create stored while its run waited for its sender is answered as stored.
    const runRefusal = checkRunPart(command);
    if (runRefusal) return runRefusal;
    return decideCreate(command, state);
  }
  // A caller from another project (a cross-project delegator) reaches only handoffs its project
  // delegated: any other id there is answered as absent, so it learns nothing of that project.
  const from = command.metadata.actorProject;
  if (state.status === 'absent' || (from !== undefined && from !== state.project && state.source_project !== from)) {
    return reject('not_found', HandoffErrorCode.notFound, `handoff ${command.data.handoff_id} does not exist`, {
      handoff_id: command.data.handoff_id,
    });
  }
  if (command.data.handoff_id !== state.id) {
    return reject('invalid', HandoffErrorCode.wrongAggregate, `command for ${command.data.handoff_id} sent to handoff ${state.id}`);
  }
  const key = recentKeyUse(state, command);
  if (key.use === 'retry') return accept();
  if (key.use === 'reused') return keyReused(command, state.id);
  switch (command.type) {
    case 'claim':
      return decideClaim(command, state);
    case 'heartbeat':
      return decideHeartbeat(command, state);
    case 'return':
      return decideReturn(command, state);
    case 'decide_handback':
      return decideHandback(command, state);
    case 'release':
      return decideRelease(command, state);
    case 'abandon':
      return decideAbandon(command, state);
    case 'fail':
      return decideFail(command, state);
    case 'archive':
      return decideArchive(command, state);
    case 'requeue_expired':
      return decideRequeue(command, state);
    case 'complete_from_result':
      return decideCompleteFromResult(command, state);
    case 'expire_deadline':
      return decideExpireDeadline(command, state);
    case 'give_up_offer':
      return decideGiveUpOffer(command, state);
    case 'complete_from_handback':
      return decideCompleteFromHandback(command, state);
    case 'rework_from_handback':
      return decideReworkFromHandback(command, state);
    case 'reopen_review':
      return decideReopenReview(command, state);
    default:
      return assertNever(command, 'handoff command');
  }
}
