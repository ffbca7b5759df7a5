import { z } from 'zod';
import { EvidenceSchema } from './agent-result';
import { AgentNameSchema, IdSchema, IsoTimeSchema, Limits, ProjectIdSchema, ShortTextSchema, namedRecord, RecordKeySchema } from './common';
import { OnFailureSchema, OnReturnSchema, ResumeWithSchema, StepIdSchema, VariableNameSchema, WorkflowRefSchema } from './definition';
import { HumanActionNoticeSchema, PersonHandleSchema } from './notice';
import { AgentRunConfigSchema, DispatchStatusSchema } from './sentinel-schema';
import { OperatorAnswerSchema, ResumeEffectSchema, StopPacketSchema } from './stop-packet';
import { PendingToolCallSchema } from './agent-result';
import { ActorNameSchema } from './handoff';

/**
 * The workflow-run aggregate's contracts: one aggregate per workflow run, written only by the
 * router. Glossary (seed 000 vs the others): *callback* = seed 001's "parent" / "return
 * address"; *hold* = seed 003's "waiting_human" without a packet; *stop* = a hold with a stop
 * packet (seed 003).
 */

export const RunStatus = {
  running: 'running',
  held: 'held',
  stopped: 'stopped',
  completed: 'completed',
  terminated: 'terminated',
} as const;
export type RunStatus = (typeof RunStatus)[keyof typeof RunStatus];
export const RunStatusSchema = z.enum(['running', 'held', 'stopped', 'completed', 'terminated']);

// ---------------------------------------------------------------------------------------------
// The routing decision (seed 000 §3–§5)

/**
 * What the routing cascade read from an agent result. Structurally compatible with the output of
 * `parseSentinel` (`config` / `absent` / `invalid`); `source` says whether the config came from
 * the typed `decision` field (which wins) or from the body's sentinel.
 */
export const DecisionSignalSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('config'),
    source: z.enum(['typed', 'sentinel']),
    config: AgentRunConfigSchema,
  }),
  /** No typed decision and no sentinel marker in the body. */
  z.strictObject({ kind: z.literal('absent') }),
  /**
   * The decision could not be read; `diagnostic` says why. `source`: a sentinel marker in the body
   * that does not parse (also when absent: signals recorded before it was), or a typed `decision`
   * that breaks the contract's invariants or schema — either way the no-action default applies.
   */
  z.strictObject({
    kind: z.literal('invalid'),
    diagnostic: ShortTextSchema,
    code: z.string().max(80).optional(),
    source: z.enum(['typed', 'sentinel']).optional(),
  }),
]);
export type DecisionSignal = z.infer<typeof DecisionSignalSchema>;

/**
 * Which rule of the cascade decided. The first seven are seed 000 §3 (task sits at rule-1 level
 * next to function_call; explicit_dispatch is rule 2). `entry` (a run's first step) and `resume`
 * (an operator's answer) are the two routes that do not come from an agent result.
 */
export const RouteRule = {
  functionCall: 'function_call',
  task: 'task',
  explicitDispatch: 'explicit_dispatch',
  callback: 'callback',
  workflowEdge: 'workflow_edge',
  noActionDefault: 'no_action_default',
  terminal: 'terminal',
  entry: 'entry',
  resume: 'resume',
  /** A HANDOFF route fired (seed 001): returnable or permanent. */
  handoff: 'handoff',
  /** A child returned and its parent runs again (seed 001). */
  handoffReturn: 'handoff_return',
  /** A customer message is delivered to the active agent (no route fired). */
  message: 'message',
} as const;
export type RouteRule = (typeof RouteRule)[keyof typeof RouteRule];
export const RouteRuleSchema = z.enum([
  'function_call',
  'task',
  'explicit_dispatch',
  'callback',
  'workflow_edge',
  'no_action_default',
  'terminal',
  'entry',
  'resume',
  'handoff',
  'handoff_return',
  'message',
]);

/**
 * Who made the dispatch decision: the agent, or the engine synthesising a fallback (seed 000 §5
 * provenance). `human` marks an operator's answer that re-entered the router.
 */
export const DispatchOriginSchema = z.enum(['agent', 'engine_fallback', 'human']);
export type DispatchOrigin = z.infer<typeof DispatchOriginSchema>;

/** The Dispatch as resolved: status, reason (null when the agent gave none) and provenance. */
export const ResolvedDispatchSchema = z.strictObject({
  status: DispatchStatusSchema,
  reason: ShortTextSchema.nullable(),
  origin: DispatchOriginSchema,
});
export type ResolvedDispatch = z.infer<typeof ResolvedDispatchSchema>;

/**
 * Where control goes: an agent and the workflow step it runs under. An agent reached through a
 * function_call (or a callback return) runs under the step that was current (it is a sub-call of
 * that step), so `step` is always a step of the run's workflow.
 */
export const RouteTargetSchema = z.strictObject({ agent: AgentNameSchema, step: StepIdSchema });
export type RouteTarget = z.infer<typeof RouteTargetSchema>;

export const HoldKindSchema = z.enum(['human_gate', 'hold']);
export type HoldKind = z.infer<typeof HoldKindSchema>;

const routeBase = {
  rule: RouteRuleSchema,
  dispatch: ResolvedDispatchSchema,
  /** The run's callback (return address) after this transition. */
  callback_after: AgentNameSchema.nullable(),
};

/**
 * The router's decision, one per agent result (or start / resume):
 * - `dispatch`: run `target` next (a new handoff);
 * - `hold`: stop for a human, no packet; `pending_target` is where an operator's *continue* goes;
 * - `terminate`: the agent ended the run;
 * - `complete`: a terminal step finished; the workflow is done;
 * - `unresolved`: the result named a target that does not exist (becomes an unknown_intent stop).
 */
export const RouteDecisionSchema = z.discriminatedUnion('outcome', [
  z.strictObject({ ...routeBase, outcome: z.literal('dispatch'), target: RouteTargetSchema }),
  z.strictObject({
    ...routeBase,
    outcome: z.literal('hold'),
    hold_kind: HoldKindSchema,
    pending_target: RouteTargetSchema.nullable(),
  }),
  z.strictObject({ ...routeBase, outcome: z.literal('terminate') }),
  z.strictObject({ ...routeBase, outcome: z.literal('complete') }),
  z.strictObject({
    ...routeBase,
    outcome: z.literal('unresolved'),
    requested: z.string().min(1).max(Limits.maxIdLength),
    problem: ShortTextSchema,
  }),
]);
export type RouteDecision = z.infer<typeof RouteDecisionSchema>;
export type RouteOutcome = RouteDecision['outcome'];

// ---------------------------------------------------------------------------------------------
// Operator answers to a held run (a hold has no stop packet; a stop answers with OperatorAnswer)

export const HoldAnswerActionSchema = z.enum(['continue', 'reroute', 'terminate']);
export type HoldAnswerAction = z.infer<typeof HoldAnswerActionSchema>;

/** What caused an outcome: the run's start, an agent result, an operator answer or an outside stop (its id). */
export const RouteCauseSchema = z.strictObject({
  kind: z.enum(['start', 'result', 'resume', 'stop', 'message', 'handoff_failed']),
  id: IdSchema,
});
export type RouteCause = z.infer<typeof RouteCauseSchema>;

/**
 * An operator's answer to a hold. `continue` follows the hold's pending target (the gated edge,
 * or the workflow edge a no-action hold did not take); `reroute` names a step, agent or role
 * (resolved like `task`); `terminate` ends the run. `answer_id` is the idempotency key.
 */
export const HoldAnswerSchema = z
  .strictObject({
    answer_id: IdSchema,
    action: HoldAnswerActionSchema,
    target: z.string().min(1).max(Limits.maxIdLength).optional(),
    note: ShortTextSchema.optional(),
    /**
     * The cause of the hold this answer was made for (`run.held`'s `cause`, on the hold's inbox item
     * and the run view): when the run is held again since, by another cause, the answer is refused
     * `stale_answer` instead of answering a hold its author never saw. Optional (no check without it).
     */
    hold_cause: RouteCauseSchema.optional(),
    answered_by: z.string().min(1).max(200),
    answered_at: IsoTimeSchema,
  })
  .superRefine((answer, ctx) => {
    if (answer.action === 'reroute' && answer.target === undefined) {
      ctx.addIssue({ code: 'custom', path: ['target'], message: 'a reroute answer names a step, agent or role' });
    }
  })
  .meta({ if: { properties: { action: { const: 'reroute' } }, required: ['action'] }, then: { required: ['target'] } });
export type HoldAnswer = z.infer<typeof HoldAnswerSchema>;

/** The answer carried by a `resume` command: to a hold, or to the open stop packet. */
export const RunAnswerSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('hold_answer'), answer: HoldAnswerSchema }),
  z.strictObject({ kind: z.literal('stop_answer'), answer: OperatorAnswerSchema }),
]);
export type RunAnswer = z.infer<typeof RunAnswerSchema>;

// ---------------------------------------------------------------------------------------------
// Events

/** The people a run can notify, captured when it starts (seed 000 §5 fallback order). */
export const RunPeopleSchema = z.strictObject({
  started_by: PersonHandleSchema.nullable(),
  issue_author: PersonHandleSchema.nullable(),
  trigger_author: PersonHandleSchema.nullable(),
});
export type RunPeople = z.infer<typeof RunPeopleSchema>;

export const VariablesSchema = namedRecord(RecordKeySchema.max(200), z.unknown());

/** The most declared variable names `run.started` records. */
export const MAX_DECLARED_VARIABLES = 5000;

export const RunStartedSchema = z.strictObject({
  /** The digest of the published definition the run is pinned to (its routes never change mid-run). */
  definition_digest: z.string().min(1).max(128).optional(),
  workflow_run_id: IdSchema,
  project: ProjectIdSchema,
  workflow: WorkflowRefSchema,
  /** The workflow's entry step and its agent: who runs first. */
  entry: RouteTargetSchema,
  people: RunPeopleSchema,
  variables: VariablesSchema,
  /**
   * The session variables the run's definition declares: every MEMORY variable and GATHER field
   * of its agents, sorted (at most {@link MAX_DECLARED_VARIABLES}). Any other variable the run
   * holds is implicit: the start's `input`, start variables and values results or returns set
   * that no agent declares. Absent on runs started before it was recorded (then nothing is known
   * to be declared).
   */
  declared_variables: z.array(VariableNameSchema).max(MAX_DECLARED_VARIABLES).optional(),
  started_at: IsoTimeSchema,
});

export const RunResultRecordedSchema = z.strictObject({
  result_id: IdSchema,
  /** The agent run that produced the result. */
  run_id: IdSchema,
  agent: AgentNameSchema,
  step: StepIdSchema,
  signal: DecisionSignalSchema,
  /** Session variables the agent set; merged over the run's variables. */
  variables: VariablesSchema.optional(),
  /** The agent's evidence, carried to the ledger when the result closes its handoff. */
  evidence: EvidenceSchema.optional(),
  /**
   * The handoff the result answered and the claim it was accepted under (docs/runs.md rule 3a), when
   * the run was on a handoff: the watchdog holds back its requeue of that claim, and the ledger
   * voids a lapse of it recorded after the decision (docs/handoffs.md rule 4a). Absent on results
   * recorded before they were kept.
   */
  handoff_id: IdSchema.optional(),
  claim_id: IdSchema.optional(),
  /**
   * What the agent said this turn, as posted: its body with every sentinel it wrote removed and
   * exactly one canonical `AGENT_RUN_CONFIG` sentinel appended for the decision taken (none when it
   * took none), capped at `Limits.maxPostedBodyChars` (the decision line is always kept).
   */
  posted_body: z
    .string()
    .max(Limits.maxPostedBodyChars + 4096)
    .optional(),
  /** True when the posted body was cut to the cap. */
  posted_body_truncated: z.boolean().optional(),
  /**
   * The call the agent reported pending with this result. A stop (or the agent's own hold) freezes
   * it in its packet for a person; a decision to go on (advance, task, a call, loop) freezes
   * nothing — the call stays the agent's to make — and this is where it is kept. Absent on results
   * recorded before it was kept.
   */
  pending_tool_call: PendingToolCallSchema.optional(),
  recorded_at: IsoTimeSchema,
});

/** Evidence of a callee larger than this (as JSON) is left out of its caller's `context.returned`. */
export const MAX_RETURNED_EVIDENCE_CHARS = Limits.maxPostedBodyChars;

/**
 * The callee's answer, as the handoff the router creates for its caller carries it
 * (`context.returned`, docs/returnable-handoffs.md "The caller reads the callee's answer"): when
 * control comes back to the caller after the callee's result — a call's return address (rule
 * `callback`), the no-action default returning to the caller (`no_action_default`), a returnable
 * child's return replayed to its waiting parent (`message` caused by the child's result), or the
 * parent's first turn after a return that left it waiting for the customer (`message` caused by
 * the customer's message: ON_RETURN `continue`…) — the caller re-enters with the report (seed 000
 * §5) and decides. Taken from the callee's
 * `run.result_recorded`: `body` is its posted body without the decision's sentinel (null when the
 * callee wrote no text), cut as the run cuts it (`Limits.maxPostedBodyChars`, the cut marked in
 * the text) with `body_truncated` saying so; its `evidence` when that is at most
 * {@link MAX_RETURNED_EVIDENCE_CHARS} characters as JSON, else `evidence_omitted` says how large it
 * was. Baton writes it and a client reads it: a newer Baton may add optional fields.
 */
export const ReturnedAnswerSchema = z.strictObject({
  /** The callee: the agent whose result this is. */
  from_agent: AgentNameSchema,
  /** The step the callee ran under. */
  step: StepIdSchema,
  /** The callee's result (`run.result_recorded.result_id`; the route's `cause.id` when the route is the return itself). */
  result_id: IdSchema,
  /** What the callee said: its body, without the decision's sentinel; null when it wrote no text. */
  body: z
    .string()
    .max(Limits.maxPostedBodyChars + 4096)
    .nullable(),
  /** True when `body` was cut to `Limits.maxPostedBodyChars` characters (the cut is marked at its end). */
  body_truncated: z.boolean(),
  /** The callee's evidence (tests run, artifacts, work product), when it sent some that fits. */
  evidence: EvidenceSchema.optional(),
  /** Set instead of `evidence` when the callee's evidence was too large to carry: its size. */
  evidence_omitted: ShortTextSchema.optional(),
});
export type ReturnedAnswer = z.infer<typeof ReturnedAnswerSchema>;

/**
 * "Dispatch this agent next." `handoff_id` is derived deterministically from the cause id, so the
 * router's request to the ledger is idempotent across redeliveries.
 */
export const RunRoutedSchema = z.strictObject({
  decision: RouteDecisionSchema,
  target: RouteTargetSchema,
  from: RouteTargetSchema.nullable(),
  handoff_id: IdSchema,
  hop: z.number().int().min(1),
  cause: RouteCauseSchema,
  /** An operator approved this frozen call: the target runs exactly it, once. */
  approved_call: PendingToolCallSchema.optional(),
  /** An operator raised the cap the run stopped on. */
  raised_cap: z.number().finite().positive().optional(),
  /**
   * A call the run's last agent left pending, handed on so it is never dropped — never an approval:
   * the target makes it again, or not. With `raised_cap`: the call the agent was making when the cap
   * stopped it (the packet's frozen call); after a person sent a stopped run on by intent, or
   * continued / rerouted a hold whose result had a call pending (`run.held.pending_call`); and on a
   * callee's return to its caller when the callee gave no decision Baton could read.
   */
  pending_call: PendingToolCallSchema.optional(),
  /** Conversation runs (seed 001): the customer message and exactly the context the target receives. */
  conversation: z.lazy(() => ConversationTurnSchema).optional(),
  routed_at: IsoTimeSchema,
});

export const RunHeldSchema = z.strictObject({
  decision: RouteDecisionSchema,
  hold_kind: HoldKindSchema,
  reason: ShortTextSchema,
  pending_target: RouteTargetSchema.nullable(),
  agent: AgentNameSchema,
  step: StepIdSchema,
  cause: RouteCauseSchema,
  /**
   * The call the result that led here left pending, when it went on rather than holding with it (a
   * human gate after an advance, an advance with nowhere to go): the person answering the hold
   * sees it, and a continue or reroute hands it on as `run.routed.pending_call` (not approved).
   */
  pending_call: PendingToolCallSchema.optional(),
  held_at: IsoTimeSchema,
});

/**
 * The escalated handoff a stop from outside was asked for (the watchdog's `handoff_escalated` stop
 * request): its project (the target project of a cross-project handoff) and id, and the consult
 * its project's lead was given, when there was a lead.
 */
export const StopEscalationSchema = z.strictObject({
  project: ProjectIdSchema,
  handoff_id: IdSchema,
  consult_handoff_id: IdSchema.optional(),
});
export type StopEscalation = z.infer<typeof StopEscalationSchema>;

export const RunStoppedSchema = z.strictObject({
  packet: StopPacketSchema,
  /** Who asked for the stop: the agent's own stop signal, the router, or an outside service. */
  source: z.enum(['agent', 'router', 'external']),
  cause: RouteCauseSchema,
  stopped_at: IsoTimeSchema,
  /**
   * The routing decision this stop records: the router's `unresolved` decision (source `router`,
   * why `unknown_intent`: what the result asked for, `requested`, why it names nothing, `problem`,
   * and the engine's fallback hold, `origin: engine_fallback`, reason `unresolved target: …`), or
   * the hold that froze a pending call in a `policy` stop — the agent's own (source `agent`) or the
   * no-action default (source `router`, `origin: engine_fallback`). Absent on other stops, and on
   * stops stored before it was recorded.
   */
  decision: RouteDecisionSchema.optional(),
  /**
   * The escalated handoff this stop was asked for (source `external`, why `guard_failed`). With no
   * consult, the stop takes over the escalation's inbox item. Absent on other stops, and on stops
   * stored before it was recorded.
   */
  escalation: StopEscalationSchema.optional(),
  /**
   * The person the admin connection said it stopped the run for (the stop request's `requested_by`,
   * other than `admin`): a claim recorded beside the actor, which is `admin` — never as it. Absent on
   * other stops, and on stops stored before it was recorded (their actor is the name the request gave).
   */
  on_behalf_of: ActorNameSchema.optional(),
});

export const RunResumedSchema = z.strictObject({
  answer_id: IdSchema,
  answered_by: z.string().min(1).max(200),
  /** The hold or stop packet the answer closed, with the answer (and, for a stop, its effect). */
  from: z.discriminatedUnion('kind', [
    z.strictObject({ kind: z.literal('hold'), hold_kind: HoldKindSchema, answer: HoldAnswerSchema }),
    z.strictObject({ kind: z.literal('stop'), packet_id: IdSchema, answer: OperatorAnswerSchema, effect: ResumeEffectSchema }),
  ]),
  resumed_at: IsoTimeSchema,
});

export const RunCompletedSchema = z.strictObject({
  decision: RouteDecisionSchema,
  agent: AgentNameSchema,
  step: StepIdSchema,
  completed_at: IsoTimeSchema,
});

export const RunTerminatedSchema = z.strictObject({
  reason: ShortTextSchema,
  origin: DispatchOriginSchema.or(z.literal('operator')),
  decision: RouteDecisionSchema.optional(),
  terminated_at: IsoTimeSchema,
});

/** A result the run refused (wrong agent, finished run...), recorded for the run's history. */
/**
 * What a `run.result_rejected` refused: an agent's result (`result_id` its result id), an operator's
 * answer (its answer id) or a customer's message (its message id). Each kind's ids are apart, so a
 * message never spends a result's id. Absent on events stored before it was recorded: a result,
 * unless `agent` is `customer` (a message).
 */
export const RefusedKindSchema = z.enum(['result', 'answer', 'message']);
export type RefusedKind = z.infer<typeof RefusedKindSchema>;

export const RunResultRejectedSchema = z.strictObject({
  result_id: IdSchema,
  agent: AgentNameSchema,
  code: z.string().min(1).max(80),
  message: ShortTextSchema,
  rejected_at: IsoTimeSchema,
  refused: RefusedKindSchema.optional(),
  /**
   * The handoff and claim a refused agent result named (absent when it named none, and on events
   * stored before they were recorded): the loop guards count a result refused under a claim whose
   * lapse or failure they already counted only once.
   */
  handoff_id: IdSchema.optional(),
  claim_id: IdSchema.optional(),
});

export const RunNoticeEmittedSchema = z.strictObject({
  notice: HumanActionNoticeSchema,
});

// ---------------------------------------------------------------------------------------------
// Conversations and returnable handoffs (seed 001). The trace events use the seed's field names
// (`returnExpected`, `reasonCode`, `mappedFields`, `durationMs`...) so a trace reads like the seed.

export const TranscriptEntrySchema = z.strictObject({
  role: z.enum(['customer', 'agent']),
  agent: AgentNameSchema.nullable(),
  text: ShortTextSchema,
});
export type TranscriptEntry = z.infer<typeof TranscriptEntrySchema>;

/** HISTORY as resolved for one handoff (`auto` already decided). */
export const ResolvedHistoryModeSchema = z.enum(['full', 'none', 'summary_only', 'last_n']);

/** Exactly what a handoff's target receives: SUMMARY, the HISTORY slice and the PASS variables. */
export const HandoffContextSchema = z.strictObject({
  summary: ShortTextSchema.nullable(),
  history_mode: ResolvedHistoryModeSchema,
  history: z.array(TranscriptEntrySchema).max(Limits.maxListItems),
  passed: z.array(z.string().max(200)).max(Limits.maxListItems),
});
export type HandoffContext = z.infer<typeof HandoffContextSchema>;

/** The conversation part of a `run.routed`: what the target works on and sees. */
export const ConversationTurnSchema = z.strictObject({
  /** The customer message the target handles (null when it runs without one). */
  message: ShortTextSchema.nullable(),
  /** The variables the target sees (its scope: a child sees PASS plus what it set itself). */
  variables: VariablesSchema,
  handoff: HandoffContextSchema.optional(),
});
export type ConversationTurn = z.infer<typeof ConversationTurnSchema>;

/** A customer turn: a run start's `input` or a `SessionMessage`. */
export const RunMessageReceivedSchema = z.strictObject({
  message_id: IdSchema,
  text: ShortTextSchema,
  /** The active agent when the message arrived (for a queued message: when it was delivered). */
  agent: AgentNameSchema,
  /** Set when the message waited in the run's queue (`run.message_queued`): when it was queued. */
  queued_at: IsoTimeSchema.optional(),
  received_at: IsoTimeSchema,
  /** Who sent it (the SessionMessage's `sent_by`), when given: data about the customer, never the actor. */
  sent_by: PersonHandleSchema.optional(),
  /**
   * The agent that relayed the customer's message, from its subject (`…message.<agent>`, which only
   * that agent's credentials allow); absent for the project's shared `…message` subject.
   */
  relayed_by: AgentNameSchema.optional(),
});

/**
 * A customer message that arrived while the active agent of a running conversation was working
 * (not waiting for the customer): kept, in arrival order, and delivered as a `run.message_received`
 * the next time the run waits for the customer. Idempotent on `message_id`.
 */
export const RunMessageQueuedSchema = z.strictObject({
  message_id: IdSchema,
  text: ShortTextSchema,
  /** Who sent it (the SessionMessage's `sent_by`), when given. */
  sent_by: PersonHandleSchema.optional(),
  /** The agent that relayed it (`…message.<agent>`), as on `run.message_received`. */
  relayed_by: AgentNameSchema.optional(),
  /** The agent that was working when the message arrived. */
  agent: AgentNameSchema,
  /** How many messages wait after this one was added (1 … MAX_QUEUED_MESSAGES). */
  position: z.number().int().min(1),
  queued_at: IsoTimeSchema,
});

/** The active agent answered and waits for the customer's next message. */
export const RunAwaitingInputSchema = z.strictObject({
  agent: AgentNameSchema,
  step: StepIdSchema,
  /** What the customer is told (the agent's reply, a COMPLETE/handler RESPOND, an ON_FAILURE RESPOND). */
  reply: ShortTextSchema.nullable(),
  note: ShortTextSchema.optional(),
  at: IsoTimeSchema,
});

export const HandoffReasonCodeSchema = z.enum(['handoff_return_expected', 'handoff_permanent']);

export const RunHandoffSchema = z.strictObject({
  handoffId: IdSchema,
  from: AgentNameSchema,
  to: AgentNameSchema,
  step: StepIdSchema,
  returnExpected: z.boolean(),
  reasonCode: HandoffReasonCodeSchema,
  /** Index of the route in the caller's HANDOFF list. */
  route: z.number().int().min(0),
  /** Why the route fired: its WHEN held, or the agent chose it (an intent route). */
  trigger: z.enum(['when', 'agent']),
  /** The customer message that caused the handoff (original_handoff_utterance). */
  message: ShortTextSchema.nullable(),
  /** 0 for a real customer message, 1 for a replayed one (resume_intent). */
  replayDepth: z.number().int().min(0),
  context: HandoffContextSchema,
  /** The child's starting scope: the PASS variables. */
  passedVariables: VariablesSchema,
  onReturn: OnReturnSchema.nullable(),
  onFailure: OnFailureSchema,
  at: IsoTimeSchema,
});

export const ReturnPathSchema = z.enum(['complete', 'return_action', 'hand_back']);

export const RunHandoffReturnHandlerSchema = z.strictObject({
  handoffId: IdSchema,
  parent: AgentNameSchema,
  child: AgentNameSchema,
  path: ReturnPathSchema,
  action: z.enum(['continue', 'resume_intent']),
  handler: z.string().max(200).nullable(),
  /** The child fields copied to the parent (only mapped fields with a value). */
  mappedFields: z.array(z.string().max(200)),
  /** Mapped child fields that had no value (skipped). */
  skippedFields: z.array(z.string().max(200)),
  setFields: z.array(z.string().max(200)),
  /** The parent-scope writes (MAP then SET); empty when `applied` is false. */
  writes: VariablesSchema,
  /** False when a target was not writable: no effect applied (see run.memory_error). */
  applied: z.boolean(),
  respond: ShortTextSchema.nullable(),
  forwardedMessage: ShortTextSchema.nullable(),
  at: IsoTimeSchema,
});

export const RunResumeIntentSchema = z.strictObject({
  parent: AgentNameSchema,
  resumeWith: ResumeWithSchema,
  message: ShortTextSchema.nullable(),
  reasonCode: z.enum(['resume_intent', 'resume_intent_depth_limit', 'resume_intent_no_message']),
  depth: z.number().int().min(0),
  /**
   * A replay (`reasonCode: resume_intent`) after a COMPLETE whose RESPOND said something: what the
   * customer is told before the replayed message is routed (the run's transcript keeps it, from
   * `replyFrom`, the child). Absent when there was nothing to say; without a replay the RESPOND is
   * the reply of the parent's `run.awaiting_input`.
   */
  reply: ShortTextSchema.optional(),
  replyFrom: AgentNameSchema.optional(),
  at: IsoTimeSchema,
});

export const HandoffOutcomeSchema = z.enum(['success', 'rejected', 'blocked', 'error', 'timeout']);
export type HandoffOutcome = z.infer<typeof HandoffOutcomeSchema>;

export const RunHandoffCompletedSchema = z.strictObject({
  /** The handoff (null for a route that was refused or blocked before one existed). */
  handoffId: IdSchema.nullable(),
  from: AgentNameSchema,
  to: AgentNameSchema,
  route: z.number().int().min(0).nullable(),
  outcome: HandoffOutcomeSchema,
  durationMs: z.number().int().min(0),
  /** On a failure: what happened (`recursion`, `when_false`, `target_disabled`, `authentication_required`, `create_refused`...). */
  cause: z.string().max(200).optional(),
  /** On a failure: the stable code (`recursion`, `target_waiting_for_input`, `handoff_condition_check`, `auth_profile`, the ledger's code...). */
  code: z.string().max(200).optional(),
  /**
   * Set when customer messages were queued (`run.message_queued`) during the attempt (an attempt
   * is a handoff with an id: outcome success, error or timeout): the sum, over those messages, of
   * the ms each spent in the queue between the handoff (or its queueing, if later) and this
   * completion. Nothing runs beside the attempt — the messages wait — and durationMs (handoff →
   * result / failure, wall time) does not change; with several messages the sum can exceed it.
   */
  siblingIntentMs: z.number().int().min(0).optional(),
  /** The ON_FAILURE policy applied (error and timeout outcomes). */
  onFailure: z.enum(['continue', 'escalate', 'respond']).optional(),
  at: IsoTimeSchema,
});

export const RunMemoryErrorSchema = z.strictObject({
  handoffId: IdSchema,
  parent: AgentNameSchema,
  child: AgentNameSchema,
  /** The MAP / SET targets the parent may not write. */
  targets: z.array(z.string().max(200)).min(1),
  message: ShortTextSchema,
  at: IsoTimeSchema,
});

export const RunEventSchemas = {
  'run.started': RunStartedSchema,
  'run.result_recorded': RunResultRecordedSchema,
  'run.routed': RunRoutedSchema,
  'run.held': RunHeldSchema,
  'run.stopped': RunStoppedSchema,
  'run.resumed': RunResumedSchema,
  'run.completed': RunCompletedSchema,
  'run.terminated': RunTerminatedSchema,
  'run.result_rejected': RunResultRejectedSchema,
  'run.notice_emitted': RunNoticeEmittedSchema,
  'run.message_received': RunMessageReceivedSchema,
  'run.message_queued': RunMessageQueuedSchema,
  'run.awaiting_input': RunAwaitingInputSchema,
  'run.handoff': RunHandoffSchema,
  'run.handoff_return_handler': RunHandoffReturnHandlerSchema,
  'run.resume_intent': RunResumeIntentSchema,
  'run.handoff_completed': RunHandoffCompletedSchema,
  'run.memory_error': RunMemoryErrorSchema,
} as const;
export type RunEventType = keyof typeof RunEventSchemas;
