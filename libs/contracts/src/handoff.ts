import { z } from 'zod';
import { EvidenceSchema } from './agent-result';
import {
  CommandDigestSchema,
  IdSchema,
  IsoTimeSchema,
  Limits,
  ProjectIdSchema,
  ShortTextSchema,
  NonBlankShortTextSchema,
  NOT_BLANK,
  namedRecord,
  RecordKeySchema,
} from './common';
import { DomainEventOf } from './envelope';

/*
 * The durable handoff (seed 002): the lifecycle the ledger service owns.
 *
 *   pending --claim--> claimed --return--> returned --(handback accepted)--> completed
 *      ^                 |  |                  |
 *      |   lease expiry  |  |                  +--(handback rework)--> pending (retry_count + 1)
 *      +-----------------+  +--release--> released      (terminal: the claimer declined the work)
 *   pending|claimed|returned --abandon--> abandoned      (terminal: the delegator withdrew it)
 *   pending|claimed|returned --fail--> failed            (terminal; also the retry cap: see escalation)
 *   completed|released|abandoned|failed --archive--> archived
 *   pending|claimed --complete_from_result--> completed  (router only: the dispatched agent's run
 *                                                          recorded a result; no handback)
 *
 * A `completion_handback` handoff is the reviewable reply to a return. It is decided (accept |
 * rework) with `decide_handback`, never returned, and goes straight to `completed` when decided.
 */

export const HandoffStatus = {
  pending: 'pending',
  claimed: 'claimed',
  returned: 'returned',
  completed: 'completed',
  released: 'released',
  abandoned: 'abandoned',
  failed: 'failed',
  archived: 'archived',
} as const;
export type HandoffStatus = (typeof HandoffStatus)[keyof typeof HandoffStatus];
export const HandoffStatusSchema = z.enum(['pending', 'claimed', 'returned', 'completed', 'released', 'abandoned', 'failed', 'archived']);

/** The statuses from which a handoff may be archived: nothing more will happen to it. */
export const TerminalHandoffStatuses = ['completed', 'released', 'abandoned', 'failed'] as const;
export type TerminalHandoffStatus = (typeof TerminalHandoffStatuses)[number];
export const TerminalHandoffStatusSchema = z.enum(TerminalHandoffStatuses);

export const HandoffKind = { task: 'task', consult: 'consult', completionHandback: 'completion_handback' } as const;
export type HandoffKind = (typeof HandoffKind)[keyof typeof HandoffKind];
export const HandoffKindSchema = z.enum(['task', 'consult', 'completion_handback']);

export const HandoffPriority = { low: 'low', medium: 'medium', high: 'high', urgent: 'urgent' } as const;
export type HandoffPriority = (typeof HandoffPriority)[keyof typeof HandoffPriority];
export const HandoffPrioritySchema = z.enum(['low', 'medium', 'high', 'urgent']);

/**
 * Who issued a command, as the platform (never the caller's payload) determines it. `system` is
 * the ledger's own reactor (policies that turn one handoff's event into another handoff's command).
 */
export const HandoffActorKind = {
  agent: 'agent',
  operator: 'operator',
  human: 'human',
  watchdog: 'watchdog',
  system: 'system',
} as const;
export type HandoffActorKind = (typeof HandoffActorKind)[keyof typeof HandoffActorKind];
export const HandoffActorKindSchema = z.enum(['agent', 'operator', 'human', 'watchdog', 'system']);

/**
 * An actor as the handoff ledger records it: an agent name, or an operator / service principal
 * (which may hold `:` or `@`). It never holds whitespace or NATS subject separators.
 */
export const ActorNameSchema = z
  .string()
  .min(1)
  .max(Limits.maxIdLength)
  .regex(/^[A-Za-z0-9_\-.:@]+$/, 'actor names may hold letters, digits and _ - . : @ only');
export type ActorName = z.infer<typeof ActorNameSchema>;

/** What a worker says about the work it returns. */
export const CompletionOutcome = { completed: 'completed', partial: 'partial', blocked: 'blocked' } as const;
export type CompletionOutcome = (typeof CompletionOutcome)[keyof typeof CompletionOutcome];
export const CompletionOutcomeSchema = z.enum(['completed', 'partial', 'blocked']);

/** The decision on a completion handback. */
export const HandbackDecision = { accept: 'accept', rework: 'rework' } as const;
export type HandbackDecision = (typeof HandbackDecision)[keyof typeof HandbackDecision];
export const HandbackDecisionSchema = z.enum(['accept', 'rework']);

/** The version tag of the completion report (seed: `cortex.handoff_completion_report.v1`). */
export const CompletionReportSchemaId = 'baton.handoff_completion_report.v1';

/**
 * The report a worker returns with its work (seed: `completion_report`). Strict: unknown keys
 * (such as a caller-supplied `metadata` trying to switch the evidence floor off) are rejected.
 */
export const CompletionReportSchema = z.strictObject({
  schema: z.literal(CompletionReportSchemaId).optional(),
  summary: ShortTextSchema.min(1),
  files_changed: z.array(z.string().min(1).max(1000)).max(Limits.maxListItems).default([]),
  verification: ShortTextSchema.default(''),
  next_steps: ShortTextSchema.default(''),
  branch: z.string().min(1).max(255).optional(),
  outcome: CompletionOutcomeSchema,
  evidence: EvidenceSchema.default({}),
});
export type CompletionReport = z.infer<typeof CompletionReportSchema>;

/** Recorded when the evidence floor downgraded a `completed` return to `partial`. */
export const EvidenceFloorSchema = z.strictObject({
  applied: z.literal(true),
  original_outcome: z.literal('completed'),
  reason: z.literal('no_evidence'),
});
export type EvidenceFloor = z.infer<typeof EvidenceFloorSchema>;

export const RetryPolicySchema = z.strictObject({
  max_retries: z.number().int().min(0).max(20),
  retry_count: z.number().int().min(0).max(1000),
});
export type RetryPolicy = z.infer<typeof RetryPolicySchema>;

/** Who a handoff escalates to when its retry cap is hit; unset means "the project's lead". */
export const EscalationPolicySchema = z.strictObject({ to: ActorNameSchema.optional() });
export type EscalationPolicy = z.infer<typeof EscalationPolicySchema>;

/**
 * What an escalation does, as data: a consult handoff to a lead, or (no lead anywhere) a request
 * that the run stop with `why: guard_failed`. The watchdog turns the stop variant into a stop.
 */
export const EscalationOutcomeSchema = z.union([
  z.strictObject({ escalate_to: ActorNameSchema, consult_handoff_id: IdSchema }),
  z.strictObject({ stop_why: z.literal('guard_failed'), detail: ShortTextSchema }),
]);
export type EscalationOutcome = z.infer<typeof EscalationOutcomeSchema>;

/** Where a completion handback goes: the delegator, the project's lead, or the operators. */
export const HandbackRecipientSchema = z.union([
  z.strictObject({ to_agent: ActorNameSchema, reason: z.enum(['delegator', 'project_lead']) }),
  z.strictObject({ to_role: z.literal('operator'), reason: z.literal('no_eligible_reviewer') }),
]);
export type HandbackRecipient = z.infer<typeof HandbackRecipientSchema>;

/**
 * An offer the addressed agent gave up on without claiming it (its handler kept failing): who, when,
 * after how many deliveries of the offer, and why. Kept on the record as history, like `claimed_by`.
 */
export const OfferGivenUpSchema = z.strictObject({
  by: ActorNameSchema,
  at: IsoTimeSchema,
  deliveries: z.number().int().min(1),
  reason: ShortTextSchema,
});
export type OfferGivenUp = z.infer<typeof OfferGivenUpSchema>;

/**
 * The last rework of a handoff (`handoff.reworked`): who sent the work back, when, from which
 * handback, and the note saying what to change — what the worker reads on the offer of its next
 * round.
 */
export const LastReworkSchema = z.strictObject({
  by: ActorNameSchema,
  at: IsoTimeSchema,
  handback_id: IdSchema,
  note: ShortTextSchema,
});
export type LastRework = z.infer<typeof LastReworkSchema>;

const JsonObjectSchema = namedRecord(RecordKeySchema, z.unknown());
const IdempotencyKeySchema = z.string().min(1).max(200);

/**
 * The folded view of one handoff, as projections, the API and the CLI show it. Invariants that
 * hold for every state the decider can reach are checked here too.
 */
export const HandoffRecordSchema = z
  .strictObject({
    id: IdSchema,
    project: ProjectIdSchema,
    kind: HandoffKindSchema,
    priority: HandoffPrioritySchema,
    status: HandoffStatusSchema,
    from_agent: ActorNameSchema,
    to_role: ActorNameSchema.optional(),
    to_agent: ActorNameSchema.optional(),
    reply_to_handoff_id: IdSchema.optional(),
    summary: ShortTextSchema,
    context: JsonObjectSchema,
    acceptance: JsonObjectSchema,
    retry: RetryPolicySchema,
    escalation: EscalationPolicySchema,
    claimed_by: ActorNameSchema.optional(),
    claim_id: IdSchema.optional(),
    lease_expires_at: IsoTimeSchema.optional(),
    claimed_at: IsoTimeSchema.optional(),
    completed_at: IsoTimeSchema.optional(),
    terminal_reason: ShortTextSchema.optional(),
    parent_goal_id: IdSchema.optional(),
    workflow_run_id: IdSchema.optional(),
    completion_report: CompletionReportSchema.optional(),
    evidence_floor: EvidenceFloorSchema.optional(),
    /** On a returned parent: the handback under review and where it went. */
    handback_id: IdSchema.optional(),
    handback_recipient: HandbackRecipientSchema.optional(),
    /** On a completion handback: the agent whose work it reviews (it may never accept it). */
    reviewed_worker: ActorNameSchema.optional(),
    /**
     * On a completion handback: what the worker was (the kind of the principal that claimed the
     * work: `agent`, or `operator` for a person). The worker is that kind and name together, so a
     * person named like the worker agent is someone else. Absent on handbacks of work claimed
     * before it was recorded: the name alone is then the worker.
     */
    reviewed_worker_kind: HandoffActorKindSchema.optional(),
    /** Set when the retry cap escalated this handoff. */
    escalation_outcome: EscalationOutcomeSchema.optional(),
    /** The last offer its addressed agent gave up on without claiming it (`give_up_offer`), when one did. */
    offer_given_up: OfferGivenUpSchema.optional(),
    /** The last time its handback was reworked: by whom, when, and the note saying what to change (kept as history; a later rework replaces it). */
    last_rework: LastReworkSchema.optional(),
    /** On a handoff closed by `complete_from_result`: the agent result that closed it. */
    result_id: IdSchema.optional(),
    /** Past this time an open handoff fails with terminal_reason `deadline` (watchdog `expire_deadline`). */
    deadline_at: IsoTimeSchema.optional(),
    /** On a cross-project handoff: the project of the delegator (the handoff lives in the target). */
    source_project: ProjectIdSchema.optional(),
    /** On a cross-project handoff: the decision that allowed it. */
    cto_override: IdSchema.optional(),
    archived_from: TerminalHandoffStatusSchema.optional(),
    created_at: IsoTimeSchema,
    updated_at: IsoTimeSchema,
    version: z.number().int().min(1),
  })
  .superRefine((record, ctx) => {
    const need = (ok: boolean, message: string) => {
      if (!ok) ctx.addIssue({ code: 'custom', message });
    };
    need(record.retry.retry_count <= record.retry.max_retries, 'retry_count never exceeds max_retries');
    if (record.status === 'claimed') {
      need(!!record.claimed_by && !!record.claim_id && !!record.lease_expires_at && !!record.claimed_at, 'a claimed handoff has a claim and a lease');
    }
    if (record.status === 'pending') need(record.claim_id === undefined, 'a pending handoff has no live claim');
    if (record.status === 'returned') {
      need(!!record.completion_report && !!record.handback_id && !!record.handback_recipient, 'a returned handoff has a report and a handback');
      need(record.kind !== 'completion_handback', 'a completion handback is decided, never returned');
    }
    if (record.status === 'completed') need(!!record.completed_at, 'a completed handoff has completed_at');
    if (record.status === 'released' || record.status === 'abandoned' || record.status === 'failed') {
      need(!!record.terminal_reason, 'a terminal handoff says why');
    }
    if (record.status === 'archived') need(!!record.archived_from, 'an archived handoff says what it was');
    if (record.kind === 'completion_handback') {
      need(!!record.reply_to_handoff_id && !!record.reviewed_worker, 'a completion handback names its parent and the worker');
      need(record.to_agent === undefined || record.to_agent !== record.reviewed_worker, 'a handback is never addressed to its own worker');
    }
    if (record.evidence_floor) need(record.completion_report?.outcome === 'partial', 'the evidence floor leaves the outcome partial');
  });
export type HandoffRecord = z.infer<typeof HandoffRecordSchema>;

// ---------------------------------------------------------------------------------------------
// Wire commands: what a caller sends to the ledger (request/reply,
// `baton.cmd.ledger.<project>.<kind>.<name>.<cmd>`, see `ledgerCommandSubject`).
// Every command carries an idempotency key; a retried command with the same key changes nothing.
// Who the caller is (actor, actor kind) is derived by the ledger from the subject's principal
// (`resolveLedgerCaller`) and the time is the ledger's, never read from these bodies. Lookups (roster, project lead, generated ids) are added by the ledger before the
// domain decides; see `@baton/domain` handoff commands.
// ---------------------------------------------------------------------------------------------

const LeaseMsSchema = z
  .number()
  .int()
  .min(1_000)
  .max(24 * 60 * 60 * 1000);

/**
 * Create a handoff. `completion_handback` handoffs are created only by the ledger's own policy: the
 * kind is part of the wire form so that a client asking for one is told so
 * (`handback_create_forbidden`, kind `forbidden`) rather than getting a schema error.
 */
export const CreateHandoffCommandSchema = z.strictObject({
  handoff_id: IdSchema,
  project: ProjectIdSchema,
  kind: z
    .enum(['task', 'consult', 'completion_handback'])
    .default('task')
    .describe('task or consult; completion_handback is always refused handback_create_forbidden (only the ledger makes handbacks, when work is returned)'),
  priority: HandoffPrioritySchema.default('medium'),
  from_agent: ActorNameSchema,
  to_role: ActorNameSchema.optional(),
  to_agent: ActorNameSchema.optional(),
  reply_to_handoff_id: IdSchema.optional(),
  summary: ShortTextSchema.min(1),
  context: JsonObjectSchema.default({}),
  acceptance: JsonObjectSchema.default({}),
  max_retries: z.number().int().min(0).max(20).default(3),
  escalate_to: ActorNameSchema.optional(),
  parent_goal_id: IdSchema.optional(),
  workflow_run_id: IdSchema.optional(),
  /**
   * Optional deadline: past it, if the handoff is still pending or claimed, the watchdog issues
   * `expire_deadline` and the handoff fails with terminal_reason `deadline`
   * (`handoff.deadline_expired`). A returnable handoff's run resumes its parent per ON_FAILURE.
   */
  deadline_at: IsoTimeSchema.optional(),
  /**
   * Cross-project handoff (seed 002 `--target-project <p> --cto-override <decision-uuid>`): sent
   * to the SOURCE project's subject (`project` = source); the delegator is checked against the
   * source roster, the addressee (`to_agent`) against the target's; the handoff lives in the
   * target project. No agent is ever registered in the other project.
   */
  target_project: ProjectIdSchema.optional(),
  /** The decision id that allows a cross-project handoff; required with `target_project`. */
  cto_override: IdSchema.optional(),
  idempotency_key: IdempotencyKeySchema,
});
export type CreateHandoffCommand = z.infer<typeof CreateHandoffCommandSchema>;

/** Claim a pending handoff. The lease defaults to the ledger's configured lease when omitted. */
export const ClaimHandoffCommandSchema = z.strictObject({
  handoff_id: IdSchema,
  lease_ms: LeaseMsSchema.optional(),
  idempotency_key: IdempotencyKeySchema,
});
export type ClaimHandoffCommand = z.infer<typeof ClaimHandoffCommandSchema>;

/** Extend the lease of a claim the caller holds. */
export const HeartbeatHandoffCommandSchema = z.strictObject({
  handoff_id: IdSchema,
  claim_id: IdSchema,
  lease_ms: LeaseMsSchema.optional(),
  idempotency_key: IdempotencyKeySchema,
});
export type HeartbeatHandoffCommand = z.infer<typeof HeartbeatHandoffCommandSchema>;

/** Return claimed work with a completion report (seed: `POST /handoffs/{id}/return`). */
export const ReturnHandoffCommandSchema = z.strictObject({
  handoff_id: IdSchema,
  /** Required from agents; operators returning on a worker's behalf may omit it. */
  claim_id: IdSchema.optional(),
  report: CompletionReportSchema,
  idempotency_key: IdempotencyKeySchema,
});
export type ReturnHandoffCommand = z.infer<typeof ReturnHandoffCommandSchema>;

/** Decide a completion handback: accept (parent completed) or rework with a note (parent pending). */
export const DecideHandbackCommandSchema = z.discriminatedUnion('decision', [
  z.strictObject({
    handoff_id: IdSchema,
    decision: z.literal('accept'),
    note: ShortTextSchema.optional(),
    idempotency_key: IdempotencyKeySchema,
  }),
  z.strictObject({
    handoff_id: IdSchema,
    decision: z.literal('rework'),
    // One message whether the note is missing or blank (the operator API says the same).
    note: z
      .string({ error: 'a rework says what to change: write a note' })
      .max(Limits.maxShortText)
      .trim()
      .regex(NOT_BLANK, 'a rework says what to change: write a note'),
    idempotency_key: IdempotencyKeySchema,
  }),
]);
export type DecideHandbackCommand = z.infer<typeof DecideHandbackCommandSchema>;

/** The claimer declines the work; the handoff ends `released` and its delegator decides what next. */
export const ReleaseHandoffCommandSchema = z.strictObject({
  handoff_id: IdSchema,
  claim_id: IdSchema.optional(),
  reason: NonBlankShortTextSchema,
  idempotency_key: IdempotencyKeySchema,
});
export type ReleaseHandoffCommand = z.infer<typeof ReleaseHandoffCommandSchema>;

/** The delegator (or an operator) withdraws a handoff that is not finished. */
export const AbandonHandoffCommandSchema = z.strictObject({
  handoff_id: IdSchema,
  reason: NonBlankShortTextSchema,
  idempotency_key: IdempotencyKeySchema,
  /**
   * The project the handoff lives in, when it is not the subject's: the delegator of a
   * cross-project handoff withdraws it from its own project's subject by naming the target
   * (only a handoff it delegated from that project; any other id there is `not_found`).
   */
  target_project: ProjectIdSchema.optional().describe(
    "the project a cross-project handoff lives in, sent by its delegator from the source project's subject; any handoff there that this project's agent did not delegate is not_found",
  ),
});
export type AbandonHandoffCommand = z.infer<typeof AbandonHandoffCommandSchema>;

/** The work failed: by the claimer (with its claim id), or by an operator or the watchdog. */
export const FailHandoffCommandSchema = z.strictObject({
  handoff_id: IdSchema,
  claim_id: IdSchema.optional(),
  reason: NonBlankShortTextSchema,
  idempotency_key: IdempotencyKeySchema,
});
export type FailHandoffCommand = z.infer<typeof FailHandoffCommandSchema>;

/** Archive a handoff in a terminal status (completed, released, abandoned, failed). */
export const ArchiveHandoffCommandSchema = z.strictObject({
  handoff_id: IdSchema,
  idempotency_key: IdempotencyKeySchema,
});
export type ArchiveHandoffCommand = z.infer<typeof ArchiveHandoffCommandSchema>;

/** Issued by the watchdog: the lease of `claim_id` has expired; requeue (or escalate) once. */
export const RequeueExpiredCommandSchema = z.strictObject({
  handoff_id: IdSchema,
  claim_id: IdSchema,
  idempotency_key: IdempotencyKeySchema,
});
export type RequeueExpiredCommand = z.infer<typeof RequeueExpiredCommandSchema>;

/**
 * Issued by the router only (actor kind `system`): a workflow run recorded an agent result for the
 * handoff that dispatched that agent, so the handoff closes with that result (pending | claimed →
 * completed) without a handback. This is how a router-dispatched handoff finishes: the run, not a
 * reviewer, owns the follow-up. The evidence floor applies exactly as on returns. The router
 * derives `idempotency_key` from `result_id`, so a redelivered result closes the handoff once.
 */
export const CompleteFromResultCommandSchema = z.strictObject({
  handoff_id: IdSchema,
  /** The agent result (`AgentResult.result_id`) that closes the handoff. */
  result_id: IdSchema,
  /** The agent that produced the result. */
  agent: ActorNameSchema,
  workflow_run_id: IdSchema.optional(),
  /**
   * The claim the result was accepted under. When the watchdog requeued that very claim after the
   * result was decided (the lapse landed first), the completion voids the lapse (rule 4a).
   */
  claim_id: IdSchema.optional(),
  /** What the result says it did (the ledger writes a default when it is omitted). */
  summary: NonBlankShortTextSchema.optional(),
  evidence: EvidenceSchema.default({}),
  idempotency_key: IdempotencyKeySchema,
});
export type CompleteFromResultCommand = z.infer<typeof CompleteFromResultCommandSchema>;

/**
 * Issued by the watchdog: the handoff's `deadline_at` has passed. A pending or claimed handoff fails
 * with terminal_reason `deadline` (`handoff.deadline_expired`) exactly once; refused with
 * `deadline_not_reached` before the deadline and `handoff_not_open` once it is returned or ended.
 */
export const ExpireDeadlineCommandSchema = z.strictObject({
  handoff_id: IdSchema,
  idempotency_key: IdempotencyKeySchema,
});
export type ExpireDeadlineCommand = z.infer<typeof ExpireDeadlineCommandSchema>;

/**
 * Issued by the addressed agent (`to_agent`) that gave up on an offer without claiming it: its
 * handler kept failing, and the offer was terminated after `deliveries` deliveries (the SDK sends it
 * when it terminates an offer it never claimed). The handoff stays with the ledger and is not left
 * silently pending: the give-up counts against the retry cap like a lapsed lease (`retry_count + 1`)
 * and the handoff is offered again, or — past the cap — escalated (cause `offer_given_up`: a consult
 * to the lead, else a `guard_failed` stop of its run; an operator inbox item either way). A completion
 * handback is not offered again (its operator inbox item says its reviewer gave up). Refused
 * `handoff_not_pending` once claimed or ended, `not_the_addressee` from any other agent, and
 * `stale_offer` when `offered_version` is not the handoff's current version (an offer of an earlier
 * round, given up on after the handoff moved on). Idempotent by key.
 */
export const GiveUpOfferCommandSchema = z.strictObject({
  handoff_id: IdSchema,
  /**
   * The `version` of the HandoffRecord the offer carried. When given, a give-up of an offer the
   * handoff has moved past (a later give-up, a lapse, a rework) is refused `stale_offer`, so one
   * round's duplicate offers (a resume's re-offer beside the first) count once.
   */
  offered_version: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe('the version of the HandoffRecord the offer carried; when given, a give-up of an offer the handoff has moved past since is refused stale_offer'),
  /** How many times the offer was delivered before the agent gave up. */
  deliveries: z.number().int().min(1).max(1000),
  /** Why: the handler's last error, in a line. */
  reason: NonBlankShortTextSchema,
  idempotency_key: IdempotencyKeySchema,
});
export type GiveUpOfferCommand = z.infer<typeof GiveUpOfferCommandSchema>;

/** The ledger's wire commands by name (the last token of the command subject). */
export const HandoffCommandSchemas = {
  create: CreateHandoffCommandSchema,
  claim: ClaimHandoffCommandSchema,
  heartbeat: HeartbeatHandoffCommandSchema,
  return: ReturnHandoffCommandSchema,
  decide_handback: DecideHandbackCommandSchema,
  release: ReleaseHandoffCommandSchema,
  abandon: AbandonHandoffCommandSchema,
  fail: FailHandoffCommandSchema,
  archive: ArchiveHandoffCommandSchema,
  requeue_expired: RequeueExpiredCommandSchema,
  complete_from_result: CompleteFromResultCommandSchema,
  expire_deadline: ExpireDeadlineCommandSchema,
  give_up_offer: GiveUpOfferCommandSchema,
} as const;
export type HandoffCommandName = keyof typeof HandoffCommandSchemas;

/** What the platform attaches to every command before the domain sees it. */
export const HandoffCommandMetadataSchema = z.strictObject({
  now: IsoTimeSchema,
  actor: ActorNameSchema,
  actorKind: HandoffActorKindSchema,
  /** The digest of the body an outside caller sent (`command_digest` on the events it causes). */
  digest: CommandDigestSchema.optional(),
  /**
   * The caller's project, set only when it is not the project the handoff lives in: the delegator
   * of a cross-project handoff acting from its source project. Names match only within a project,
   * so such a caller is the delegator only of handoffs that project delegated.
   */
  actorProject: ProjectIdSchema.optional(),
});
export type HandoffCommandMetadata = z.infer<typeof HandoffCommandMetadataSchema>;

// ---------------------------------------------------------------------------------------------
// Events. Every payload names its handoff, the time it happened (`at`) and the idempotency key of
// the command that caused it (so a replayed command is recognised after a restart).
// ---------------------------------------------------------------------------------------------

const EventBase = {
  handoff_id: IdSchema,
  at: IsoTimeSchema,
  idempotency_key: IdempotencyKeySchema,
  command_digest: CommandDigestSchema.optional(),
};

export const HandoffCreatedSchema = z.strictObject({
  ...EventBase,
  project: ProjectIdSchema,
  kind: HandoffKindSchema,
  priority: HandoffPrioritySchema,
  from_agent: ActorNameSchema,
  to_role: ActorNameSchema.optional(),
  to_agent: ActorNameSchema.optional(),
  reply_to_handoff_id: IdSchema.optional(),
  reviewed_worker: ActorNameSchema.optional(),
  /**
   * On a completion handback: the kind of the principal that claimed the reviewed work (from its
   * connection, `handoff.returned`'s `worker_kind`). Absent on handbacks created before it was
   * recorded, and of work whose claim did not record it: the worker is then matched by name alone.
   */
  reviewed_worker_kind: HandoffActorKindSchema.optional(),
  summary: ShortTextSchema,
  context: JsonObjectSchema,
  acceptance: JsonObjectSchema,
  max_retries: z.number().int().min(0).max(20),
  escalate_to: ActorNameSchema.optional(),
  parent_goal_id: IdSchema.optional(),
  workflow_run_id: IdSchema.optional(),
  deadline_at: IsoTimeSchema.optional(),
  source_project: ProjectIdSchema.optional(),
  cto_override: IdSchema.optional(),
  /**
   * Who created it, when that is not the agent named in `from_agent` (an agent only ever creates
   * as itself): the router, the ledger's own policies, an operator. Absent on an agent's create
   * and on events stored before it was recorded. Scopes the create's idempotency key.
   */
  created_by: ActorNameSchema.optional(),
  created_by_kind: HandoffActorKindSchema.optional(),
});

export const HandoffClaimedSchema = z.strictObject({
  ...EventBase,
  claimed_by: ActorNameSchema,
  /**
   * The kind of the principal that claimed it, from its connection (`agent`, or `operator` for a
   * person through the notifier or the admin): the worker is this kind and `claimed_by` together.
   * Absent on claims stored before it was recorded.
   */
  claimed_by_kind: HandoffActorKindSchema.optional(),
  claim_id: IdSchema,
  lease_expires_at: IsoTimeSchema,
});

export const HandoffHeartbeatSchema = z.strictObject({
  ...EventBase,
  claim_id: IdSchema,
  lease_expires_at: IsoTimeSchema,
});

export const HandoffReturnedSchema = z.strictObject({
  ...EventBase,
  claim_id: IdSchema,
  returned_by: ActorNameSchema,
  /** The claimer that did the work (differs from returned_by when an operator returns for it). */
  worker: ActorNameSchema,
  /**
   * What the worker is: the claim's `claimed_by_kind` (the principal that claimed the work, never a
   * body). Its completion handback records it as `reviewed_worker_kind`. Absent when the claim did
   * not record it (claimed before it was).
   */
  worker_kind: HandoffActorKindSchema.optional(),
  /** The report as recorded: outcome `partial` when the evidence floor applied. */
  report: CompletionReportSchema,
  evidence_floor: EvidenceFloorSchema.optional(),
  handback_id: IdSchema,
  handback_recipient: HandbackRecipientSchema,
});

export const HandoffHandbackDecidedSchema = z.strictObject({
  ...EventBase,
  parent_handoff_id: IdSchema,
  decision: HandbackDecisionSchema,
  note: ShortTextSchema.optional(),
  decided_by: ActorNameSchema,
  decided_by_kind: HandoffActorKindSchema,
});

export const HandoffCompletedSchema = z.strictObject({
  ...EventBase,
  handback_id: IdSchema,
  accepted_by: ActorNameSchema,
});

export const HandoffReworkedSchema = z.strictObject({
  ...EventBase,
  handback_id: IdSchema,
  note: ShortTextSchema,
  reworked_by: ActorNameSchema,
  retry_count: z.number().int().min(0),
});

export const HandoffReleasedSchema = z.strictObject({
  ...EventBase,
  claim_id: IdSchema,
  released_by: ActorNameSchema,
  reason: ShortTextSchema,
});

export const HandoffLeaseExpiredSchema = z.strictObject({
  ...EventBase,
  claim_id: IdSchema,
  expired_claimer: ActorNameSchema,
  lease_expires_at: IsoTimeSchema,
  retry_count: z.number().int().min(0),
});

export const HandoffEscalatedSchema = z.strictObject({
  ...EventBase,
  /** What the retry that would have passed the cap was: a lapsed lease, a rework, or an offer its agent gave up on. */
  cause: z.enum(['lease_expired', 'rework', 'offer_given_up']),
  /** The attempt that would have exceeded the cap. */
  attempted_retry: z.number().int().min(1),
  max_retries: z.number().int().min(0),
  outcome: EscalationOutcomeSchema,
  claim_id: IdSchema.optional(),
  handback_id: IdSchema.optional(),
  note: ShortTextSchema.optional(),
  /** Cause `offer_given_up`: the agent that gave up on the offer, after how many deliveries, and why (also in `note`). */
  given_up: z.strictObject({ by: ActorNameSchema, deliveries: z.number().int().min(1), reason: ShortTextSchema }).optional(),
});

/**
 * A pending handoff's addressed agent gave up on its offer without claiming it (`give_up_offer`).
 * The handoff stays pending with `retry_count` (one more than before; unchanged on a completion
 * handback, which has no retry cap) and is offered again — a completion handback is not: its
 * operator inbox item says its reviewer gave up.
 */
export const HandoffOfferGivenUpSchema = z.strictObject({
  ...EventBase,
  given_up_by: ActorNameSchema,
  deliveries: z.number().int().min(1),
  reason: ShortTextSchema,
  retry_count: z.number().int().min(0),
});

/**
 * A pending or claimed handoff closed by an agent result its workflow run recorded (router,
 * `complete_from_result`). `report` is built from the result; outcome `partial` and
 * `evidence_floor` when the result showed no real evidence.
 */
export const HandoffCompletedByResultSchema = z.strictObject({
  ...EventBase,
  result_id: IdSchema,
  agent: ActorNameSchema,
  workflow_run_id: IdSchema.optional(),
  recorded_by: ActorNameSchema,
  report: CompletionReportSchema,
  evidence_floor: EvidenceFloorSchema.optional(),
  /**
   * The lapse this completion voids: the result was accepted under `claim_id` before the watchdog's
   * requeue of that claim landed, so the requeue counts for nothing (`retry_count` is the count
   * before it, restored; docs/handoffs.md rule 4a).
   */
  lapse_voided: z
    .strictObject({
      claim_id: IdSchema,
      claimer: ActorNameSchema,
      retry_count: z.number().int().min(0),
    })
    .optional(),
});

export const HandoffAbandonedSchema = z.strictObject({
  ...EventBase,
  abandoned_by: ActorNameSchema,
  /** The project `abandoned_by` belongs to, when not the handoff's: a cross-project handoff withdrawn by its delegator. */
  abandoned_by_project: ProjectIdSchema.optional(),
  reason: ShortTextSchema,
});

export const HandoffFailedSchema = z.strictObject({
  ...EventBase,
  failed_by: ActorNameSchema,
  reason: ShortTextSchema,
  /**
   * `offer_given_up`: a returnable child's agent gave up on its offer before claiming it
   * (`give_up_offer`): it failed before the child accepted it, so its run's ON_FAILURE applies at
   * once (seed 001), with no retry round. Absent for a `fail`.
   */
  cause: z.literal('offer_given_up').optional(),
  /** Cause `offer_given_up`: how many times the offer was delivered before its agent gave up. */
  deliveries: z.number().int().min(1).optional(),
});

export const HandoffArchivedSchema = z.strictObject({
  ...EventBase,
  archived_by: ActorNameSchema,
  archived_from: TerminalHandoffStatusSchema,
});

/** A pending or claimed handoff passed its deadline: it is failed (terminal_reason `deadline`). */
export const HandoffDeadlineExpiredSchema = z.strictObject({
  ...EventBase,
  deadline_at: IsoTimeSchema,
  expired_by: ActorNameSchema,
  /** The claimer at expiry, when it was claimed. */
  claimed_by: ActorNameSchema.optional(),
});

/**
 * The review of a returned handoff was reopened: its handback ended without a decision (released,
 * abandoned, failed, escalated after a lapsed lease), so the ledger opened a fresh one for the same
 * report and recipient. The parent stays `returned`; `handback_id` is the new handback, the one the
 * parent's accept / rework is now checked against.
 */
export const HandoffReviewReopenedSchema = z.strictObject({
  ...EventBase,
  previous_handback_id: IdSchema,
  /** How the previous handback ended: the type of its terminal event, without `handoff.`. */
  ended: z.enum(['released', 'abandoned', 'failed', 'escalated', 'deadline_expired']),
  handback_id: IdSchema,
  /** The worker whose work the review is of (never its reviewer). */
  worker: ActorNameSchema,
  /** The worker's kind, as the ended handback recorded it (`reviewed_worker_kind`); absent when it did not. */
  worker_kind: HandoffActorKindSchema.optional(),
  handback_recipient: HandbackRecipientSchema,
});

/** Every handoff event type and the schema of its payload (register with `registerAll('handoff', ...)`). */
export const HandoffEventSchemas = {
  'handoff.created': HandoffCreatedSchema,
  'handoff.claimed': HandoffClaimedSchema,
  'handoff.heartbeat': HandoffHeartbeatSchema,
  'handoff.returned': HandoffReturnedSchema,
  'handoff.handback_decided': HandoffHandbackDecidedSchema,
  'handoff.completed': HandoffCompletedSchema,
  'handoff.completed_by_result': HandoffCompletedByResultSchema,
  'handoff.reworked': HandoffReworkedSchema,
  'handoff.released': HandoffReleasedSchema,
  'handoff.lease_expired': HandoffLeaseExpiredSchema,
  'handoff.escalated': HandoffEscalatedSchema,
  'handoff.abandoned': HandoffAbandonedSchema,
  'handoff.failed': HandoffFailedSchema,
  'handoff.archived': HandoffArchivedSchema,
  'handoff.deadline_expired': HandoffDeadlineExpiredSchema,
  'handoff.review_reopened': HandoffReviewReopenedSchema,
  'handoff.offer_given_up': HandoffOfferGivenUpSchema,
} as const;
export type HandoffEventType = keyof typeof HandoffEventSchemas;
export type HandoffEvent = DomainEventOf<typeof HandoffEventSchemas>;
/** The payload of one handoff event type. */
export type HandoffEventData<T extends HandoffEventType> = Extract<HandoffEvent, { type: T }>['data'];
