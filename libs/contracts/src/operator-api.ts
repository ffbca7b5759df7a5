import { z } from 'zod';
import { hasVisibleText, IdSchema, Limits, nonBlankPersonTextSchema, PersonTextSchema, SOMETHING_VISIBLE } from './common';
import { ActorNameSchema } from './handoff';
import { HoldAnswerActionSchema, RouteCauseSchema } from './run';

/*
 * The request bodies of the operator HTTP API's POST routes (the notifier parses every body with
 * these). `baton schemas` publishes each as `docs/schemas/<name>.json` ({@link OperatorApiRequestSchemas})
 * and the OpenAPI document at `GET /openapi.json` is generated from the same zod schemas, so the
 * two never say different things. They are what a client sends, not what Baton records: the
 * recorded stop answer is `operator-answer.json` (with `packet_id`, `answered_by` — the token's
 * name — and `answered_at`, set by the API), a hold answer travels in `run-answer-request.json`.
 *
 * Who acts comes from the token, never from the body: a field that names the actor (`answered_by`,
 * `actor`) may only repeat the token's name — the API refuses another 403 `identity_mismatch` and
 * records nothing ({@link OperatorBodyActorFields}).
 */

/** The body fields that name who acts: checked against the token's name, never taken from the body. */
export const OperatorBodyActorFields = ['answered_by', 'actor'] as const;

const actorClaim = (what: string) =>
  `who ${what}: the token's name, if sent at all (the token names who ${what}; another name is refused 403 identity_mismatch)`;

/** An idempotency key of a request relayed to the ledger. */
const idempotencyKey = z.string().min(1).max(200).optional().describe('a retry with the same key and body changes nothing; generated when absent');

/**
 * The buttons a stop packet's form has (`action` of `POST …/stops/:id/answer`). `accept` and
 * `rework`, which {@link OperatorAnswerActionSchema} also names (the `accept_rework` form kind), are
 * not among them: no stop packet Baton writes carries that form — a completion handback is accepted
 * or reworked at `POST …/handoffs/:id/decision` — so the API refuses them as it refuses any other
 * word (400 `schema_violation`, path `action`).
 */
export const StopAnswerActionSchema = z.enum(['approve', 'deny', 'intent', 'raise_cap', 'acknowledge'], {
  error: 'action is approve, deny, intent, raise_cap or acknowledge (accept and rework decide a completion handback: POST …/handoffs/:id/decision)',
});
export type StopAnswerAction = z.infer<typeof StopAnswerActionSchema>;

/**
 * `POST /v1/projects/:project/stops/:id/answer`: the packet form's answer. `answer_id` (optional)
 * makes a retried POST idempotent. An intent answer names its intent and a raise_cap its cap; an
 * intent or a cap goes with that button only (with another either would be dropped unread: a deny
 * with a cap is not a raise).
 */
export const StopAnswerBodySchema = z
  .strictObject({
    answer_id: IdSchema.optional().describe('the idempotency key: the same answer sent again under it answers its outcome again; generated when absent'),
    action: StopAnswerActionSchema,
    intent: z.string().min(1).max(Limits.maxIdLength).optional().describe('the request kind: with action intent only (and required there)'),
    cap: z
      .number()
      .positive()
      .max(Number.MAX_SAFE_INTEGER, 'a cap is at most 9007199254740991')
      .optional()
      .describe('the new cap: with action raise_cap only (and required there)'),
    note: PersonTextSchema.optional(),
    /** The packet's `pending_digest` as shown (`null` when it freezes no call, as the packet says it). */
    pending_digest: z
      .string()
      .min(1)
      .max(200)
      .nullable()
      .optional()
      .describe("the packet's pending_digest as shown (null: it freezes no call); an approve names it"),
    answered_by: z.string().min(1).max(200).optional().describe(actorClaim('answers')),
  })
  .superRefine((body, ctx) => {
    if (body.action === 'intent' && body.intent === undefined) {
      ctx.addIssue({ code: 'custom', path: ['intent'], message: 'an intent answer names the intent' });
    }
    if (body.action === 'raise_cap' && body.cap === undefined) {
      ctx.addIssue({ code: 'custom', path: ['cap'], message: 'a raise_cap answer names the new cap' });
    }
    if (body.intent !== undefined && body.action !== 'intent') {
      ctx.addIssue({ code: 'custom', path: ['intent'], message: `only an intent answer names an intent; this one is ${body.action}` });
    }
    if (body.cap !== undefined && body.action !== 'raise_cap') {
      ctx.addIssue({ code: 'custom', path: ['cap'], message: `only a raise_cap answer names a cap; this one is ${body.action}` });
    }
  })
  .meta({
    allOf: [
      { if: { properties: { action: { const: 'intent' } }, required: ['action'] }, then: { required: ['intent'] } },
      { if: { properties: { action: { const: 'raise_cap' } }, required: ['action'] }, then: { required: ['cap'] } },
      { if: { properties: { action: { not: { const: 'intent' } } }, required: ['action'] }, then: { not: { required: ['intent'] } } },
      { if: { properties: { action: { not: { const: 'raise_cap' } } }, required: ['action'] }, then: { not: { required: ['cap'] } } },
    ],
  });
export type StopAnswerBody = z.infer<typeof StopAnswerBodySchema>;

/** `POST /v1/projects/:project/runs/:id/answer`: the answer to a hold. A reroute names its target, and only a reroute does. */
export const HoldAnswerBodySchema = z
  .strictObject({
    answer_id: IdSchema.optional().describe('the idempotency key: the same answer sent again under it answers its outcome again; generated when absent'),
    action: HoldAnswerActionSchema,
    target: z
      .string()
      .min(1)
      .max(Limits.maxIdLength)
      .optional()
      .describe('the step, agent or role a reroute sends the run to: with action reroute only (and required there)'),
    note: PersonTextSchema.optional(),
    /**
     * The hold this answer was made for: the `cause` of the hold's inbox item (or of the run view's
     * `hold`). When the run is held again since, by another cause, the answer is 409 `stale_answer`.
     */
    hold_cause: RouteCauseSchema.optional().describe("the hold's cause as the inbox item or run view shows it; another hold since: 409 stale_answer"),
    answered_by: z.string().min(1).max(200).optional().describe(actorClaim('answers')),
  })
  // A target goes with a reroute only: with continue or terminate it would be dropped unread.
  .superRefine((body, ctx) => {
    if (body.action === 'reroute' && body.target === undefined) {
      ctx.addIssue({ code: 'custom', path: ['target'], message: 'a reroute answer names a step, agent or role' });
    }
    if (body.target !== undefined && body.action !== 'reroute') {
      ctx.addIssue({ code: 'custom', path: ['target'], message: `only a reroute names a target, not a ${body.action}` });
    }
  })
  .meta({
    allOf: [
      { if: { properties: { action: { const: 'reroute' } }, required: ['action'] }, then: { required: ['target'] } },
      { if: { properties: { action: { not: { const: 'reroute' } } }, required: ['action'] }, then: { not: { required: ['target'] } } },
    ],
  });
export type HoldAnswerBody = z.infer<typeof HoldAnswerBodySchema>;

/** `POST /v1/projects/:project/handoffs/:id/decision`: accept or rework a completion handback; a rework says what to change. */
export const HandbackDecisionBodySchema = z
  .strictObject({
    decision: z.enum(['accept', 'rework']),
    note: PersonTextSchema.optional().describe('what to change: required (with something visible in it) for a rework'),
    actor: ActorNameSchema.optional().describe(actorClaim('decides')),
    idempotency_key: idempotencyKey,
  })
  .superRefine((body, ctx) => {
    if (body.decision === 'rework' && (body.note === undefined || !hasVisibleText(body.note))) {
      ctx.addIssue({ code: 'custom', path: ['note'], message: 'a rework says what to change' });
    }
  })
  .meta({
    if: { properties: { decision: { const: 'rework' } }, required: ['decision'] },
    then: { required: ['note'], properties: { note: { pattern: SOMETHING_VISIBLE.source } } },
  });
export type HandbackDecisionBody = z.infer<typeof HandbackDecisionBodySchema>;

/**
 * `POST /v1/projects/:project/handoffs/:id/abandon`: withdraw an open handoff (pending, claimed or
 * returned). The reason has the ledger's limits for an abandon's reason (AbandonHandoffCommandSchema),
 * so the API refuses what the ledger would.
 */
export const AbandonHandoffBodySchema = z.strictObject({
  reason: nonBlankPersonTextSchema('an abandon says why'),
  actor: ActorNameSchema.optional().describe(actorClaim('abandons')),
  idempotency_key: idempotencyKey,
});
export type AbandonHandoffBody = z.infer<typeof AbandonHandoffBodySchema>;

/**
 * `POST /v1/projects/:project/pause` (admin): the project's kill switch, relayed to the ledger as
 * the token's admin. `force` pauses a project with no published definition (else `project_unknown`).
 */
export const PauseBodySchema = z.strictObject({
  reason: nonBlankPersonTextSchema('a pause says why'),
  idempotency_key: idempotencyKey,
  force: z.boolean().optional().describe('pause even though the project has no published definition'),
});
export type PauseBody = z.infer<typeof PauseBodySchema>;

/** `POST /v1/projects/:project/resume` (admin): dispatch again; every pending handoff is offered again. */
export const ResumeBodySchema = z.strictObject({
  reason: PersonTextSchema.optional(),
  idempotency_key: idempotencyKey,
});
export type ResumeBody = z.infer<typeof ResumeBodySchema>;

/** `POST /v1/projects/:project/notices/:notice_id/redeliver`: no fields (an empty body, or `{}`). */
export const NoticeRedeliverBodySchema = z.strictObject({});

/**
 * Every operator API request body by its published file name (`docs/schemas/<name>.json`), and
 * the routes that take it: the `/v1/projects/:project/…` route, and the by-id route when there is
 * one. `baton schemas` writes them; the OpenAPI document takes each route's body from here.
 */
export const OperatorApiRequestSchemas = {
  'operator-answer-request': { schema: StopAnswerBodySchema, routes: ['/v1/projects/{project}/stops/{id}/answer', '/v1/stops/{id}/answer'] },
  'hold-answer-request': { schema: HoldAnswerBodySchema, routes: ['/v1/projects/{project}/runs/{id}/answer', '/v1/runs/{id}/answer'] },
  'handback-decision-request': {
    schema: HandbackDecisionBodySchema,
    routes: ['/v1/projects/{project}/handoffs/{id}/decision', '/v1/handoffs/{id}/decision'],
  },
  'abandon-handoff-request': { schema: AbandonHandoffBodySchema, routes: ['/v1/projects/{project}/handoffs/{id}/abandon', '/v1/handoffs/{id}/abandon'] },
  'project-pause-request': { schema: PauseBodySchema, routes: ['/v1/projects/{project}/pause'] },
  'project-resume-request': { schema: ResumeBodySchema, routes: ['/v1/projects/{project}/resume'] },
  'notice-redeliver-request': { schema: NoticeRedeliverBodySchema, routes: ['/v1/projects/{project}/notices/{notice_id}/redeliver'] },
} as const satisfies Record<string, { schema: z.ZodType; routes: readonly string[] }>;
export type OperatorApiRequestName = keyof typeof OperatorApiRequestSchemas;
