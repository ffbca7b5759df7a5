import type {
  AbandonHandoffCommand,
  ArchiveHandoffCommand,
  CompleteFromResultCommand,
  CreateHandoffCommand,
  DecideHandbackCommand,
  ExpireDeadlineCommand,
  FailHandoffCommand,
  GiveUpOfferCommand,
  HandoffActorKind,
  HandoffCommandMetadata,
  HandoffKind,
  ReleaseHandoffCommand,
  RequeueExpiredCommand,
  ReturnHandoffCommand,
} from '@baton/contracts';
import type { RunTurn } from './run-turn';

/*
 * The commands the handoff decider takes. Each is a wire command (see `HandoffCommandSchemas` in
 * @baton/contracts) plus what the ledger resolved before deciding: generated ids, the lease, the
 * claimer's roles, the project's roster and lead. The decider never looks anything up and never
 * trusts the caller for those: the ledger fills them from its own sources.
 */

type Command<T extends string, D> = { type: T; data: D; metadata: HandoffCommandMetadata };

/**
 * Create a handoff. From the wire `kind` is task or consult; the ledger's own policy (actor kind
 * `system`) also creates completion handbacks, which name the worker they review.
 */
export type CreateHandoff = Command<
  'create',
  Omit<CreateHandoffCommand, 'kind'> & {
    kind: HandoffKind;
    reviewed_worker?: string;
    /** The reviewed worker's kind (its claim's), when the return recorded it: the worker is kind and name. */
    reviewed_worker_kind?: HandoffActorKind;
    cross_project?: CrossProjectRosters;
    /**
     * A local create sent to the ledger: the project's visible actors, as its definition names
     * them. Empty: the project has no definition, and no roster to check against.
     */
    roster?: readonly string[];
    /**
     * An agent's create that names a run (`workflow_run_id`): that run as the ledger read it (in
     * the run's project), which must wait for the agent (`not_in_run`, run-turn.ts). Absent on the
     * services' creates, and on commands not sent through the ledger: nothing is checked then.
     */
    run_turn?: RunTurn;
  }
>;

/**
 * What the ledger resolved for a cross-project create (`target_project` on the wire): the source
 * project and the visible actors of both projects. The command's `project` is then the TARGET
 * project (where the handoff lives).
 */
export interface CrossProjectRosters {
  source_project: string;
  source_visible: readonly string[];
  target_visible: readonly string[];
  /** The target project's definition accepts handoffs from the source (`accepts_handoffs_from`). */
  target_accepts: boolean;
}

/** Watchdog: the handoff's deadline has passed; fail it once (terminal_reason `deadline`). */
export type ExpireDeadline = Command<'expire_deadline', ExpireDeadlineCommand>;

/** Claim: the ledger generates the claim id, applies its default lease and resolves the claimer's roles. */
export type ClaimHandoff = Command<
  'claim',
  { handoff_id: string; idempotency_key: string; claim_id: string; lease_ms: number; claimer_roles: readonly string[] }
>;

/** `lease_ms` absent: the claim's own lease length, as it was taken. */
export type HeartbeatHandoff = Command<'heartbeat', { handoff_id: string; claim_id: string; idempotency_key: string; lease_ms?: number }>;

/** What the ledger knows about the project when a handoff is returned. */
export interface ProjectRoster {
  /** Actors visible in the project (registered, not hidden): a delegator outside it gets no handback. */
  visible_actors: readonly string[];
  /** The project's default lead, when it has one. */
  project_lead?: string;
}

/** Return: the ledger supplies the handback's id (deterministic, from the request) and the roster. */
export type ReturnHandoff = Command<'return', ReturnHandoffCommand & { handback_id: string; roster: ProjectRoster }>;

/**
 * Decide a completion handback. The ledger adds what its parent (the returned work it reviews) is
 * now: a parent that ended meanwhile (abandoned or failed by a person) takes no decision.
 */
export type DecideHandback = Command<'decide_handback', DecideHandbackCommand & { parent_status?: string }>;
export type ReleaseHandoff = Command<'release', ReleaseHandoffCommand>;
/**
 * Abandon (withdraw) a handoff. For a returned parent the ledger adds its open review's decision,
 * if one was made: a decided review is moving the parent already (accept completes it, rework
 * offers it again), and an abandon would leave that decision without effect.
 */
/**
 * `review_decided`: the ledger found the returned handoff's review decided (the decision is moving
 * it). `result_recorded`: the ledger found the handoff's workflow run has recorded an agent result
 * for it (the router is closing it with that result, docs/runs.md).
 */
export type AbandonHandoff = Command<
  'abandon',
  AbandonHandoffCommand & { review_decided?: { handback_id: string }; result_recorded?: { workflow_run_id: string; result_id: string; agent: string } }
>;
export type FailHandoff = Command<'fail', FailHandoffCommand>;
export type ArchiveHandoff = Command<'archive', ArchiveHandoffCommand>;

/** Requeue an expired lease (watchdog). The ledger adds the lead and the id an escalation would use. */
export type RequeueExpired = Command<'requeue_expired', RequeueExpiredCommand & { project_lead?: string; escalation_handoff_id: string }>;

/**
 * Router only (actor kind `system`): the workflow run recorded an agent result for the handoff that
 * dispatched that agent, so the handoff closes with it (pending | claimed → completed) without a
 * handback. The evidence floor applies as on returns. Nothing is looked up by the ledger.
 */
export type CompleteFromResult = Command<'complete_from_result', CompleteFromResultCommand>;

/**
 * The addressed agent gave up on an offer it never claimed (`give_up_offer`). The ledger adds the
 * lead and the id a consult would get, should this give-up pass the retry cap.
 */
export type GiveUpOffer = Command<'give_up_offer', GiveUpOfferCommand & { project_lead?: string; escalation_handoff_id: string }>;

/** Internal (policy → parent, actor kind `system` only): the parent's handback was accepted. */
export type CompleteFromHandback = Command<'complete_from_handback', { handoff_id: string; handback_id: string; accepted_by: string; idempotency_key: string }>;

/** Internal (policy → parent, actor kind `system` only): the parent's handback asked for rework. */
export type ReworkFromHandback = Command<
  'rework_from_handback',
  {
    handoff_id: string;
    handback_id: string;
    note: string;
    reworked_by: string;
    project_lead?: string;
    escalation_handoff_id: string;
    idempotency_key: string;
  }
>;

/**
 * Internal (policy → parent, actor kind `system` only): the parent's handback `handback_id` ended
 * without a decision (`ended`); open the review again under `new_handback_id`.
 */
export type ReopenReview = Command<
  'reopen_review',
  {
    handoff_id: string;
    handback_id: string;
    ended: 'released' | 'abandoned' | 'failed' | 'escalated' | 'deadline_expired';
    new_handback_id: string;
    worker: string;
    /** The worker's kind as the ended handback recorded it (absent when it did not). */
    worker_kind?: HandoffActorKind;
    idempotency_key: string;
  }
>;

export type HandoffCommand =
  | CreateHandoff
  | ClaimHandoff
  | HeartbeatHandoff
  | ReturnHandoff
  | DecideHandback
  | ReleaseHandoff
  | AbandonHandoff
  | FailHandoff
  | ArchiveHandoff
  | RequeueExpired
  | CompleteFromResult
  | ExpireDeadline
  | GiveUpOffer
  | CompleteFromHandback
  | ReworkFromHandback
  | ReopenReview;

export type HandoffCommandType = HandoffCommand['type'];
