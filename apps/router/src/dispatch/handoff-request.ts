import type {
  AgentDefinition,
  CompleteFromResultCommandSchema,
  CreateHandoffCommandSchema,
  DecisionSignal,
  ExecutionSettings,
  RunEventSchemas,
  WorkflowRef,
} from '@baton/contracts';
import { clipText as clip, returnDeadlineMs } from '@baton/contracts';
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
 * HANDOFF's parent; seed 000 §7, seed 001). Pure.
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
