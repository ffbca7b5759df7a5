import { z } from 'zod';
import { CommandDigestSchema, IdSchema, IsoTimeSchema, Limits, NOT_BLANK, ProjectIdSchema, ShortTextSchema } from './common';
import { DomainEventOf } from './envelope';
import { OperatorRoleSchema } from './principal';

/*
 * Governance (seed 002 "designed" parts, seed 003 stop reasons): the project kill switch, per-agent
 * rate caps and the loop guards' vocabulary.
 *
 * The kill switch is the project-control aggregate (kind `project`, id `control`, one per project;
 * written by the ledger only). `pause` / `resume` are request/reply commands on
 * `<prefix>.cmd.ledger.<project>.op.admin.pause|resume` (the admin CLI) or
 * `<prefix>.cmd.ledger.<project>.op.notifier.pause|resume` (the notifier, for a token whose role is
 * admin); see `LedgerCommandAccess`. While a project is paused the ledger refuses claims
 * (`project_paused`) and holds offers; `project.resumed` re-offers every pending handoff.
 */

/** The one instance id of a project's control aggregate. */
export const ProjectControlId = 'control';

/**
 * Who may pause or resume a project: the role the ledger derived for the caller from the subject
 * (`resolveLedgerCaller`: `op.admin` is admin, `op.notifier` relays its token's role). Only `admin` may.
 */
export const ProjectControlRoleSchema = z.enum(['admin', 'operator', 'viewer', 'agent']);
export type ProjectControlRole = z.infer<typeof ProjectControlRoleSchema>;

const ControlActorSchema = z
  .string()
  .min(1)
  .max(Limits.maxIdLength)
  .regex(/^[A-Za-z0-9_\-.:@]+$/, 'actor names may hold letters, digits and _ - . : @ only');

/**
 * `actor` / `actor_role` in a pause or resume body name the operator an operator relay speaks for
 * (`op.notifier`: both required, the person is the actor; `op.admin`: optional, role `admin` only,
 * the person is recorded as `on_behalf_of` and the actor is `admin`). They are checked against the
 * subject's principal before this body is parsed; see `resolveLedgerCaller`.
 */
const ControlClaims = {
  actor: ControlActorSchema.optional(),
  actor_role: OperatorRoleSchema.optional(),
};

/** Body of `<prefix>.cmd.ledger.<project>.op.<relay>.pause`: stop dispatch in the project (admin only). */
export const PauseProjectRequestSchema = z.strictObject({
  ...ControlClaims,
  reason: ShortTextSchema.trim().regex(NOT_BLANK, 'a pause says why'),
  idempotency_key: z.string().min(1).max(200),
  /**
   * Pause a project that has no published definition (a pause made before the project is set
   * up). Without it such a pause is refused `project_unknown`, so a misspelt project key is never
   * reported paused.
   */
  force: z.boolean().optional().describe('pause even though the project has no published definition (else project_unknown)'),
});
export type PauseProjectRequest = z.infer<typeof PauseProjectRequestSchema>;

/** Body of `<prefix>.cmd.ledger.<project>.op.<relay>.resume`: dispatch again; pending handoffs are re-offered. */
export const ResumeProjectRequestSchema = z.strictObject({
  ...ControlClaims,
  reason: ShortTextSchema.optional(),
  idempotency_key: z.string().min(1).max(200),
});
export type ResumeProjectRequest = z.infer<typeof ResumeProjectRequestSchema>;

/** The project-control commands the ledger serves (subject token → body schema). */
export const ProjectControlCommandSchemas = {
  pause: PauseProjectRequestSchema,
  resume: ResumeProjectRequestSchema,
} as const;
export type ProjectControlCommandName = keyof typeof ProjectControlCommandSchemas;

/** True when `token` names a project-control command (`pause` | `resume`). */
export function isProjectControlCommandName(token: string): token is ProjectControlCommandName {
  return Object.prototype.hasOwnProperty.call(ProjectControlCommandSchemas, token);
}

export const ProjectStatusSchema = z.enum(['active', 'paused']);
export type ProjectStatus = z.infer<typeof ProjectStatusSchema>;

/** The folded view of a project's control aggregate, as replies and the CLI show it. */
export const ProjectControlRecordSchema = z.strictObject({
  project: ProjectIdSchema,
  status: ProjectStatusSchema,
  pause_id: IdSchema.optional(),
  paused_by: ControlActorSchema.optional(),
  paused_at: IsoTimeSchema.optional(),
  reason: ShortTextSchema.optional(),
  /**
   * The person the admin connection said it paused for (`on_behalf_of` of the pause): a claim,
   * shown beside `paused_by` (`admin`, who sent it), never as it.
   */
  on_behalf_of: ControlActorSchema.optional().describe(
    'the person the admin connection (paused_by: admin) said it paused for: a claim it made (BATON_OPERATOR), not an identity Baton checked',
  ),
  version: z.number().int().min(0),
});
export type ProjectControlRecord = z.infer<typeof ProjectControlRecordSchema>;

/** What a project's published definition holds, in short (the newest `definition.published`). */
export const ProjectDefinitionSummarySchema = z.strictObject({
  published_at: IsoTimeSchema,
  /** Who published it: the admin connection (`admin`); on publishes stored before `on_behalf_of`, the person it named. */
  published_by: z.string().min(1).max(200),
  /** The person the admin connection said it published for (`Baton-Actor`): a claim, shown beside `published_by`, never as it. */
  on_behalf_of: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe('the person the admin connection said it published for: a claim it made (BATON_OPERATOR), not an identity Baton checked'),
  /** How many definitions were published (the newest is in force). */
  publishes: z.number().int().min(1),
  lead: z.string().min(1).max(Limits.maxIdLength).nullable(),
  agents: z.array(z.string().min(1).max(Limits.maxIdLength)),
  /** Workflow names, each once (a workflow may have several versions): the definition in force's. */
  workflows: z.array(z.string().min(1).max(Limits.maxIdLength)),
  meshes: z.array(z.string().min(1).max(Limits.maxIdLength)),
  accepts_handoffs_from: z.array(z.string().min(1).max(Limits.maxIdLength)),
  /**
   * Each workflow with its versions: those of `workflows` first, in its order, then any that only
   * earlier publishes held. Absent from summaries made before it was added (`workflows` is unchanged).
   */
  workflow_versions: z
    .array(
      z.strictObject({
        name: z.string().min(1).max(Limits.maxIdLength),
        /**
         * Every version of it ever published, ascending: a run in flight may be pinned to any, and
         * a new run may name any (`workflow_version`).
         */
        versions: z.array(z.number().int().min(1)).min(1),
        /**
         * The versions the definition in force holds, ascending (empty: it no longer holds the
         * workflow). A new run that names no version starts on the highest.
         */
        in_force: z.array(z.number().int().min(1)),
      }),
    )
    .optional(),
});
export type ProjectDefinitionSummary = z.infer<typeof ProjectDefinitionSummarySchema>;

/**
 * A project as Baton holds it, read from its definition and control aggregates: the definition in
 * force (null when none was published) and the kill switch (`active` when never paused, version 0).
 * `GET /v1/projects/{project}` and `baton project --json` answer it.
 */
export const ProjectSummarySchema = z.strictObject({
  project: ProjectIdSchema,
  definition: ProjectDefinitionSummarySchema.nullable(),
  control: ProjectControlRecordSchema,
});
export type ProjectSummary = z.infer<typeof ProjectSummarySchema>;

/** The reply to `pause` / `resume`. `events` is 0 when the request was already applied. */
export const ProjectControlReplySchema = z.discriminatedUnion('ok', [
  z.strictObject({
    ok: z.literal(true),
    project: ProjectControlRecordSchema,
    events: z.number().int().min(0).describe('how many events this request stored: 0 for a retry (the first request stored them)'),
  }),
  z.strictObject({
    ok: z.literal(false),
    error: z.object({ code: z.string().min(1), kind: z.string().min(1), message: z.string(), details: z.record(z.string(), z.unknown()).optional() }),
  }),
]);
export type ProjectControlReply = z.infer<typeof ProjectControlReplySchema>;

const ControlEventBase = {
  project: ProjectIdSchema,
  at: IsoTimeSchema,
  idempotency_key: z.string().min(1).max(200),
  /** The digest of the admin's request body (`CommandDigestSchema`); absent on events stored before it. */
  command_digest: CommandDigestSchema.optional(),
  /**
   * The person the admin connection said it acted for (the body's `actor` on `op.admin`: the CLI's
   * `BATON_OPERATOR`): a claim, recorded beside the actor (`paused_by` / `resumed_by` and the
   * envelope's `actor`, then `admin`), never as it. Absent when nobody was named, on the notifier's
   * requests (their actor is the token's person) and on events stored before it (whose actor is
   * the named person, as the admin connection then recorded it).
   */
  on_behalf_of: ControlActorSchema.optional().describe(
    'the person the admin connection said it acted for (a claim, not checked); the actor that sent it is paused_by / resumed_by',
  ),
};

export const ProjectPausedSchema = z.strictObject({
  ...ControlEventBase,
  /** Deterministic id of this pause (derived from the request's idempotency key). */
  pause_id: IdSchema,
  paused_by: ControlActorSchema,
  reason: ShortTextSchema,
});

export const ProjectResumedSchema = z.strictObject({
  ...ControlEventBase,
  /** The pause this resume ends. */
  pause_id: IdSchema,
  resumed_by: ControlActorSchema,
  reason: ShortTextSchema.optional(),
});

/** Events of the project-control aggregate (register with `registerAll('project', ...)`). */
export const ProjectControlEventSchemas = {
  'project.paused': ProjectPausedSchema,
  'project.resumed': ProjectResumedSchema,
} as const;
export type ProjectControlEvent = DomainEventOf<typeof ProjectControlEventSchemas>;

/**
 * Codes of the governance refusals the ledger answers with. `rate_limited` and `project_paused`
 * come with `kind: 'unavailable'`: on `rate_limited` retry after `details.retry_after_ms` (the SDK
 * naks the offer with that delay); on `project_paused` let the offer go (the SDK acknowledges it):
 * the resume offers every pending handoff again.
 */
export const GovernanceErrorCode = {
  rateLimited: 'rate_limited',
  projectPaused: 'project_paused',
  adminOnly: 'admin_only',
  projectAlreadyPaused: 'project_already_paused',
  projectNotPaused: 'project_not_paused',
  /** `pause` of a project with no published definition, without `force` (kind `not_found`). */
  projectUnknown: 'project_unknown',
  /** Cross-project create without a `cto_override` decision id. */
  ctoOverrideRequired: 'cto_override_required',
  /** Cross-project create: the delegator is not on the source project's roster. */
  delegatorNotInSourceRoster: 'delegator_not_in_source_roster',
  /** Cross-project create: the addressee is not on the target project's roster. */
  addresseeNotInTargetRoster: 'addressee_not_in_target_roster',
} as const;
export type GovernanceErrorCode = (typeof GovernanceErrorCode)[keyof typeof GovernanceErrorCode];

/** The loop guards the watchdog runs. Each leaves the loop as a stop packet. */
export const LoopGuard = { hopBudget: 'hop_budget', pingPong: 'ping_pong', circuit: 'circuit' } as const;
export type LoopGuard = (typeof LoopGuard)[keyof typeof LoopGuard];
export const LoopGuardSchema = z.enum(['hop_budget', 'ping_pong', 'circuit']);

/** The `cause` of a stop request a loop guard issued (see `StopRunRequestSchema`). */
export const LoopGuardCauseSchema = z.strictObject({
  kind: z.literal('loop_guard'),
  guard: LoopGuardSchema,
  /** The event that tripped the guard (its id; the packet id derives from it). */
  event_id: IdSchema,
  /** The agent whose circuit is open (circuit only). */
  agent: z.string().min(1).max(Limits.maxIdLength).optional(),
});
export type LoopGuardCause = z.infer<typeof LoopGuardCauseSchema>;
