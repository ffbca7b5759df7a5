import type {
  AgentDefinition,
  CompleteFromResultCommandSchema,
  CreateHandoffCommandSchema,
  DecisionSignal,
  ExecutionSettings,
  ReturnedAnswer,
  RunEventSchemas,
  WorkflowRef,
} from '@baton/contracts';
import { clipText as clip, MAX_RETURNED_EVIDENCE_CHARS, returnDeadlineMs, stripSentinels } from '@baton/contracts';
import { assertNever, renderTeamContext } from '@baton/domain';
import type { z } from 'zod';
import { ROUTER_ACTOR } from '../shared/ids';

export type RunRouted = z.infer<(typeof RunEventSchemas)['run.routed']>;
export type RunResultRecorded = z.infer<(typeof RunEventSchemas)['run.result_recorded']>;
export type CreateHandoffBody = z.input<typeof CreateHandoffCommandSchema>;
export type CompleteFromResultBody = z.input<typeof CompleteFromResultCommandSchema>;

/** Session variables larger than this (as JSON) are left out of a handoff's context. */
export const MAX_CONTEXT_VARIABLES_CHARS = 64 * 1024;

export interface HandoffRequestInput {
  project: string;
  workflowRunId: string;
  /** The `run.routed` event's id: the create's idempotency key. */
  eventId: string;
  routed: RunRouted;
  /** The run's pinned workflow (null if the run could not be read). */
  workflow: WorkflowRef | null;
  /** The project's agents, for the injected team context (roles). */
  agents: readonly AgentDefinition[];
  /** The run's session variables when it was routed. */
  variables: Readonly<Record<string, unknown>>;
  /** A returnable child handoff's deadline (see {@link returnableDeadlineAt}); absent otherwise. */
  deadlineAt?: string | null;
  /** A returnable child handoff's parent (see {@link returnableParent}): its caller and return address. */
  returnableParent?: string | null;
  /**
   * The callee's `run.result_recorded` when `routed` gives control back to its caller
   * ({@link answerLookup}): its answer goes into the caller's `context.returned`. Used only when the
   * route carries an answer, and — when it is the route's cause — only that result (same result id).
   */
  answer?: RunResultRecorded | null;
}

/**
 * True when `routed` brings control back to a caller after its callee's result, so that the
 * caller's handoff carries the callee's answer (`context.returned`): a call's return address (rule
 * `callback`), the no-action default returning to the caller (`no_action_default`; a route of that
 * rule is always a return: without a return address it holds), and a returnable child's return
 * replayed to its waiting parent (`message` caused by a result: a customer message delivered
 * otherwise has a `start` or `message` cause). Pure.
 */
export function returnsToCaller(routed: RunRouted): boolean {
  if (routed.cause.kind !== 'result') return false;
  const rule = routed.decision.rule;
  return rule === 'callback' || rule === 'no_action_default' || rule === 'message';
}

/**
 * Where the callee's answer that `routed` carries back to its caller is found; null when the route
 * gives control back to no caller (docs/returnable-handoffs.md "The caller reads the callee's
 * answer"). Pure.
 *
 * - `cause`: the route itself brings control back after the callee's result, its cause
 *   ({@link returnsToCaller}): that result.
 * - `continued`: a customer message comes to an agent that can wait for a returnable child (one of
 *   its routes returns) and the agent gets it itself (rule `message`): when this is its first turn
 *   since a child's return let it wait for the customer (ON_RETURN `continue`, a replay with no
 *   message or past its depth, a `memory_error`), the returning child's result
 *   ({@link answerScan}). The read back is only asked for an agent that can be a waiting parent.
 */
export type AnswerLookup = { kind: 'cause'; resultId: string } | { kind: 'continued'; parent: string };

export function answerLookup(routed: RunRouted, agents: readonly AgentDefinition[]): AnswerLookup | null {
  if (returnsToCaller(routed)) return { kind: 'cause', resultId: routed.cause.id };
  if (routed.decision.rule !== 'message' || routed.cause.kind !== 'message') return null;
  const parent = routed.target.agent;
  const canWait = agents.find((agent) => agent.name === parent)?.handoffs?.some((route) => route.return) === true;
  return canWait ? { kind: 'continued', parent } : null;
}

/** One of the run's events as a look-back reads it (`StoredEvent` fits). */
export interface LookBackEvent {
  type: string;
  payload: unknown;
}

/** What one step of a look-back says: the answer is found, read on (older events), or there is none. */
export type LookBackVerdict = { found: RunResultRecorded } | 'older' | 'none';

/**
 * The look-back that finds the answer `lookup` names, fed the run's events before the route,
 * newest first (one call per event; it keeps its place between calls). Pure apart from that place.
 *
 * - `cause`: the `run.result_recorded` of that result id.
 * - `continued`: the route's message follows a `run.awaiting_input` of the parent (the events of
 *   the message's own command between: `run.message_received`, refused or blocked routes); that
 *   wait is the end of a return to the parent (`run.handoff_return_handler` naming it as parent,
 *   a `run.resume_intent` that replayed nothing between); and the return's command recorded the
 *   returning child's result before it. A wait that came from anything else (the parent's own
 *   reply, ON_FAILURE after a child that failed), or a return that no result of the child caused
 *   (a child route fired by a customer message), has no answer: `none`.
 */
export function answerScan(lookup: AnswerLookup): (event: LookBackEvent) => LookBackVerdict {
  if (lookup.kind === 'cause') {
    return (event) =>
      event.type === 'run.result_recorded' && (event.payload as RunResultRecorded).result_id === lookup.resultId
        ? { found: event.payload as RunResultRecorded }
        : 'older';
  }
  // Newest first: the turn's message, the parent's wait, the return that made it, the child's result.
  let place: 'turn' | 'wait' | 'result' = 'turn';
  let child: string | null = null;
  return (event) => {
    const payload = event.payload as Record<string, unknown>;
    switch (place) {
      case 'turn':
        if (event.type === 'run.awaiting_input') {
          if (payload['agent'] !== lookup.parent) return 'none';
          place = 'wait';
          return 'older';
        }
        return TURN_BOUNDARIES.has(event.type) ? 'none' : 'older';
      case 'wait':
        if (event.type === 'run.resume_intent') return 'older';
        if (event.type !== 'run.handoff_return_handler' || payload['parent'] !== lookup.parent) return 'none';
        child = String(payload['child']);
        place = 'result';
        return 'older';
      case 'result':
        if (event.type === 'run.result_recorded')
          return (event.payload as RunResultRecorded).agent === child ? { found: event.payload as RunResultRecorded } : 'none';
        return TURN_BOUNDARIES.has(event.type) || event.type === 'run.message_received' ? 'none' : 'older';
      default:
        return assertNever(place, 'look-back place');
    }
  };
}

/** Events that end a look-back for a continued return: another agent ran, or a return or result came in between. */
const TURN_BOUNDARIES: ReadonlySet<string> = new Set([
  'run.routed',
  'run.result_recorded',
  'run.handoff_return_handler',
  'run.resume_intent',
  'run.awaiting_input',
  'run.held',
  'run.stopped',
]);

/**
 * The callee's answer as its caller's handoff carries it (`context.returned`, `ReturnedAnswerSchema`),
 * from the callee's `run.result_recorded`: its posted body without the decision's sentinel, cut as
 * the run cut it (`posted_body_truncated`), and its evidence when it fits
 * ({@link MAX_RETURNED_EVIDENCE_CHARS}). Pure.
 */
export function returnedAnswer(recorded: RunResultRecorded): ReturnedAnswer {
  const body = recorded.posted_body === undefined ? '' : stripSentinels(recorded.posted_body).trimEnd();
  const evidence = recorded.evidence !== undefined && Object.keys(recorded.evidence).length > 0 ? recorded.evidence : undefined;
  const evidenceChars = evidence === undefined ? 0 : JSON.stringify(evidence).length;
  return {
    from_agent: recorded.agent,
    step: recorded.step,
    result_id: recorded.result_id,
    body: body === '' ? null : body,
    body_truncated: recorded.posted_body_truncated === true,
    ...(evidence === undefined
      ? {}
      : evidenceChars <= MAX_RETURNED_EVIDENCE_CHARS
        ? { evidence }
        : { evidence_omitted: `${evidenceChars} characters (over ${MAX_RETURNED_EVIDENCE_CHARS})` }),
  };
}

/** The run's pending handoff as the router keeps it (`pendingHandoff`). */
type PendingHandoff = { handoffId: string; from: string; route: number; returnExpected: boolean };

/** The pending handoff `routed` dispatches when it is a returnable HANDOFF's (seed 001), else null. */
function returnablePending(routed: RunRouted, pending: PendingHandoff | null): PendingHandoff | null {
  return routed.decision.rule === 'handoff' && pending !== null && pending.handoffId === routed.handoff_id && pending.returnExpected ? pending : null;
}

/** The parent a returnable HANDOFF's child returns to (it waits for the child's result); null for any other route. */
export function returnableParent(routed: RunRouted, pending: PendingHandoff | null): string | null {
  return returnablePending(routed, pending)?.from ?? null;
}

/**
 * The ledger `create` for a `run.routed` event: a `task` handoff with the event's `handoff_id`
 * (derived from the cause, so the same route always asks for the same handoff), addressed to the
 * target agent, from the agent that finished (or `baton-router` for a run's first step), with
 * the event id as idempotency key. The context carries what the target needs to run the step:
 * the run, step and hop, the routing decision, the session variables and the "Your Team" section
 * for the target (naming the caller when the route came from a function_call or a returnable
 * HANDOFF, and the return address its result goes back to: `callback_after`, or a returnable
 * HANDOFF's parent; seed 000 §7, seed 001) and, when control returns to a caller, the callee's
 * answer (`returned`, from `input.answer`; {@link answerLookup}). Pure.
 */
export function createHandoffRequest(input: HandoffRequestInput): CreateHandoffBody {
  const { routed } = input;
  const target = routed.target;
  // A returnable HANDOFF (seed 001) is a call with a return address too: its parent waits for the
  // child's result, which returns to it.
  const parent = input.returnableParent ?? null;
  const calledBy = routed.decision.rule === 'function_call' ? (routed.from?.agent ?? null) : parent;
  const self = input.agents.find((agent) => agent.name === target.agent);
  const teamContext = renderTeamContext({
    self: { name: target.agent, role: self?.role ?? null },
    teammates: input.agents.map((agent) => ({ name: agent.name, role: agent.role ?? null })),
    calledBy,
    // The result returns to the return address, which need not be the caller, and may be none.
    returnsTo: parent ?? routed.decision.callback_after,
  });
  const variables = routed.conversation !== undefined ? routed.conversation.variables : input.variables;
  const variablesJson = JSON.stringify(variables);
  const reason = routed.decision.dispatch.reason;
  // Control comes back to a caller: it re-enters with the callee's answer (seed 000 §5).
  const answer = input.answer ?? null;
  const lookup = answer === null ? null : answerLookup(routed, input.agents);
  const returned = answer !== null && lookup !== null && (lookup.kind !== 'cause' || answer.result_id === lookup.resultId) ? returnedAnswer(answer) : null;
  return {
    handoff_id: routed.handoff_id,
    project: input.project,
    kind: 'task',
    from_agent: routed.from?.agent ?? ROUTER_ACTOR,
    to_agent: target.agent,
    summary: clip(
      `${input.workflow ? `workflow '${input.workflow.name}' v${input.workflow.version}` : 'workflow run'} ${input.workflowRunId}: ` +
        `${target.agent} runs step '${target.step}' (${routed.decision.rule}${reason ? `: ${reason}` : ''})`,
    ),
    context: {
      workflow_run_id: input.workflowRunId,
      workflow: input.workflow,
      step: target.step,
      hop: routed.hop,
      rule: routed.decision.rule,
      dispatch: routed.decision.dispatch,
      from: routed.from,
      called_by: calledBy,
      callback: routed.decision.callback_after,
      cause: routed.cause,
      team_context: teamContext,
      // Conversation runs (seed 001): the customer message and, for a HANDOFF route, exactly
      // the SUMMARY, HISTORY slice and PASS variables the target receives (`variables` below is
      // the target's scope, not the whole session).
      ...(routed.conversation !== undefined
        ? {
            message: routed.conversation.message,
            ...(routed.conversation.handoff !== undefined ? { handoff: routed.conversation.handoff } : {}),
          }
        : {}),
      ...(variablesJson.length <= MAX_CONTEXT_VARIABLES_CHARS
        ? { variables }
        : { variables: null, variables_omitted: `${variablesJson.length} characters; read them from the run` }),
      ...(routed.approved_call !== undefined ? { approved_call: routed.approved_call } : {}),
      ...(routed.raised_cap !== undefined ? { raised_cap: routed.raised_cap } : {}),
      ...(routed.pending_call !== undefined ? { pending_call: routed.pending_call } : {}),
      ...(returned !== null ? { returned } : {}),
    },
    workflow_run_id: input.workflowRunId,
    ...(input.deadlineAt != null ? { deadline_at: input.deadlineAt } : {}),
    idempotency_key: input.eventId,
  };
}

/**
 * The deadline of the ledger handoff a `run.routed` creates, when it is a returnable child
 * handoff (issue 5): the run's pending handoff (`run.handoff` just before, folded into `pending`)
 * is this handoff and expects a return. Deadline = the route's event time (`routed_at`) + the
 * route's DEADLINE, else the project's `execution.return_deadline_ms`, else 24 h
 * ({@link returnDeadlineMs}). Null for every other route (a workflow step, a permanent handoff,
 * a customer turn). Pure and deterministic, so a redelivered event asks for the same deadline.
 */
export function returnableDeadlineAt(
  routed: RunRouted,
  pendingHandoff: PendingHandoff | null,
  agents: readonly AgentDefinition[],
  execution: ExecutionSettings | undefined,
): string | null {
  const pending = returnablePending(routed, pendingHandoff);
  if (pending === null) return null;
  const route = agents.find((agent) => agent.name === pending.from)?.handoffs?.[pending.route];
  const start = Date.parse(routed.routed_at);
  if (!Number.isFinite(start)) return null;
  return new Date(start + returnDeadlineMs(route ?? {}, execution)).toISOString();
}

/**
 * The ledger `complete_from_result` for a `run.result_recorded` event: close the handoff the
 * agent was dispatched with, keyed by the result id (a redelivered result closes it once), naming
 * the claim the result was accepted under. Pure.
 */
export function completeFromResultRequest(recorded: RunResultRecorded, handoffId: string, workflowRunId: string): CompleteFromResultBody {
  return {
    handoff_id: handoffId,
    result_id: recorded.result_id,
    agent: recorded.agent,
    workflow_run_id: workflowRunId,
    // The claim it was accepted under: a lapse of it that reached the ledger first is voided (docs/handoffs.md rule 4a).
    ...(recorded.claim_id !== undefined ? { claim_id: recorded.claim_id } : {}),
    summary: clip(`${recorded.agent} finished step '${recorded.step}' (${signalText(recorded.signal)})`),
    evidence: recorded.evidence ?? {},
    idempotency_key: recorded.result_id,
  };
}

function signalText(signal: DecisionSignal): string {
  switch (signal.kind) {
    case 'config':
      return `${signal.source} decision`;
    case 'absent':
      return 'no decision';
    case 'invalid':
      return 'unparseable sentinel';
    default:
      return assertNever(signal, 'decision signal');
  }
}
