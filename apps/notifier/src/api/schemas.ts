import { z } from 'zod';
import {
  ActorNameSchema,
  AgentNameSchema,
  HandoffPrioritySchema,
  HandoffRecordSchema,
  IdSchema,
  IsoTimeSchema,
  ProjectControlRecordSchema,
  ProjectIdSchema,
  ResumeEffectSchema,
  RouteCauseSchema,
  RunStatusSchema,
  StopPacketSchema,
  StopPacketStatusSchema,
  StopWhySchema,
} from '@baton/contracts';
import { InboxWhys } from '@baton/projections';
import { WEBHOOK_FAILURE_REASONS, type WebhookFailureReason } from '../notices/webhook-sender';

/**
 * A query parameter holding one value or a comma-separated list of them (any matches), given once
 * or repeated (`?kind=stop&kind=hold` is `?kind=stop,hold`). When the values are an enum, the
 * OpenAPI document says which (a `pattern` and the list in words): the server refuses any other
 * value (400), so a client can know it before asking. At most 20 values in all.
 */
const list = <T extends z.ZodType<string, string>>(item: T) => {
  const raw = z.string().min(1).max(2_000);
  const values = item instanceof z.ZodEnum ? (item.options as string[]) : null;
  const documented =
    values === null
      ? raw
      : raw.meta({
          pattern: `^ *(${values.join('|')}) *(, *(${values.join('|')}) *)*$`,
          description: `one of ${values.join(', ')}, or a comma-separated list of them`,
        });
  return z
    .union([documented, z.array(documented).min(1).max(20)], { error: 'at most 20 values, given once as a comma-separated list or by repeating the parameter' })
    .transform((given) => (typeof given === 'string' ? [given] : given).flatMap((text) => text.split(',').map((v) => v.trim())))
    .pipe(z.array(item).min(1).max(20));
};

/**
 * How many items a page holds: digits only in a query (`0x10`, `1e2`, ` 7 ` or `5.0` are refused,
 * not read as numbers), 1–500, 50 when absent.
 */
const limit = z
  .union(
    [
      z.number().int().min(1).max(500),
      z
        .string()
        .regex(/^(?:[1-9][0-9]?|[1-4][0-9]{2}|500)$/)
        .transform(Number),
    ],
    { error: 'limit is a whole number from 1 to 500, in digits' },
  )
  .pipe(z.number().int().min(1).max(500))
  .default(50)
  .describe('items per page: a whole number from 1 to 500, in digits (default 50)');
const cursor = z.string().min(1).max(2_000);

export const InboxKindSchema = z.enum(['stop', 'hold', 'handback', 'escalation']);
/** What an inbox item's `why` may be (`InboxWhys`): a stop's why, a hold's kind, an escalation's cause. */
export const InboxWhySchema = z.enum(InboxWhys as [string, ...string[]]);
export const InboxStatusSchema = z
  .enum(['open', 'answered', 'closed'])
  .describe(
    "open; answered (a person's answer or handback decision ended the item); closed (anything else ended it: superseded, the run ended, the handoff withdrawn)",
  );

/** `GET /v1/events/stream` query: the projects to hear (any the token may see; all of them when absent). Unknown parameters are refused (400). */
export const EventStreamQuerySchema = z.strictObject({
  project: list(ProjectIdSchema).optional(),
});

/** Every status: `any`, or `all` (the same; the CLI's flags take both). */
const anyStatus = z.enum(['any', 'all']).transform((): 'any' => 'any');

/** `GET /v1/inbox` query. Unknown parameters are refused (400). `status` defaults to `open`; `any` (or `all`) lists all. */
export const InboxQuerySchema = z.strictObject({
  project: list(ProjectIdSchema).optional(),
  kind: list(InboxKindSchema).optional(),
  why: list(InboxWhySchema).optional(),
  agent: list(ActorNameSchema).optional(),
  priority: list(HandoffPrioritySchema).optional(),
  status: z
    .union([list(InboxStatusSchema), anyStatus], { error: 'status takes open, answered, closed (one, or a comma-separated list), or any (all)' })
    .default(['open']),
  order: z.enum(['newest', 'urgent']).default('newest'),
  limit,
  cursor: cursor.optional(),
});

/** `GET /v1/stops` query. `since` / `until` bound the packet time (ISO, inclusive). */
export const StopsQuerySchema = z.strictObject({
  project: list(ProjectIdSchema).optional(),
  why: list(StopWhySchema).optional(),
  agent: list(AgentNameSchema).optional(),
  status: z
    .union([list(StopPacketStatusSchema), anyStatus], { error: 'status takes open, answered (one, or a comma-separated list), or any (all)' })
    .optional()
    .describe('open, answered (a list), or any — `all` is the same — (the default: every packet), as the inbox takes it'),
  run: IdSchema.optional().describe('only the packets of the runs of this workflow_run_id (in each project the token may see, or the `project` filter names)'),
  since: IsoTimeSchema.optional(),
  until: IsoTimeSchema.optional(),
  limit,
  cursor: cursor.optional(),
});

export const IdParamSchema = IdSchema;
/** The `:project` of a project route. */
export const ProjectParamSchema = ProjectIdSchema;

/*
 * The request bodies of the POST routes are contracts a client in any language reads: they live in
 * `@baton/contracts` (libs/contracts/src/operator-api.ts), published as docs/schemas/*-request.json
 * and in the OpenAPI document from the same zod schemas.
 */
export {
  AbandonHandoffBodySchema,
  HandbackDecisionBodySchema,
  HoldAnswerBodySchema,
  NoticeRedeliverBodySchema,
  PauseBodySchema,
  ResumeBodySchema,
  StopAnswerBodySchema,
} from '@baton/contracts';

// ---------------------------------------------------------------------------------------------
// Response shapes (documentation: the OpenAPI document is built from them)

/** The answer to a pause or resume: the project's kill switch after it, and how many events this request stored (0: a retry). */
export const ProjectControlResponseSchema = z.object({
  project: ProjectControlRecordSchema,
  events: z.number().int().min(0),
});

export const ErrorBodySchema = z.object({
  error: z.object({
    code: z.string().describe('a RejectionCode (schema_violation, malformed_json, not_found...) or a domain code (stop_already_answered, run_not_held...)'),
    message: z.string(),
    issues: z.array(z.object({ path: z.string(), message: z.string() })),
    details: z.record(z.string(), z.unknown()).optional(),
  }),
});

export const InboxItemSchema = z
  .object({
    id: z
      .string()
      .describe(
        'stop:<project>:<packet_id> | hold:<seq>:<project>:<workflow_run_id> | handback:<project>:<handoff_id> | escalation:<project>:<handoff_id> (ids may hold ":"; the project never does)',
      ),
    project: z.string(),
    kind: InboxKindSchema,
    why: z.string().optional().describe('stop: the StopWhy; hold: hold | human_gate; escalation: lease_expired | rework | offer_given_up'),
    agent: z.string().optional(),
    priority: HandoffPrioritySchema.optional(),
    status: InboxStatusSchema,
    urgency: z.number().describe('urgent 4, high 3, medium 2, low 1'),
    at: z.number().int().describe('when the item opened, epoch ms'),
    title: z.string(),
    opened_at: z.string(),
    workflow_run_id: z.string().optional(),
    run_project: z
      .string()
      .optional()
      .describe("the project of workflow_run_id when it is not the item's own: the escalation of a cross-project handoff, whose run is its source project's"),
    handoff_id: z.string().optional().describe("handback, escalation: the item's handoff; stop: the escalated handoff the stop was asked for, when it was"),
    handoff_project: z.string().optional().describe('stop of an escalated handoff living in another project (a cross-project handoff): that project'),
    packet_id: z
      .string()
      .optional()
      .describe('stop: its packet; escalation closed superseded_by_stop: the packet of the stop that took it over (in the run project)'),
    resolution: z.string().optional(),
    closed_at: z.string().optional(),
    closed_by: z.string().optional(),
    trace_id: z.string().optional().describe('the W3C trace id of the event that opened the item, when it had one'),
    // A stop item (and a mesh's: mesh_run_id).
    mesh_run_id: z.string().optional().describe('stop of a handoff mesh: the mesh run (answer it like any stop)'),
    run_id: z.string().optional().describe('stop: the agent run that stopped'),
    step: z.string().optional().describe('stop, hold: the step the run was at'),
    user_msg: z.string().optional().describe('stop: what the user asked'),
    detail: z.string().optional().describe('stop: the detail the agent or Baton gave'),
    form_kind: z.string().nullable().optional().describe("stop: the packet's form (confirm, intent, raise_cap...), null without one"),
    actions: z
      .array(z.string())
      .optional()
      .describe(
        "the answers the item takes — stop: its form's buttons (approve, deny, intent, raise_cap, acknowledge...); hold: continue, reroute, terminate; handback: accept, rework; none on an escalation",
      ),
    has_pending: z.boolean().optional().describe('stop: the packet freezes a pending call (approve needs its pending_digest)'),
    // A hold item.
    hold_kind: z.string().optional().describe('hold: hold | human_gate'),
    reason: z.string().optional().describe('hold: why the run is held'),
    pending_target: z.unknown().optional().describe('hold: the route a continue would take, when there is one'),
    pending_call: z
      .unknown()
      .optional()
      .describe('hold: the call the result before the hold left pending ({ name, args, call_id? }); a continue or reroute hands it on (not approved)'),
    cause: RouteCauseSchema.optional().describe('hold: what caused it; an answer names it as hold_cause'),
    // A handback item.
    parent_handoff_id: z.string().nullable().optional().describe('handback: the handoff whose work it hands back'),
    reviewed_worker: z.string().nullable().optional().describe('handback: the worker whose work is reviewed (it may not decide it)'),
    to_agent: z.string().nullable().optional(),
    to_role: z.string().nullable().optional().describe('handback: the role that decides it (operator...)'),
    handoff_status: z.string().optional().describe('handback: pending, claimed, or the status its closing left'),
    claimed_by: z.string().optional(),
    offer_given_up_by: z
      .string()
      .optional()
      .describe('handback: its reviewer gave up on its offer without claiming it (give_up_offer); it waits here for a person'),
    offer_given_up_reason: z.string().optional().describe('handback: why its reviewer gave up (the handler`s last error)'),
    // An escalation item.
    escalate_to: z.string().nullable().optional(),
    consult_handoff_id: z.string().nullable().optional(),
    stop_why: z.string().nullable().optional(),
    attempted_retry: z.number().int().optional(),
    max_retries: z.number().int().optional(),
    note: z.string().optional(),
  })
  .catchall(z.unknown());

export const InboxPageSchema = z.object({
  items: z.array(InboxItemSchema),
  next_cursor: z.string().nullable(),
  open_count: z
    .number()
    .int()
    .describe(
      "how many open items the query's filters other than `status` select (project scope, kind, why, agent, priority): the inbox's size, whatever page or status is listed",
    ),
});

export const StopRecordSchema = z.object({
  stop: StopPacketSchema,
  effect: ResumeEffectSchema.nullable(),
  answered_at: z.string().nullable(),
  mesh_run_id: z.string().nullable().optional().describe('set when the packet belongs to a handoff mesh: its answer goes to the mesh'),
});
export const StopsPageSchema = z.object({ items: z.array(StopRecordSchema), next_cursor: z.string().nullable() });

export const TimelineEntrySchema = z.object({
  seq: z.number().int(),
  event_id: z.string(),
  type: z.string(),
  occurred_at: z.string(),
  actor: z.string(),
  origin: z.string(),
  summary: z.string(),
  said: z.string().optional().describe("on an agent's result (a mesh turn): what it said"),
});

export const HandoffViewSchema = z.object({ handoff: HandoffRecordSchema, timeline: z.array(TimelineEntrySchema) });

const RouteTargetViewSchema = z.object({ agent: z.string(), step: z.string() });

/** One routing decision of a run: where control went, by which rule, for what reason. */
export const RunRouteSchema = z.object({
  seq: z.number().int(),
  at: z.string(),
  event: z.enum(['run.routed', 'run.held', 'run.completed', 'run.terminated', 'run.stopped']),
  outcome: z
    .string()
    .describe('dispatch, hold, complete, terminate; unresolved (a run.stopped: the result named nothing, the router stopped the run unknown_intent)'),
  rule: z
    .string()
    .describe(
      'the cascade rule that decided it: function_call, task, explicit_dispatch, callback, workflow_edge, no_action_default, terminal, entry, resume, handoff, handoff_return, message',
    ),
  reason: z.string().nullable().describe("the agent's reason, or the engine's (no-action default…, returnable handoff A → B…); null when the agent gave none"),
  origin: z.string().describe('agent, engine_fallback or human'),
  status: z.string().describe('the dispatch status the decision carries: advance, hold, loop or terminate (a loop and an advance both dispatch)'),
  from: RouteTargetViewSchema.nullable(),
  to: RouteTargetViewSchema.nullable().describe("the dispatched target, or a hold's pending target"),
  hop: z.number().int().nullable(),
  handoff_id: z.string().nullable(),
  cause: z.object({ kind: z.string(), id: z.string() }).nullable(),
  handoff: z
    .object({ return_expected: z.boolean(), route: z.number().int() })
    .optional()
    .describe('a HANDOFF route (seed 001): returnable or permanent, its index in the caller’s HANDOFF list'),
});

/** A parent waiting for its returnable handoff's child to return (seed 001). */
export const RunWaitingParentSchema = z.object({
  agent: z.string().describe('the waiting parent: the return address'),
  step: z.string(),
  handoff_id: z.string(),
  child: z.string().describe('the agent it waits for'),
  since: z.string(),
  on_return: z.record(z.string(), z.unknown()).nullable().describe('ON_RETURN (action, resume_with, map, set, respond, handler), null for the default'),
  child_variables: z.record(z.string(), z.unknown()).describe("the child's own scope: PASS variables plus what it set"),
  original_utterance: z.string().nullable(),
  replay_depth: z.number().int(),
});

export const RunViewSchema = z.object({
  workflow_run_id: z.string(),
  project: z.string(),
  workflow: z.object({ name: z.string(), version: z.number().int() }),
  status: RunStatusSchema,
  step: z.string(),
  agent: z.string(),
  callback: z.string().nullable(),
  hops: z.number().int(),
  handoff_id: z.string().nullable(),
  open_stop_id: z.string().nullable(),
  hold: z
    .object({
      kind: z.string(),
      reason: z.string(),
      pending_target: z.object({ agent: z.string(), step: z.string() }).nullable(),
      cause: RouteCauseSchema.optional().describe('what caused the hold: name it as hold_cause in the answer'),
      pending_call: z
        .object({ name: z.string(), args: z.record(z.string(), z.unknown()).optional(), call_id: z.string().optional() })
        .optional()
        .describe("the call the result before the hold left pending: a continue or reroute hands it on as the next handoff's context.pending_call"),
    })
    .nullable(),
  terminated_reason: z.string().nullable(),
  people: z.record(z.string(), z.string().nullable()),
  variables: z.record(z.string(), z.unknown()).describe('every session variable (declared and implicit together)'),
  declared_variables: z
    .record(z.string(), z.unknown())
    .nullable()
    .describe("the variables the run's definition declares (an agent's MEMORY or GATHER); null for runs started before declarations were recorded"),
  implicit_variables: z.record(z.string(), z.unknown()).nullable().describe("the others: the start's input, start variables, values no agent declares"),
  unset_declared_variables: z.array(z.string()).nullable().describe('declared but not set yet'),
  waiting_parents: z.array(RunWaitingParentSchema).describe('parents waiting for a returnable child, innermost last'),
  pending_handoff: z
    .object({
      handoff_id: z.string(),
      from: z.string(),
      to: z.string(),
      route: z.number().int(),
      return_expected: z.boolean(),
      on_failure: z.record(z.string(), z.unknown()),
      since: z.string(),
    })
    .nullable()
    .describe('a HANDOFF whose target has not run yet'),
  awaiting_input: z.boolean().describe('the active agent waits for the customer'),
  queued_messages: z.number().int(),
  routes: z.array(RunRouteSchema).describe('the routing decisions, oldest first (the latest 100)'),
  notices: z.number().int(),
  started_at: z.string(),
  updated_at: z.string(),
  last_seq: z.number().int(),
});
/** A record named by its project and id (ids are unique only within a project). */
export const ProjectRefSchema = z.object({ project: z.string(), id: z.string() });
export const RunResponseSchema = z.object({
  run: RunViewSchema,
  timeline: z.array(TimelineEntrySchema),
  handoffs: z.array(ProjectRefSchema).describe('the handoffs the run created, oldest first (a cross-project handoff lives in its target project)'),
});

/** A handoff mesh run as `GET /v1/projects/:project/meshes/:id` shows it (folded from its events). */
export const MeshViewSchema = z.object({
  mesh_run_id: z.string(),
  project: z.string(),
  mesh: z.object({
    name: z.string(),
    entry: z.string(),
    outputs: z.array(z.string()),
    handoffs: z.record(z.string(), z.array(z.string())).describe('agent → the agents it may hand off to'),
  }),
  status: z.enum(['running', 'completed', 'stopped', 'terminated']),
  speaker: z.string().describe('the agent whose turn comes next (the last to speak once the mesh ended)'),
  handoff_id: z.string(),
  input: z.string().nullable(),
  started_by: z.string().nullable(),
  notify: z.object({ handle: z.string(), source: z.string() }).nullable(),
  started_at: z.string(),
  turns: z.array(
    z.object({
      turn: z.number().int(),
      agent: z.string(),
      result_id: z.string(),
      text: z.string().describe('what the agent said'),
      calls: z.array(z.string()).describe('the handoff tools it called, in call order'),
      handoff_id: z.string().nullable(),
      stopped: z
        .object({ why: z.string(), packet_id: z.string() })
        .optional()
        .describe("set when the turn stopped the mesh itself (its agent's own stop): its calls were not followed"),
      at: z.string(),
    }),
  ),
  handoffs: z
    .array(
      z.object({
        turn: z.number().int(),
        from: z.string(),
        to: z.string(),
        tool: z.string(),
        handoff_id: z.string(),
        cause: z.string().describe('the result id that asked for it, or the answer id that let it through after a cap raise'),
        after_cap_raise: z.boolean(),
        handover: z
          .object({ reason: z.string().optional(), message: z.string().optional() })
          .optional()
          .describe("what the agent handing off wrote for the target (its call's reason / message), when it wrote it"),
        resume: z
          .object({
            answer_id: z.string(),
            action: z.string(),
            approved_call: z.unknown().optional(),
            raised_cap: z.number().optional(),
            pending_call: z.unknown().optional(),
          })
          .optional()
          .describe(
            "set when an operator's answer to an agent's own stop made it (tool `operator_answer`): the answer, and the call approved, the cap raised or the frozen call handed on",
          ),
        at: z.string(),
      }),
    )
    .describe('the handoffs taken, oldest first'),
  ignored: z
    .array(
      z.object({
        turn: z.number().int().nullable(),
        agent: z.string(),
        tool: z.string(),
        target: z.string().nullable(),
        reason: z.enum(['unknown_tool', 'not_granted']),
        detail: z.string(),
        at: z.string(),
      }),
    )
    .describe(
      'handoff calls ignored, and why: `unknown_tool` (names no agent of the mesh) or `not_granted` (an agent this speaker may not reach, itself included)',
    ),
  rejected: z
    .array(z.object({ result_id: z.string(), agent: z.string(), code: z.string(), message: z.string(), at: z.string() }))
    .describe('turns (and operator answers) the mesh refused, with the code'),
  cap: z.object({
    max_iterations: z.number().int().describe('the cap in force'),
    initial: z.number().int(),
    used: z.number().int().describe('turns recorded'),
    raised: z.array(z.object({ from: z.number().int(), to: z.number().int(), by: z.string(), answer_id: z.string(), at: z.string() })),
  }),
  stop: z
    .object({
      packet_id: z.string(),
      why: z.string(),
      detail: z.string().nullable(),
      status: z.string(),
      refused: z
        .object({ from: z.string(), to: z.string(), tool: z.string() })
        .nullable()
        .describe('the handoff the cap refused; null when the agent stopped the mesh itself'),
      stopped_at: z.string(),
      answer: z.object({ action: z.string(), by: z.string(), at: z.string(), effect: z.string() }).nullable(),
    })
    .nullable()
    .describe("the latest stop (the cap refusing a handoff, or an agent's own stop signal), open or answered"),
  outcome: z
    .object({
      status: z.enum(['running', 'completed', 'stopped', 'terminated']),
      by: z.string().optional(),
      turns: z.number().int().optional(),
      output: z.object({ agent: z.string(), turn: z.number().int(), result_id: z.string(), text: z.string() }).nullable().optional(),
      packet_id: z.string().optional(),
      why: z.string().optional().describe("stopped: the stop packet's why"),
      at_cap: z.boolean().optional().describe("stopped: true when the cap refused a handoff; false for the speaking agent's own stop or one from outside"),
      reason: z.string().optional(),
      answer_id: z.string().optional(),
      at: z.string().optional(),
    })
    .describe('completed (by, turns, output), stopped (packet_id, why, at_cap), terminated (reason, answer_id) or running'),
  notices: z.number().int(),
  updated_at: z.string(),
  last_seq: z.number().int(),
});
export const MeshResponseSchema = z.object({
  project: z.string(),
  mesh: MeshViewSchema,
  timeline: z.array(TimelineEntrySchema).describe('every event of the mesh in stream order (a turn carries `said`: its text)'),
});

/** The event the router appended for an answer: `run.resumed` / `mesh.stop_answered` (applied) or `run.result_rejected` / `mesh.turn_rejected` (refused). */
export const DecidingEventSchema = z.object({ type: z.string(), seq: z.number().int(), at: z.string() });

/** A mesh as it stands after an operator's answer. */
export const MeshSummarySchema = z.object({
  mesh_run_id: z.string(),
  project: z.string(),
  status: z.string(),
  speaker: z.string(),
  turns: z.number().int(),
  max_iterations: z.number().int(),
  packet_id: z.string().nullable(),
  stop_status: z.string().nullable(),
});

export const AnswerOutcomeSchema = z
  .enum(['applied', 'pending'])
  .describe('applied (200): the router applied the answer; pending (202): not decided within NOTIFIER_ANSWER_WAIT_MS — read `status_url`');

/** The reply to an answer: 200 `applied` with the run's (or mesh's) new state, or 202 `pending` with the status link. A refusal is a 409 error. */
export const AnswerAcceptedSchema = z.object({
  accepted: z.literal(true).describe('the answer was published to the router'),
  outcome: AnswerOutcomeSchema,
  answer_id: z.string(),
  project: z.string(),
  workflow_run_id: z.string(),
  mesh_run_id: z.string().optional().describe('set when the answered packet belongs to a handoff mesh (published on mesh_answer)'),
  subject: z.string(),
  duplicate: z.boolean().describe('true when the same answer_id was already published'),
  status_url: z.string().describe('GET it for the outcome: /v1/projects/<project>/runs/<id>/answers/<answer_id> (meshes/<id> for a mesh)'),
  event: DecidingEventSchema.optional().describe('applied: the run.resumed / mesh.stop_answered event'),
  run: RunViewSchema.nullable().optional().describe('applied, on a run: the run as it stands after the answer (folded from its events)'),
  mesh: MeshSummarySchema.nullable().optional().describe('applied, on a mesh: the mesh after the answer'),
});

/** `GET /v1/projects/:project/{runs|meshes}/:id/answers/:answer_id`: what became of an answer. */
export const AnswerStatusSchema = z.object({
  answer_id: z.string(),
  project: z.string(),
  workflow_run_id: z.string(),
  mesh_run_id: z.string().optional(),
  status_url: z.string(),
  outcome: z
    .enum(['applied', 'refused', 'pending'])
    .describe('pending: sent through the API, and the router has not decided it yet (an answer never sent is 404 `answer_not_found`)'),
  event: DecidingEventSchema.optional(),
  code: z.string().optional().describe('refused: the code the router recorded (run_not_stopped, stop_already_answered, stale_answer, run_not_held...)'),
  message: z.string().optional(),
  run: RunViewSchema.nullable().optional(),
  mesh: MeshSummarySchema.nullable().optional(),
});

/** A handback decision or an abandon the ledger applied: the handoff after it, and the events this request stored (0: a retry). */
/** `{ <id>: <name> }`: the name of each webhook a reply names by id. */
export const WebhookNamesSchema = z
  .record(z.string(), z.string())
  .describe('the name of each webhook the reply names by id (`{ <id>: <name> }`): its configured `name`, or one derived from its URL');

/** `POST /v1/projects/:project/notices/:notice_id/redeliver`: what a redelivery did. */
export const NoticeRedeliveryReplySchema = z.object({
  outcome: z.enum(['delivered', 'already_delivered']).describe('already_delivered: every webhook serving the project had taken it; none was called'),
  project: z.string(),
  notice_id: z.string(),
  delivered: z.array(z.string()).describe('webhooks (by id: a hash of the URL) that answered 2xx to this request'),
  skipped: z.array(z.string()).describe('webhooks that had taken it before (delivery marks are kept 30 days): not called'),
  webhook_names: WebhookNamesSchema,
});

/** When, and for which notice of the project, something happened to a webhook's deliveries. */
const WebhookEventSchema = z.object({ at: z.string().describe('ISO time'), notice_id: z.string() });

/** One webhook serving a project, with what its deliveries of the project's notices did. */
export const WebhookStatusSchema = z.object({
  id: z.string().describe('the first 16 hex digits of the SHA-256 of its URL: the key of its delivery marks and status (never the URL: it may hold a secret)'),
  name: z.string().describe('its configured `name`, or one derived from its URL (host and path, each segment that may be a secret shown as `***`)'),
  state: z
    .enum(['ok', 'failing', 'unknown'])
    .describe('failing: a failure since its last success (`failing_since`); ok: its last call took the notice; unknown: no call recorded yet'),
  last_success: WebhookEventSchema.nullable().describe('its last 2xx for a notice of the project'),
  last_failure: WebhookEventSchema.extend({
    reason: z
      .enum(WEBHOOK_FAILURE_REASONS.map((r) => r.code) as [WebhookFailureReason, ...WebhookFailureReason[]])
      .describe('why, a stable code (docs/errors.md)'),
    error: z.string().describe('what happened: `HTTP 503`, `connect ECONNREFUSED 10.0.0.7:443`…'),
    status: z.number().int().optional().describe('`http_status`: the status it answered'),
  })
    .nullable()
    .describe('its last failed call for a notice of the project (a call retried later counts each time)'),
  failing_since: z.string().nullable().describe('the first failure since its last success (ISO); null while it is not failing'),
  dead_lettered: z
    .number()
    .int()
    .describe("the project's notices it never took in NOTIFIER_WEBHOOK_MAX_ATTEMPTS deliveries (dead-lettered; send them again with the redeliver route)"),
  last_dead_lettered: WebhookEventSchema.nullable(),
});

/** `GET /v1/projects/:project/webhooks`: the webhooks serving the project, in configuration order. */
export const ProjectWebhooksSchema = z.object({ project: z.string(), webhooks: z.array(WebhookStatusSchema) });

export const DecisionResponseSchema = z.object({ outcome: z.literal('applied'), handoff: HandoffRecordSchema, events: z.number().int() });

/** A rebuild as `GET /v1/projections` shows it (`RebuildView`); a scoped caller gets it without the stream counters. */
const RebuildViewSchema = z.object({
  generation: z.number().int(),
  kind: z.enum(['rebuild', 'scratch']).describe('rebuild: a shadow that will be swapped in; scratch: a comparison (baton verify, a dry run)'),
  by: z.string(),
  started_at: z.string(),
  updated_at: z.string(),
  phase: z.enum(['replay', 'catch_up']),
  seq: z.number().int().optional().describe('the last stream sequence written into the shadow (callers that see every project)'),
  target_seq: z.number().int().nullable().optional(),
  events: z.number().int().optional(),
  total_events: z.number().int().nullable().optional(),
  percent: z.number().nullable(),
  rate: z.number().optional().describe('events per second (callers that see every project)'),
  eta_seconds: z.number().nullable(),
  stale: z.boolean().describe('its lease ran out: the process died; the next rebuild deletes its shadow'),
});

/** One projection as `GET /v1/projections` shows it (`ProjectionView`, or the scoped cut). */
const ProjectionViewSchema = z.object({
  name: z.string(),
  version: z.number().int(),
  active_generation: z.number().int().nullable(),
  stored_version: z.number().int().nullable(),
  needs_rebuild: z.boolean(),
  rebuilding: z.boolean(),
  rebuilds: z.array(RebuildViewSchema),
  last_seq: z.number().int().optional().describe('the last stream sequence it applied (callers that see every project)'),
  behind_by: z.number().int().nullable().optional().describe('stream events not applied yet (callers that see every project)'),
  behind: z.boolean().nullable().optional().describe('whether it is behind the stream (callers scoped to some projects)'),
  behind_reason: z
    .enum(['redis_full'])
    .nullable()
    .describe(
      'why it is behind: `redis_full` while Redis refuses the projections` writes (maxmemory reached; its events wait until Redis has room); null when not behind or nothing holds it back',
    ),
});

/** Whether Redis refuses the projections' writes for being full (`GET /v1/projections` `redis`, `/health/ready` `details.redis`). */
const RedisFullSchema = z.object({
  full: z
    .boolean()
    .describe('true while Redis refuses the projections` writes (maxmemory reached under noeviction), from the first refusal until a write goes through'),
  since: z.string().nullable().describe('the first refusal (ISO 8601); null when not full'),
  refused: z.number().int().describe('writes refused since then (0 when not full)'),
});

/** Set while the notifier stands back from projections a newer release of it built (`GET /v1/projections`, `/health/ready`). */
const StandingBackSchema = z
  .object({
    reason: z.literal('newer_release'),
    since: z.string().describe('when this notifier began to stand back (ISO 8601)'),
    projections: z.array(
      z.object({
        projection: z.string(),
        version: z.number().int().describe('this notifier`s definition version'),
        stored_version: z.number().int().describe('the (higher) version that built the active generation'),
      }),
    ),
  })
  .nullable()
  .describe(
    'non-null while this notifier stands back: a newer release of the notifier built these projections, so this one applies, rebuilds and publishes nothing and is not ready (checks.projection_versions false) until it is upgraded or the projections are rebuilt to its version',
  );

/** `GET /v1/projections`: the full report (callers that see every project) or the scoped one (`counters: "hidden"`). */
export const ProjectionsResponseSchema = z.union([
  z.object({
    stream: z.object({ name: z.string(), last_seq: z.number().int(), messages: z.number().int() }).nullable(),
    rebuilding: z.boolean(),
    redis: RedisFullSchema,
    standing_back: StandingBackSchema,
    projections: z.array(ProjectionViewSchema),
  }),
  z.object({
    counters: z.literal('hidden'),
    rebuilding: z.boolean(),
    redis: RedisFullSchema,
    standing_back: StandingBackSchema,
    projections: z.array(ProjectionViewSchema),
  }),
]);

/** `GET /health/live`: the process answers. */
export const HealthLiveSchema = z.object({ status: z.literal('ok') });

/** The notifier's readiness details: per projection whether it is behind and its running rebuild, never the stream's counters (no token is asked). */
const ProjectionReadinessSchema = z.object({
  rebuilding: z.boolean(),
  standing_back: StandingBackSchema,
  projections: z.record(
    z.string(),
    z.object({
      behind: z.boolean().nullable().describe('whether it is behind the stream (null: not known)'),
      rebuilding: z
        .object({
          generation: z.number().int().describe('the generation being built: the figures are that rebuild`s'),
          by: z.string().describe('the instance that runs it (a notifier`s BATON_INSTANCE, `baton replay`…)'),
          this_instance: z.boolean().describe('whether the notifier answering runs it'),
          percent: z.number().nullable(),
          eta_seconds: z.number().nullable(),
        })
        .nullable()
        .describe('its running rebuild: this notifier`s own, else the oldest another instance runs (lowest generation); null when none runs'),
    }),
  ),
});

/** Every service's readiness detail `storage`: whether a storage limit refuses its publishes (never a failed check: docs/sre.md, Health). */
const StorageReadinessSchema = z.object({
  full: z.boolean().describe('true while a storage limit refuses this service`s JetStream publishes (from the first refusal until one is stored again)'),
  conditions: z.array(
    z.object({
      limit: z.enum(['stream_bytes', 'stream_messages', 'account_storage']),
      stream: z.string().nullable().describe('the stream whose limit refuses (null: the account`s storage)'),
      since: z.string().describe('the first refusal (ISO 8601)'),
      refused: z.number().int().describe('publishes refused since then'),
      last_subject: z.string(),
    }),
  ),
});

/** `GET /health/ready` (200 ready, 503 not ready: the failed check is `false`). */
export const HealthReadySchema = z.object({
  status: z.enum(['ready', 'not_ready']),
  checks: z
    .record(z.string(), z.boolean())
    .describe(
      'nats, jetstream, redis: whether each answered (jetstream: its API answered, so a cluster has a leader); the notifier adds revocations (its token revocation log can be read) and projection_versions (false while it stands back from projections a newer release built)',
    ),
  details: z
    .object({ storage: StorageReadinessSchema.optional(), projections: ProjectionReadinessSchema.optional(), redis: RedisFullSchema.optional() })
    .optional(),
});
