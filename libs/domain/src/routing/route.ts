import type {
  AgentDefinition,
  AgentRunConfig,
  DecisionSignal,
  Dispatch,
  ResolvedDispatch,
  RouteDecision,
  RouteRule,
  RouteTarget,
  WorkflowDefinition,
} from '@baton/contracts';
import { assertNever } from '../decider';
import { EngineReasons, NoActionReasons, SelfCall } from './reasons';
import { forwardEdge, resolveAgent, resolveNamedTarget, Resolved, stepById } from './targets';

/** Everything the cascade needs to route one finished agent run. Pure data; nothing is looked up. */
export interface RouteInput {
  /** The run's workflow definition (the version the run started on). */
  workflow: WorkflowDefinition;
  /** The project's agents: targets named by function_call / task must be among them. */
  agents: readonly AgentDefinition[];
  /** The step the finished agent ran under. */
  step: string;
  /** The agent that finished (the callee). */
  agent: string;
  /** The return address registered when the callee was called, or null (seed 000 §4). */
  callback: string | null;
  /** What the agent decided: a config, no decision, or an unparseable sentinel. */
  signal: DecisionSignal;
}

/**
 * The routing precedence cascade of seed 000 §3, highest priority first:
 *
 * 1. the callee's explicit `function_call` → its `agent_name`. Legacy `task` sits at this level
 *    too (Baton's choice): it names the target, `task` and `function_call` cannot coexist, and an
 *    explicit target of the callee's own must outrank a hold in the same payload;
 * 2. the callee's explicit `dispatch` hold / loop / terminate → honoured; a `dispatch` advance that
 *    names `step` / `task_hint` / `workflow` also decides the next agent here (`explicit_dispatch`);
 * 3. the registered callback → return to the caller (an advance with no destination only);
 * 4. the workflow forward edge (`steps[].next`); with no edge, a `terminal` step completes the
 *    workflow (a stop-for-a-human outcome) and a non-terminal one falls to the no-action hold;
 * 5. no decision at all → the no-action default: back to the callback, else hold (§5).
 *
 * Callback invariants (§4): a function_call's callback defaults to the caller; it is a fallback
 * (rules 1–2 win), advance-only (an explicit hold/loop is never redirected), a callback equal to
 * the callee's own name is a no-op, and it is cleared on every non-function-call transition.
 *
 * A name that resolves to nothing yields `outcome: 'unresolved'` (the run stops with
 * `unknown_intent`), never a guess. Pure and total: same input, same decision; never throws.
 */
export function resolveRoute(input: RouteInput): RouteDecision {
  const config = input.signal.kind === 'config' ? input.signal.config : null;
  if (config !== null && config.function_call !== undefined && config.function_call.agent_name === input.agent) {
    // A call to the agent itself is a no-op (§4: no self re-entry): it would only run the same
    // agent again and again until the hop budget stops the run. The rest of its decision stands
    // (an explicit hold, loop, terminate or destination); with nothing else, the no-action default
    // (back to the caller, else hold), its reason naming the ignored call.
    const { function_call: _self, ...rest } = config;
    return resolveExplicit(input, rest) ?? resolveNoAction(input, { diagnostic: SelfCall.diagnostic(input.agent), typed: true, selfCall: true });
  }
  if (config !== null) {
    const explicit = resolveExplicit(input, config);
    if (explicit !== null) return explicit;
    return resolveAdvance(input, config.dispatch?.reason ?? null);
  }
  return resolveNoAction(input, input.signal.kind === 'invalid' ? { diagnostic: input.signal.diagnostic, typed: input.signal.source === 'typed' } : null);
}

/** Rules 1 and 2: the callee's own function_call, task, or non-advance / destination dispatch. */
function resolveExplicit(input: RouteInput, config: AgentRunConfig): RouteDecision | null {
  const reason = config.dispatch?.reason ?? null;
  if (config.function_call !== undefined) {
    const call = config.function_call;
    const resolved = resolveAgent(call.agent_name, input.agents, input.step);
    // §4: the callback defaults to the emitting caller; one equal to the callee is a no-op.
    const callback = call.callback ?? input.agent;
    const callbackAfter = callback === call.agent_name ? null : callback;
    if (callbackAfter !== null && !input.agents.some((a) => a.name === callbackAfter)) {
      return unresolved('function_call', callbackAfter, `callback '${callbackAfter}' is not an agent of this project`);
    }
    return dispatchTo('function_call', resolved, call.agent_name, agentDispatch('advance', reason), callbackAfter);
  }
  if (config.task !== undefined) {
    const resolved = resolveNamedTarget(config.task, input.workflow, input.agents, input.step);
    return dispatchTo('task', resolved, config.task, agentDispatch('advance', reason), null);
  }
  const dispatch = config.dispatch;
  if (dispatch === undefined) return null;
  switch (dispatch.status) {
    case 'hold':
      return {
        rule: 'explicit_dispatch',
        outcome: 'hold',
        hold_kind: 'hold',
        pending_target: forwardEdge(input.workflow, input.step),
        dispatch: agentDispatch('hold', reason),
        callback_after: null,
      };
    case 'loop':
      return {
        rule: 'explicit_dispatch',
        outcome: 'dispatch',
        target: { agent: input.agent, step: input.step },
        dispatch: agentDispatch('loop', reason),
        callback_after: null,
      };
    case 'terminate':
      return { rule: 'explicit_dispatch', outcome: 'terminate', dispatch: agentDispatch('terminate', reason), callback_after: null };
    case 'advance':
      return resolveDispatchDestination(input, dispatch);
    default:
      return assertNever(dispatch.status, 'dispatch status');
  }
}

/** Rule 2 for an advance that names `step`, `task_hint` or `workflow`; null when it names none. */
function resolveDispatchDestination(input: RouteInput, dispatch: Dispatch): RouteDecision | null {
  const reason = dispatch.reason ?? null;
  if (dispatch.workflow !== undefined && dispatch.workflow !== input.workflow.name) {
    return unresolved(
      'explicit_dispatch',
      dispatch.workflow,
      `dispatch names workflow '${dispatch.workflow}'; a run cannot switch workflows (it runs '${input.workflow.name}')`,
    );
  }
  if (dispatch.step !== undefined) {
    const step = stepById(input.workflow, dispatch.step);
    const resolved: Resolved =
      step === undefined
        ? { ok: false, problem: `'${dispatch.step}' is not a step of workflow '${input.workflow.name}'` }
        : { ok: true, target: { agent: step.agent, step: step.id } };
    return dispatchTo('explicit_dispatch', resolved, dispatch.step, agentDispatch('advance', reason), null);
  }
  if (dispatch.task_hint !== undefined) {
    const resolved = resolveNamedTarget(dispatch.task_hint, input.workflow, input.agents, input.step);
    return dispatchTo('explicit_dispatch', resolved, dispatch.task_hint, agentDispatch('advance', reason), null);
  }
  if (dispatch.workflow !== undefined) {
    const entry = stepById(input.workflow, input.workflow.entry);
    const resolved: Resolved =
      entry === undefined
        ? { ok: false, problem: `workflow '${input.workflow.name}' has no entry step` }
        : { ok: true, target: { agent: entry.agent, step: entry.id } };
    return dispatchTo('explicit_dispatch', resolved, dispatch.workflow, agentDispatch('advance', reason), null);
  }
  return null;
}

/** Rules 3 and 4 (and the terminal / no-edge ends) for an agent that advanced with no destination. */
function resolveAdvance(input: RouteInput, reason: string | null): RouteDecision {
  const callback = liveCallback(input);
  if (callback !== null) {
    return {
      rule: 'callback',
      outcome: 'dispatch',
      target: { agent: callback, step: input.step },
      dispatch: agentDispatch('advance', reason),
      callback_after: null,
    };
  }
  const step = stepById(input.workflow, input.step);
  if (step === undefined) {
    return unresolved('workflow_edge', input.step, `'${input.step}' is not a step of workflow '${input.workflow.name}'`);
  }
  const next = forwardEdge(input.workflow, step.id);
  if (next !== null) {
    if (step.human_gate === true) {
      return {
        rule: 'workflow_edge',
        outcome: 'hold',
        hold_kind: 'human_gate',
        pending_target: next,
        dispatch: fallbackDispatch('hold', EngineReasons.humanGate(step.id, next.step)),
        callback_after: null,
      };
    }
    return { rule: 'workflow_edge', outcome: 'dispatch', target: next, dispatch: agentDispatch('advance', reason), callback_after: null };
  }
  if (step.terminal === true) {
    return {
      rule: 'terminal',
      outcome: 'complete',
      dispatch: { status: 'advance', reason: reason ?? EngineReasons.completed(input.workflow.name, step.id), origin: 'agent' },
      callback_after: null,
    };
  }
  return {
    rule: 'no_action_default',
    outcome: 'hold',
    hold_kind: 'hold',
    pending_target: null,
    dispatch: fallbackDispatch('hold', NoActionReasons.noRoute(step.id)),
    callback_after: null,
  };
}

/**
 * Rule 5, the no-action default (§5): return to the callback when registered, else hold. `invalid`:
 * the decision the agent gave could not be read (a sentinel that does not parse, or a typed decision
 * that breaks the contract); its diagnostic goes into the reason.
 */
function resolveNoAction(input: RouteInput, invalid: { diagnostic: string; typed: boolean; selfCall?: true } | null): RouteDecision {
  const callback = liveCallback(input);
  if (callback !== null) {
    return {
      rule: 'no_action_default',
      outcome: 'dispatch',
      target: { agent: callback, step: input.step },
      dispatch: fallbackDispatch(
        'advance',
        invalid === null
          ? NoActionReasons.returnToCaller(callback)
          : invalid.selfCall === true
            ? NoActionReasons.selfCallReturnToCaller(invalid.diagnostic, callback)
            : invalid.typed
              ? NoActionReasons.invalidTypedReturnToCaller(invalid.diagnostic, callback)
              : NoActionReasons.unparseableReturnToCaller(invalid.diagnostic, callback),
      ),
      callback_after: null,
    };
  }
  return {
    rule: 'no_action_default',
    outcome: 'hold',
    hold_kind: 'hold',
    // An operator's "continue" may still take the edge the engine refused to auto-advance on.
    pending_target: forwardEdge(input.workflow, input.step),
    dispatch: fallbackDispatch(
      'hold',
      invalid === null
        ? NoActionReasons.hold
        : invalid.selfCall === true
          ? NoActionReasons.selfCall(invalid.diagnostic)
          : invalid.typed
            ? NoActionReasons.invalidTyped(invalid.diagnostic)
            : NoActionReasons.unparseable(invalid.diagnostic),
    ),
    callback_after: null,
  };
}

/** The registered callback, unless it is the callee itself (§4: no self re-entry). */
function liveCallback(input: RouteInput): string | null {
  return input.callback !== null && input.callback !== input.agent ? input.callback : null;
}

function dispatchTo(rule: RouteRule, resolved: Resolved, requested: string, dispatch: ResolvedDispatch, callbackAfter: string | null): RouteDecision {
  if (!resolved.ok) return unresolved(rule, requested, resolved.problem);
  return { rule, outcome: 'dispatch', target: resolved.target, dispatch, callback_after: callbackAfter };
}

/**
 * A named target that does not exist. The run stops (unknown_intent) and, as after every decision
 * that is not a call, its return address is cleared (seed 000 §4): the operator's answer is an
 * intent that moves the run on, and a stale callback must not fire after it.
 */
function unresolved(rule: RouteRule, requested: string, problem: string): RouteDecision {
  return {
    rule,
    outcome: 'unresolved',
    requested,
    problem,
    dispatch: fallbackDispatch('hold', `unresolved target: ${problem}`),
    callback_after: null,
  };
}

/**
 * A decision the agent made. Its origin is always `agent`: a dispatch may claim an `origin`
 * (seed 000 §5), but provenance is Baton's to record, so a claimed `engine_fallback` is ignored.
 */
function agentDispatch(status: ResolvedDispatch['status'], reason: string | null): ResolvedDispatch {
  return { status, reason, origin: 'agent' };
}

function fallbackDispatch(status: ResolvedDispatch['status'], reason: string): ResolvedDispatch {
  return { status, reason, origin: 'engine_fallback' };
}

/** The first step of a run: the workflow's entry (rule `entry`, origin engine). */
export function entryRoute(workflow: WorkflowDefinition): RouteDecision & { outcome: 'dispatch' } {
  const entry = stepById(workflow, workflow.entry);
  const target: RouteTarget = entry === undefined ? { agent: workflow.entry, step: workflow.entry } : { agent: entry.agent, step: entry.id };
  return {
    rule: 'entry',
    outcome: 'dispatch',
    target,
    dispatch: { status: 'advance', reason: `workflow '${workflow.name}' starts at step '${workflow.entry}'`, origin: 'engine_fallback' },
    callback_after: null,
  };
}
