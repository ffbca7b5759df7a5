import { z } from 'zod';
import { AgentNameSchema, IdSchema, Limits, ProjectIdSchema, ShortTextSchema } from './common';
import { PersonHandleSchema } from './notice';
import { RejectionCodeSchema } from './rejection';
import { RunAnswerSchema, VariablesSchema } from './run';
import { StopWhySchema } from './stop-packet';
import { LoopGuardCauseSchema } from './governance';
import { StopCapSchema } from './agent-result';
import { ActorNameSchema } from './handoff';

/**
 * What callers send to the router (the CLI, the notifier's operator API, demos). These are inputs,
 * not events: the router validates them, turns them into run / definition commands and records
 * the outcome on the aggregates it owns.
 *
 * Subjects (see `Subjects` for the builders):
 * - `<prefix>.in.<project>.start` (JetStream publish into the inbox): {@link StartRunRequest};
 * - `<prefix>.in.<project>.answer` (JetStream publish into the inbox): {@link RunAnswerRequest};
 * - `<prefix>.cmd.router.<project>.publish_definition` (core NATS request/reply): a
 *   `ProjectDefinition` as JSON; the reply is a {@link PublishDefinitionReply}.
 */

/**
 * Start a workflow run. `workflow_run_id` is the caller's id and the run aggregate's id, so
 * publishing the same start twice starts one run. `workflow_version` pins a version (default: the
 * highest version in the project's current definition). At least one of started_by /
 * issue_author / trigger_author is required: every stop for a human notifies one of them.
 * `input` (the issue text, a prompt) and `variables` become the run's session variables
 * (`input` under the key `input`).
 */
export const StartRunRequestSchema = z
  .strictObject({
    workflow_run_id: IdSchema,
    project: ProjectIdSchema,
    workflow: AgentNameSchema,
    workflow_version: z.number().int().min(1).optional(),
    started_by: PersonHandleSchema.optional(),
    issue_author: PersonHandleSchema.optional(),
    trigger_author: PersonHandleSchema.optional(),
    input: z.string().max(Limits.maxBodyChars).optional(),
    variables: VariablesSchema.optional(),
  })
  .superRefine((request, ctx) => {
    if (request.started_by === undefined && request.issue_author === undefined && request.trigger_author === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['started_by'],
        message: 'a run needs started_by, issue_author or trigger_author: every stop for a human notifies one of them',
        params: { code: 'no_notice_recipient' },
      });
    }
  })
  .meta({ anyOf: [{ required: ['started_by'] }, { required: ['issue_author'] }, { required: ['trigger_author'] }] });
export type StartRunRequest = z.infer<typeof StartRunRequestSchema>;

/**
 * The role of the person answering, as the publisher authenticated it (the notifier publishes an
 * answer only after authenticating the operator). Only `operator` and `admin` may resume a run;
 * an answer from any other role is refused and the refusal is recorded on the run.
 */
export const AnswerActorRoleSchema = z.enum(['operator', 'admin', 'viewer', 'agent']);
export type AnswerActorRole = z.infer<typeof AnswerActorRoleSchema>;

/**
 * An operator's answer to a held or stopped run: the `resume` command's `RunAnswer` (a
 * `hold_answer` or a `stop_answer`) plus the run it is for and the answering role. `answer_id`
 * (inside `answer.answer`) is the idempotency key: the same answer applied twice changes nothing.
 */
export const RunAnswerRequestSchema = z.strictObject({
  workflow_run_id: IdSchema,
  project: ProjectIdSchema,
  actor_role: AnswerActorRoleSchema,
  answer: RunAnswerSchema,
});
export type RunAnswerRequest = z.infer<typeof RunAnswerRequestSchema>;

/** The refusal a router request/reply answers with (same shape as the ledger's). */
export const RouterReplyErrorSchema = z.strictObject({
  code: z.union([RejectionCodeSchema, z.string().min(1).max(80)]),
  /** `internal`: the router failed on the request (`internal_error`, logged). */
  kind: z.enum(['rejection', 'wrong_state', 'invalid', 'forbidden', 'not_found', 'internal']),
  message: z.string(),
  /** Each offending field; `code` when the check has a stable code of its own (MESH_SELF_HANDOFF…). */
  issues: z.array(z.object({ path: z.string(), message: z.string(), code: z.string().optional() })).default([]),
  /** What a client needs to act on the refusal (`workflow_version_changed`: `workflow`, `version`). */
  details: z.record(z.string(), z.unknown()).optional(),
});
export type RouterReplyError = z.infer<typeof RouterReplyErrorSchema>;

/**
 * The header with which the admin connection (the one principal that may send `publish_definition`)
 * names the person publishing — `baton publish-definition` sends `BATON_OPERATOR` (else `$USER`),
 * as the admin's ledger commands carry `actor`. Without it the router records `admin`; a value that
 * is not an actor name (letters, digits, `_ - . : @`, at most 128) is refused `schema_violation`. The
 * header's name is exact (`Baton-Actor`; NATS header names are case-sensitive).
 */
export const PUBLISHED_BY_HEADER = 'Baton-Actor';

/**
 * The reply to `publish_definition`. `version` is the stream sequence of the definition now in
 * force; `changed` is false when the same definition (same digest) was already current, in which
 * case nothing was appended and `version` is the existing one.
 */
export const PublishDefinitionReplySchema = z.discriminatedUnion('ok', [
  z.strictObject({
    ok: z.literal(true),
    project: ProjectIdSchema,
    version: z.number().int().min(1),
    digest: z.string().min(1).max(128),
    changed: z.boolean(),
  }),
  z.strictObject({ ok: z.literal(false), error: RouterReplyErrorSchema }),
]);
export type PublishDefinitionReply = z.infer<typeof PublishDefinitionReplySchema>;

/**
 * The `cause` of a stop request for the run of an escalated handoff (see `StopRunRequestSchema`).
 * `project` is the handoff's project when it is not the run's (a cross-project handoff lives in
 * its target project); absent, the handoff is in the request's project. `consult_handoff_id` is
 * present when the project's lead was given a consult; absent, nobody was — the stop is then the
 * only way a person learns of the failed work, and the run's `run.stopped` records the escalation so
 * the inbox closes the escalation's item in favour of the stop's.
 */
export const HandoffEscalatedCauseSchema = z.strictObject({
  kind: z.literal('handoff_escalated'),
  handoff_id: IdSchema,
  event_id: IdSchema,
  project: ProjectIdSchema.optional(),
  consult_handoff_id: IdSchema.optional(),
});
export type HandoffEscalatedCause = z.infer<typeof HandoffEscalatedCauseSchema>;

/**
 * Ask the router to stop a run from outside the run (written by the watchdog: a handoff of the run
 * hit its retry cap and the project has no lead, `handoff.escalated` with `stop_why`; or a loop
 * guard tripped). Published
 * with JetStream into the inbox on `<prefix>.in.<project>.stop` with `Nats-Msg-Id` = `stop:<project>:<packet_id>`.
 * `packet_id` is deterministic (derived from the causing event) and becomes the stop packet's id,
 * so the run decider's `stop` (idempotent on `packet_id`) stops the run once however often the
 * request is delivered. The router fills the run's own facts (agent, step) from its state — but a
 * circuit's stop names the agent of its `cause.agent`, whose circuit opened, as the packet's agent. A
 * `budget` stop may name the cap it hit (`cap`; the watchdog's hop budget is `hops`): the packet
 * carries it, so the operator's raise_cap form shows it and a cap that does not exceed it is
 * refused (`cap_not_raised`); `cap` belongs to budget stops only. A `packet_id` starting `stop-` is
 * refused (`schema_violation`): the router derives those for the stops it opens.
 */
export const StopRunRequestSchema = z
  .strictObject({
    /**
     * Unique within the project (the watchdog's are derived from the event that caused them). Not
     * `stop-…`: those are the ids the router derives for the stops it opens itself, and a request
     * naming one would take another run's packet id.
     */
    packet_id: IdSchema.regex(/^(?!stop-)/, 'packet ids starting "stop-" are the ones Baton derives for the stops it opens itself; choose another'),
    workflow_run_id: IdSchema,
    project: ProjectIdSchema,
    why: StopWhySchema,
    detail: ShortTextSchema.optional(),
    tried: z.array(z.string().min(1).max(200)).max(Limits.maxListItems).default([]),
    /** The budget a `budget` stop hit: `name`, `limit`, `used?` (the watchdog's hop budget: `hops`). */
    cap: StopCapSchema.optional(),
    /**
     * Who asks: `baton-watchdog` (the watchdog's stops), or the person the admin connection acts
     * for. A claim: the router records the sender — the watchdog when this names it, else `admin` —
     * as the actor, never this name, which it keeps beside it as `on_behalf_of` on `run.stopped` /
     * `mesh.stopped` (docs/identity.md). An actor name (letters, digits and
     * `_ - . : @`, at most 128).
     */
    requested_by: ActorNameSchema,
    /** What caused the request: for the watchdog, the escalated handoff and the escalation event. */
    cause: z
      .discriminatedUnion('kind', [
        HandoffEscalatedCauseSchema,
        /** A loop guard of the watchdog (hop budget, ping-pong, circuit) tripped on `event_id`. */
        LoopGuardCauseSchema,
      ])
      .optional(),
  })
  .superRefine((request, ctx) => {
    if (request.cap !== undefined && request.why !== 'budget') {
      ctx.addIssue({ code: 'custom', path: ['cap'], message: `only a budget stop names a cap, not a ${request.why} stop` });
    }
  })
  .meta({ anyOf: [{ properties: { why: { const: 'budget' } } }, { not: { required: ['cap'] } }] });
export type StopRunRequest = z.infer<typeof StopRunRequestSchema>;

/**
 * A customer turn of a conversation run (seed 001), published with JetStream into the inbox on
 * `<prefix>.in.<project>.message` (Nats-Msg-Id = `message:<project>:<workflow_run_id>/<message_id>`). The router records it on the run
 * and evaluates the active agent's WHEN routes before any model runs; `message_id` is the
 * idempotency key. Accepted only while the run awaits the customer (after an agent's reply).
 */
export const SessionMessageSchema = z.strictObject({
  workflow_run_id: IdSchema,
  project: ProjectIdSchema,
  message_id: IdSchema,
  text: z.string().min(1).max(Limits.maxShortText),
  sent_by: PersonHandleSchema.optional(),
});
export type SessionMessage = z.infer<typeof SessionMessageSchema>;
