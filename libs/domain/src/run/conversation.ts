import {
  Origin,
  type AgentDefinition,
  type AgentResult,
  type ExecutionSettings,
  type HandoffOutcome,
  type HandoffRoute,
  type RouteCause,
  type RouteDecision,
  type RouteRule,
  type RouteTarget,
  type WorkflowDefinition,
} from '@baton/contracts';
import { conditionHolds } from '../routing/conditions';
import { clip as clipTo } from '../stop/forms';
import { buildHandoffContext, computeReturnEffects, effectiveParentReturn, latestCustomerMessage, parentReturnVerdict, pickResumeMessage } from '../returns';
import { HandoffFailureReason } from './commands';
import { routeHandoffIdFor } from './ids';
import { evolveRun, type RunEvent, type StartedRunState, type WaitingParent } from './state';

/** Conversation text kept on an event: at most 4,000 characters, the cut marked. */
const clip = (text: string, max = 4_000): string => clipTo(text, max);

/**
 * Conversation runs and returnable handoffs (seed 001), as pure steps that append run events.
 *
 * Model: the run is the session; its `variables` are the session memory. One agent is active at
 * a time. A customer message (a run start's `input` or a SessionMessage) is first matched
 * against the active agent's HANDOFF routes whose WHEN is an expression — before any model runs
 * — and goes to the first route that fires, else to the active agent itself. A returnable route
 * pushes a waiting parent (a call with a return address); a permanent one ends the caller's
 * thread. After an agent's result the run either returns a child to its parent (COMPLETE, the
 * built-in return action, a hand-back), follows the route the agent chose, or waits for the
 * customer's next message.
 */

/**
 * Whom a customer message's own event speaks for, whichever command records it: the words are the
 * customer's, so `run.message_received` / `run.message_queued` carry this actor and origin even when
 * the command is an agent's reply delivering a queued message, or a start carrying its `input`.
 */
export const CUSTOMER = { actor: 'customer', origin: Origin.human } as const;

/** Stable codes on `run.handoff_completed` for refused and blocked routes. */
export const HandoffRefusalCode = {
  recursion: 'recursion',
  targetWaitingForInput: 'target_waiting_for_input',
  conditionCheck: 'handoff_condition_check',
  targetDisabled: 'enabled_when',
  authRequired: 'auth_profile',
  unknownRoute: 'unknown_route',
  notInnermostParent: 'not_innermost_parent',
} as const;

/**
 * True when the session variables satisfy the AUTH profile of `agent`: it has none, its profile is
 * not required, or the profile's variable is exactly the boolean `true`. Strict on purpose: the
 * string "true", 1 or "yes" is not authenticated (a route is taken only on a value someone set to
 * true, never on one that merely looks like it).
 */
export function isAuthenticatedFor(agent: AgentDefinition | undefined, variables: Readonly<Record<string, unknown>>): boolean {
  const auth = agent?.auth;
  if (auth === undefined || !auth.required) return true;
  return Object.hasOwn(variables, auth.variable) && variables[auth.variable] === true;
}

/** True when an agent uses conversation features (HANDOFF routes, MEMORY, GATHER, COMPLETE). */
export function isConversationalAgent(agent: AgentDefinition | undefined): boolean {
  return agent !== undefined && (agent.handoffs?.length ?? 0) + (agent.complete?.length ?? 0) + (agent.gather?.length ?? 0) + (agent.memory?.length ?? 0) > 0;
}

/**
 * A run is a conversation (seed 001) when an agent of one of its workflow's steps uses
 * conversation features; other runs of the same project keep the seed 000 routing cascade.
 */
export function isConversational(workflow: WorkflowDefinition, agents: readonly AgentDefinition[]): boolean {
  return workflow.steps.some((step) => isConversationalAgent(agents.find((a) => a.name === step.agent)));
}

/** The mutable context of one decision: the events so far and the state they fold to. */
export interface ConversationCtx {
  state: StartedRunState;
  readonly events: RunEvent[];
  /** What caused the routes being decided: the command's cause, or a queued message while it is delivered. */
  cause: RouteCause;
  readonly now: string;
  readonly agents: readonly AgentDefinition[];
  readonly workflow: WorkflowDefinition;
  readonly execution: ExecutionSettings | undefined;
  /** How many `run.routed` this decision appended (ids stay unique per cause). */
  routed: number;
}

export function conversationCtx(
  state: StartedRunState,
  cause: RouteCause,
  now: string,
  defs: { agents: readonly AgentDefinition[]; workflow: WorkflowDefinition; execution?: ExecutionSettings | undefined },
): ConversationCtx {
  return { state, events: [], cause, now, agents: defs.agents, workflow: defs.workflow, execution: defs.execution, routed: 0 };
}

function emit(c: ConversationCtx, event: RunEvent): void {
  c.events.push(event);
  c.state = evolveRun(c.state, event) as StartedRunState;
  // The one place every path that waits for the customer goes through (an agent's reply, a
  // return that continues, a depth-limited replay, ON_FAILURE continue / RESPOND).
  if (event.type === 'run.awaiting_input') deliverQueued(c);
}

/**
 * The run waits for the customer: the oldest queued message (if any) is delivered now, exactly as
 * if it had arrived now — `run.message_received` (with its `queued_at`), then the active agent's
 * routes before any model runs — in the same decision. The routes it causes take the message's
 * cause (their handoff ids derive from its id, as if it had been sent now). When that delivery
 * leaves the run waiting again at once, the next queued message follows, and so on.
 */
function deliverQueued(c: ConversationCtx): void {
  const next = c.state.queuedMessages[0];
  if (next === undefined || !c.state.awaitingInput || c.state.status !== 'running') return;
  const outer = { cause: c.cause, routed: c.routed };
  c.cause = { kind: 'message', id: next.messageId };
  c.routed = 0;
  emit(c, {
    type: 'run.message_received',
    by: CUSTOMER,
    data: {
      message_id: next.messageId,
      text: next.text,
      agent: c.state.agent,
      queued_at: next.queuedAt,
      received_at: c.now,
      ...(next.sentBy !== null ? { sent_by: next.sentBy } : {}),
      ...(next.relayedBy !== null ? { relayed_by: next.relayedBy } : {}),
    },
  });
  deliverMessage(c, { agent: c.state.agent, step: c.state.step }, next.text, 0, 'message');
  c.cause = outer.cause;
  c.routed = outer.routed;
}

/**
 * A customer message while an agent of the running conversation works: it waits in the run's
 * queue (delivered the next time the run waits for the customer).
 */
export function queueMessage(c: ConversationCtx, messageId: string, text: string, sentBy: string | undefined, relayedBy: string | undefined): void {
  emit(c, {
    type: 'run.message_queued',
    by: CUSTOMER,
    data: {
      message_id: messageId,
      text: clip(text),
      ...(sentBy !== undefined ? { sent_by: sentBy } : {}),
      ...(relayedBy !== undefined ? { relayed_by: relayedBy } : {}),
      agent: c.state.agent,
      position: c.state.queuedMessages.length + 1,
      queued_at: c.now,
    },
  });
}

/**
 * `siblingIntentMs` of a handoff attempt that started at `from`: the ms each message still queued
 * now spent in the queue since `from` (or since it was queued, if later), summed; undefined when
 * no message waited. Every message queued during the attempt is still queued at its completion
 * (the run cannot wait for the customer while a handoff is pending).
 */
function siblingIntentMs(c: ConversationCtx, from: string): number | undefined {
  const queued = c.state.queuedMessages;
  if (queued.length === 0) return undefined;
  const start = Date.parse(from);
  return queued.reduce((sum, m) => sum + elapsedMs(Date.parse(m.queuedAt) > start ? m.queuedAt : from, c.now), 0);
}

function agentDef(c: ConversationCtx, name: string): AgentDefinition | undefined {
  return c.agents.find((a) => a.name === name);
}

/** The variables `agent` reads: a child's scope when it is the innermost child, else the session. */
function scopeFor(state: StartedRunState, agent: string): Readonly<Record<string, unknown>> {
  const top = state.waitingParents[state.waitingParents.length - 1];
  return top !== undefined && top.child === agent ? top.childVariables : state.variables;
}

function elapsedMs(from: string, to: string): number {
  const ms = Date.parse(to) - Date.parse(from);
  return Number.isFinite(ms) && ms > 0 ? Math.round(ms) : 0;
}

/** The handoff id of the next route of this decision's cause: the first is `handoffIdFor`'s, later ones meet no other (`routeHandoffIdFor`). */
function nextHandoffId(c: ConversationCtx): string {
  c.routed += 1;
  return routeHandoffIdFor(c.state.workflowRunId, c.cause, c.routed);
}

/** Record a customer message on the run (a start's input or a SessionMessage). */
export function receiveMessage(
  c: ConversationCtx,
  messageId: string,
  text: string,
  from: { sentBy?: string | undefined; relayedBy?: string | undefined } = {},
): void {
  emit(c, {
    type: 'run.message_received',
    by: CUSTOMER,
    data: {
      message_id: messageId,
      text: clip(text),
      agent: c.state.agent,
      received_at: c.now,
      ...(from.sentBy !== undefined ? { sent_by: from.sentBy } : {}),
      ...(from.relayedBy !== undefined ? { relayed_by: from.relayedBy } : {}),
    },
  });
}

function completed(
  c: ConversationCtx,
  data: {
    handoffId: string | null;
    from: string;
    to: string;
    route: number | null;
    outcome: HandoffOutcome;
    durationMs?: number;
    siblingIntentMs?: number | undefined;
    cause?: string;
    code?: string;
    onFailure?: 'continue' | 'escalate' | 'respond';
  },
): void {
  emit(c, {
    type: 'run.handoff_completed',
    data: {
      handoffId: data.handoffId,
      from: data.from,
      to: data.to,
      route: data.route,
      outcome: data.outcome,
      durationMs: data.durationMs ?? 0,
      ...(data.cause !== undefined ? { cause: data.cause } : {}),
      ...(data.code !== undefined ? { code: data.code } : {}),
      ...(data.siblingIntentMs !== undefined ? { siblingIntentMs: data.siblingIntentMs } : {}),
      ...(data.onFailure !== undefined ? { onFailure: data.onFailure } : {}),
      at: c.now,
    },
  });
}

function routed(
  c: ConversationCtx,
  target: RouteTarget,
  rule: RouteRule,
  reason: string,
  origin: 'agent' | 'engine_fallback',
  handoffId: string,
  conversation: NonNullable<Extract<RunEvent, { type: 'run.routed' }>['data']['conversation']>,
  from: RouteTarget | null,
): void {
  const decision: RouteDecision = {
    rule,
    outcome: 'dispatch',
    target,
    dispatch: { status: 'advance', reason: clip(reason), origin },
    callback_after: null,
  };
  emit(c, {
    type: 'run.routed',
    data: { decision, target, from, handoff_id: handoffId, hop: c.state.hops + 1, cause: c.cause, conversation, routed_at: c.now },
  });
}

/** Send a message to `agent` itself (no route fired): its turn, with its own scope. */
function dispatchTurn(c: ConversationCtx, agent: string, step: string, message: string | null, reason: string): void {
  routed(
    c,
    { agent, step },
    'message',
    reason,
    'engine_fallback',
    nextHandoffId(c),
    { message, variables: { ...scopeFor(c.state, agent) } },
    { agent: c.state.agent, step: c.state.step },
  );
}

/**
 * Deliver a customer message to the active agent `active`: evaluate its expression routes in
 * order (a false WHEN, a disabled target or a target that requires authentication records a
 * `blocked` handoff_completed, a refused target a `rejected` one) and fire the first that passes; when none fires, the message goes to
 * `active` itself. `depth` is 1 for a replayed message (resume_intent), 0 otherwise.
 */
export function deliverMessage(c: ConversationCtx, active: RouteTarget, message: string | null, depth: number, phase: 'message' | 'replay' | 'start'): void {
  const def = agentDef(c, active.agent);
  const routes = def?.handoffs ?? [];
  const scope = scopeFor(c.state, active.agent);
  for (let i = 0; i < routes.length; i++) {
    const route = routes[i]!;
    if (route.when?.kind === 'intent') continue; // only the agent's model can judge it
    if (route.when?.kind === 'expression' && !conditionHolds(route.when.source, scope)) {
      completed(c, {
        handoffId: null,
        from: active.agent,
        to: route.to,
        route: i,
        outcome: 'blocked',
        cause: 'when_false',
        code: HandoffRefusalCode.conditionCheck,
      });
      continue;
    }
    if (tryFire(c, active, i, route, message, depth, 'when', phase === 'message' ? 'awaiting' : 'running')) return;
  }
  const reason =
    phase === 'replay'
      ? `resume_intent: ${active.agent} handles the replayed message`
      : phase === 'start'
        ? `${active.agent} handles the first message`
        : `${active.agent} handles the customer message`;
  dispatchTurn(c, active.agent, active.step, message, reason);
}

/**
 * Fire route `index` of `active` if the runtime allows it. Refusals: the target is `active`
 * itself (`target_waiting_for_input` while it waits for the customer, `recursion` otherwise);
 * ENABLED_WHEN false on the target (`blocked`, `target_disabled`); then the target's AUTH profile
 * not satisfied by the session variables (`blocked`, `authentication_required`). ENABLED_WHEN
 * comes first: a target switched off is off for every customer, so authenticating would not open
 * it. A route to the innermost waiting parent is a hand-back (the child returns), checked before
 * both: a return is not a new handoff. Returns true when control moved.
 */
function tryFire(
  c: ConversationCtx,
  active: RouteTarget,
  index: number,
  route: HandoffRoute,
  message: string | null,
  depth: number,
  trigger: 'when' | 'agent',
  activeStatus: 'awaiting' | 'running',
): boolean {
  const target = route.to;
  if (target === active.agent) {
    const code = activeStatus === 'awaiting' ? HandoffRefusalCode.targetWaitingForInput : HandoffRefusalCode.recursion;
    completed(c, { handoffId: null, from: active.agent, to: target, route: index, outcome: 'rejected', cause: code, code });
    return false;
  }
  const frames = c.state.waitingParents;
  const parentIndex = frames.findIndex((f) => f.agent === target);
  if (parentIndex >= 0) {
    if (parentIndex === frames.length - 1 && frames[parentIndex]!.child === active.agent) {
      doReturn(c, 'hand_back', message, depth, null);
      return true;
    }
    completed(c, {
      handoffId: null,
      from: active.agent,
      to: target,
      route: index,
      outcome: 'rejected',
      cause: HandoffRefusalCode.notInnermostParent,
      code: HandoffRefusalCode.notInnermostParent,
    });
    return false;
  }
  const targetDef = agentDef(c, target);
  if (targetDef?.enabled_when?.kind === 'expression' && !conditionHolds(targetDef.enabled_when.source, c.state.variables)) {
    completed(c, {
      handoffId: null,
      from: active.agent,
      to: target,
      route: index,
      outcome: 'blocked',
      cause: 'target_disabled',
      code: HandoffRefusalCode.targetDisabled,
    });
    return false;
  }
  if (!isAuthenticatedFor(targetDef, c.state.variables)) {
    completed(c, {
      handoffId: null,
      from: active.agent,
      to: target,
      route: index,
      outcome: 'blocked',
      cause: 'authentication_required',
      code: HandoffRefusalCode.authRequired,
    });
    return false;
  }
  const handoffId = nextHandoffId(c);
  const { context, variables } = buildHandoffContext(route, c.state.transcript, scopeFor(c.state, active.agent));
  emit(c, {
    type: 'run.handoff',
    data: {
      handoffId,
      from: active.agent,
      to: target,
      step: active.step,
      returnExpected: route.return,
      reasonCode: route.return ? 'handoff_return_expected' : 'handoff_permanent',
      route: index,
      trigger,
      message: message === null ? null : clip(message),
      replayDepth: depth,
      context,
      passedVariables: variables,
      onReturn: route.return ? (route.on_return ?? null) : null,
      onFailure: route.on_failure,
      at: c.now,
    },
  });
  routed(
    c,
    { agent: target, step: active.step },
    'handoff',
    `${route.return ? 'returnable' : 'permanent'} handoff ${active.agent} → ${target}${route.summary ? `: ${route.summary}` : ''}`,
    trigger === 'agent' ? 'agent' : 'engine_fallback',
    handoffId,
    { message, variables, handoff: context },
    active,
  );
  return true;
}

/**
 * The route an agent chose (`handoff: { to }` in its result) is held to the same checks as a route
 * taken at message time, WHEN first: an agent may name its successor, not skip the gate before it.
 * Its routes to that target are tried in order from `first`: an expression WHEN that is false is
 * `blocked` (`when_false`) and the next route to the same target is tried; an intent WHEN is the
 * agent's own judgement and passes, as does a route without WHEN; the first that passes is fired
 * (or refused by the target's checks, which every route to that target would meet alike). Returns
 * true when control moved.
 */
function fireChosen(c: ConversationCtx, active: RouteTarget, routes: readonly HandoffRoute[], first: number, message: string | null): boolean {
  const to = routes[first]!.to;
  const scope = scopeFor(c.state, active.agent);
  for (let i = first; i < routes.length; i++) {
    const route = routes[i]!;
    if (route.to !== to) continue;
    if (route.when?.kind === 'expression' && !conditionHolds(route.when.source, scope)) {
      completed(c, { handoffId: null, from: active.agent, to, route: i, outcome: 'blocked', cause: 'when_false', code: HandoffRefusalCode.conditionCheck });
      continue;
    }
    return tryFire(c, active, i, route, message, 0, 'agent', 'running');
  }
  return false;
}

/** The parent resumes without a replay: it becomes the active agent and waits for the customer. */
function continueParent(c: ConversationCtx, frame: WaitingParent, reply: string | null, note: string): void {
  emit(c, { type: 'run.awaiting_input', data: { agent: frame.agent, step: frame.step, reply: reply === null ? null : clip(reply), note, at: c.now } });
}

/**
 * The innermost child returns to its waiting parent. MAP then SET are applied to the parent's
 * scope when every target is writable by the parent (else `run.memory_error` and no effect at
 * all); then ON_RETURN's action: `continue` (the parent waits for the customer), or
 * `resume_intent` (the chosen message is replayed through the parent's routes — one level only).
 * Without ON_RETURN, a return that forwards a message replays it; otherwise the parent continues.
 */
export function doReturn(
  c: ConversationCtx,
  path: 'complete' | 'return_action' | 'hand_back',
  forwarded: string | null,
  depth: number,
  completeRespond: string | null,
): void {
  const frames = c.state.waitingParents;
  const frame = frames[frames.length - 1]!;
  const onReturn = frame.onReturn;
  const parent = agentDef(c, frame.agent);
  const effects = computeReturnEffects(onReturn, frame.childVariables, parent);
  const applied = effects.notWritable.length === 0;
  if (!applied) {
    emit(c, {
      type: 'run.memory_error',
      data: {
        handoffId: frame.handoffId,
        parent: frame.agent,
        child: frame.child,
        targets: effects.notWritable,
        message: clip(
          `${frame.agent} may not write ${effects.notWritable.join(', ')} (declare them in its MEMORY, not READONLY); the return applies none of its effects`,
        ),
        at: c.now,
      },
    });
  }
  const respond = onReturn?.respond ?? completeRespond;
  const action = onReturn !== null ? onReturn.action : forwarded !== null ? 'resume_intent' : 'continue';
  const resumeWith = onReturn !== null ? onReturn.resume_with : 'forwarded_return_message';
  const sources = {
    originalUtterance: frame.originalUtterance,
    latestChildUtterance: frame.latestChildUtterance,
    latestSessionUtterance: latestCustomerMessage(c.state.transcript),
    forwardedMessage: forwarded,
  };
  emit(c, {
    type: 'run.handoff_return_handler',
    data: {
      handoffId: frame.handoffId,
      parent: frame.agent,
      child: frame.child,
      path,
      action,
      handler: onReturn?.handler ?? null,
      mappedFields: applied ? effects.mappedFields : [],
      skippedFields: effects.skippedFields,
      setFields: applied ? effects.setFields : [],
      writes: applied ? effects.writes : {},
      applied,
      respond: respond ?? null,
      forwardedMessage: forwarded === null ? null : clip(forwarded),
      at: c.now,
    },
  });
  if (!applied) return continueParent(c, frame, null, 'memory_error: the return applied no effects');
  if (action === 'continue') return continueParent(c, frame, respond ?? null, `${frame.child} returned; ON_RETURN continue`);
  const message = pickResumeMessage(resumeWith, sources);
  const limited = frame.replayDepth >= 1 || depth >= 1;
  const reasonCode = limited ? 'resume_intent_depth_limit' : message === null ? 'resume_intent_no_message' : 'resume_intent';
  // The child's COMPLETE RESPOND reaches the customer before the replay (seed 001: "Thanks. I have
  // your income.", then the offer); without a replay the parent's awaiting_input carries it.
  const replies = reasonCode === 'resume_intent' && respond !== undefined && respond !== null;
  emit(c, {
    type: 'run.resume_intent',
    data: {
      parent: frame.agent,
      resumeWith,
      message: message === null ? null : clip(message),
      reasonCode,
      depth: Math.max(frame.replayDepth, depth) + (limited ? 0 : 1),
      ...(replies ? { reply: clip(respond), replyFrom: frame.child } : {}),
      at: c.now,
    },
  });
  if (reasonCode !== 'resume_intent') return continueParent(c, frame, respond ?? null, `${frame.child} returned; ${reasonCode}`);
  deliverMessage(c, { agent: frame.agent, step: frame.step }, message, 1, 'replay');
}

/**
 * The first result of the target of the pending handoff: it ran, so the handoff is `success`
 * (`durationMs` = handoff → this result) and ON_FAILURE no longer applies — whatever the result
 * goes on to do, a stop of its own included.
 */
export function handoffRan(c: ConversationCtx, agent: string): void {
  const pending = c.state.pendingHandoff;
  if (pending === null || pending.to !== agent) return;
  completed(c, {
    handoffId: pending.handoffId,
    from: pending.from,
    to: pending.to,
    route: pending.route,
    outcome: 'success',
    durationMs: elapsedMs(pending.at, c.now),
    siblingIntentMs: siblingIntentMs(c, pending.at),
  });
}

/**
 * After an agent's result in a conversation run (the result is already recorded in `c`):
 * a pending handoff to this agent is `success`; then the return paths of a child (built-in
 * return action honoured by parentReturn, a hand-back to the waiting parent, a true COMPLETE
 * condition), the route the agent chose, or waiting for the customer.
 */
export function afterResult(c: ConversationCtx, result: AgentResult, agentText: string | null): void {
  const agent = result.agent;
  handoffRan(c, agent);
  const active: RouteTarget = { agent, step: c.state.step };
  const frames = c.state.waitingParents;
  const top = frames[frames.length - 1];
  const isChild = top !== undefined && top.child === agent;
  let note: string | undefined;

  if (isChild && result.return_to_parent !== undefined) {
    const verdict = parentReturnVerdict(result.return_to_parent, effectiveParentReturn(agentDef(c, top.agent), c.execution));
    if (verdict.honoured) {
      doReturn(c, 'return_action', result.return_to_parent.message ?? top.latestChildUtterance, 0, null);
      return;
    }
    note = `return action ignored: ${verdict.reason}`;
  }
  if (result.handoff !== undefined) {
    const to = result.handoff.to;
    if (isChild && to === top.agent) {
      doReturn(c, 'hand_back', result.handoff.message ?? top.latestChildUtterance, 0, null);
      return;
    }
    const routes = agentDef(c, agent)?.handoffs ?? [];
    const index = routes.findIndex((r) => r.to === to);
    if (to === agent) {
      // A route to the already-active agent is a cycle, whether or not a route names it.
      completed(c, {
        handoffId: null,
        from: agent,
        to,
        route: index < 0 ? null : index,
        outcome: 'rejected',
        cause: HandoffRefusalCode.recursion,
        code: HandoffRefusalCode.recursion,
      });
    } else if (index < 0) {
      completed(c, {
        handoffId: null,
        from: agent,
        to,
        route: null,
        outcome: 'rejected',
        cause: `'${agent}' has no HANDOFF route to '${to}'`,
        code: HandoffRefusalCode.unknownRoute,
      });
    } else if (fireChosen(c, active, routes, index, result.handoff.message ?? latestCustomerMessage(c.state.transcript))) {
      return;
    }
  }
  if (isChild) {
    const child = agentDef(c, agent);
    const scope = c.state.waitingParents[c.state.waitingParents.length - 1]!.childVariables;
    const done = (child?.complete ?? []).find((cond) => cond.when.kind === 'expression' && conditionHolds(cond.when.source, scope));
    if (done !== undefined) {
      doReturn(c, 'complete', null, 0, done.respond ?? null);
      return;
    }
  }
  emit(c, {
    type: 'run.awaiting_input',
    data: { agent, step: c.state.step, reply: agentText === null ? null : clip(agentText), ...(note !== undefined ? { note } : {}), at: c.now },
  });
}

/**
 * The pending handoff failed before its target produced a result: `handoff_completed` — outcome
 * `error` (cause `create_refused: …`, the ledger's code) when the ledger refused to create it,
 * outcome `timeout` (cause `deadline_expired: …`) when its deadline passed — and ON_FAILURE:
 * `continue` (the caller waits for the customer again), `respond` (the same, with the message),
 * `escalate` (returned as `escalate` for the caller to hold the run for a person). Returns null
 * when the handoff is not pending (the child already ran, or the failure was applied before).
 */
export function handoffFailed(
  c: ConversationCtx,
  handoffId: string,
  code: string,
  message: string,
  reason: HandoffFailureReason = HandoffFailureReason.createRefused,
  routes = true,
): 'done' | 'escalate' | null {
  const pending = c.state.pendingHandoff;
  if (pending === null || pending.handoffId !== handoffId) return null;
  const policy = pending.onFailure;
  const timedOut = reason === HandoffFailureReason.timeout;
  completed(c, {
    handoffId,
    from: pending.from,
    to: pending.to,
    route: pending.route,
    outcome: timedOut ? 'timeout' : 'error',
    durationMs: elapsedMs(pending.at, c.now),
    siblingIntentMs: siblingIntentMs(c, pending.at),
    cause: clip(`${timedOut ? 'deadline_expired' : reason === HandoffFailureReason.ended ? 'handoff_ended' : 'create_refused'}: ${message}`, 200),
    code,
    onFailure: policy.action,
  });
  // A run that is not running (stopped from outside, held for a person) is moved only by the answer
  // it waits for: the child's end is recorded, its ON_FAILURE is not applied over the stop.
  if (!routes) return 'done';
  const what = timedOut ? `timed out (${code})` : reason === HandoffFailureReason.ended ? `ended without a result (${code})` : `failed (${code})`;
  switch (policy.action) {
    case 'continue':
      emit(c, {
        type: 'run.awaiting_input',
        data: { agent: pending.from, step: pending.fromStep, reply: null, note: `handoff to ${pending.to} ${what}; ON_FAILURE continue`, at: c.now },
      });
      return 'done';
    case 'respond':
      emit(c, {
        type: 'run.awaiting_input',
        data: {
          agent: pending.from,
          step: pending.fromStep,
          reply: clip(policy.message),
          note: `handoff to ${pending.to} ${what}; ON_FAILURE RESPOND`,
          at: c.now,
        },
      });
      return 'done';
    case 'escalate':
      return 'escalate';
    default: {
      const never: never = policy;
      return never;
    }
  }
}
