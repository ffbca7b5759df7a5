import {
  AgentDefinition,
  AgentResult,
  AgentResultWire,
  AgentRunConfig,
  checkRunConfig,
  DecisionSignal,
  MAX_DECLARED_VARIABLES,
  NoticeReason,
  parseSentinel,
  postedBodyOf,
  ResolvedDispatch,
  RouteCause,
  RouteDecision,
  RouteTarget,
  RunPeople,
  StopEscalation,
  stripSentinels,
  WorkflowDefinition,
} from '@baton/contracts';
import { checkResultClaim, recordsSameClaim, ResultClaimCode, type ClaimedRecord } from '../claims';
import { attributeEngineDecisions } from './attribution';
import { accept, assertNever, Decider, DecisionResult, DomainErrorKind, reject } from '../decider';
import { buildHumanActionNotice, selectNoticeRecipient } from '../notices';
import { entryRoute, resolveNamedTarget, resolveRoute } from '../routing';
import { buildStop, clip, decideResume, HopCapName, ResumeErrorCode, StopFacts } from '../stop';
import {
  HandoffFailedCommand,
  HandoffFailureReason,
  RecordResult,
  RejectResult,
  ResumeRun,
  RunCommand,
  SessionMessageCommand,
  StartRun,
  StopRun,
} from './commands';
import { afterResult, conversationCtx, deliverMessage, handoffFailed, handoffRan, isConversational, queueMessage, receiveMessage } from './conversation';
import { deriveId } from './ids';
import { handoffIdFor, noticeIdFor, stopIdFor } from './ids';
import {
  answerKey,
  evolveRun,
  hasProcessedId,
  initialRunState,
  MAX_QUEUED_MESSAGES,
  messageKey,
  refusedKey,
  RunEvent,
  RunState,
  StartedRunState,
} from './state';

/** Stable codes of the refusals the run decider returns. */
export const RunErrorCode = {
  runNotFound: 'run_not_found',
  runAlreadyStarted: 'run_already_started',
  noNoticeRecipient: 'no_notice_recipient',
  wrongRun: 'wrong_run',
  runNotRunning: 'run_not_running',
  unexpectedAgent: 'unexpected_agent',
  staleHandoff: ResultClaimCode.staleHandoff,
  /** The run is on a handoff and the result names no handoff_id or claim_id. */
  claimRequired: ResultClaimCode.claimRequired,
  /** The result's handoff is not claimed now (not yet created, requeued, closed). */
  handoffNotClaimed: ResultClaimCode.handoffNotClaimed,
  /** The handoff's current claim is another one, or held by another agent. */
  claimMismatch: ResultClaimCode.claimMismatch,
  workflowMismatch: 'workflow_mismatch',
  runNotHeld: 'run_not_held',
  /** A hold answer naming the cause of a hold the run is no longer in (it was held again since). */
  staleHoldAnswer: ResumeErrorCode.staleAnswer,
  runNotStopped: 'run_not_stopped',
  runAlreadyStopped: 'run_already_stopped',
  answerForbidden: 'answer_forbidden',
  nothingToContinue: 'nothing_to_continue',
  resumeTargetUnknown: 'resume_target_unknown',
  /** The run waits for the customer's message, not for an agent result (seed 001). */
  awaitingInput: 'awaiting_input',
  /** A customer message for a run that is not running (held, stopped, finished) or is not a conversation. */
  notAwaitingInput: 'run_not_awaiting_input',
  /** A customer message while an agent works, with MAX_QUEUED_MESSAGES already queued. */
  messageQueueFull: 'message_queue_full',
} as const;
export type RunErrorCode = (typeof RunErrorCode)[keyof typeof RunErrorCode];

/**
 * The refusals `record_result` gives a result only once it has found the result's agent to be the
 * agent the run waits for (`unexpected_agent` is checked before them): the claim rule's four and
 * `workflow_mismatch`. Every other refusal of a result — `unexpected_agent`, `awaiting_input`,
 * `run_not_running`, `wrong_run`, the router's `unknown_agent` — is decided before that check, so
 * it says nothing of whether its sender has any part in the run: an agent may publish a result
 * naming any run of its project. The loop guards read this (`guardFactOf`): only a refusal on the
 * sender's own turn is a failure ON that run, whose stop the circuit it opens may ask for
 * (docs/governance.md, circuit per agent).
 */
export const OwnTurnRefusalCodes: ReadonlySet<string> = new Set<RunErrorCode>([
  RunErrorCode.claimRequired,
  RunErrorCode.staleHandoff,
  RunErrorCode.handoffNotClaimed,
  RunErrorCode.claimMismatch,
  RunErrorCode.workflowMismatch,
]);

/**
 * An agent result read at the router's edge: its typed `decision` checked by the sentinel's rules.
 * A valid one stays on the result; one that breaks the contract leaves it, and comes back as an
 * `invalid` signal (source `typed`) that the routing takes as the no-action default with its
 * diagnostic, as it takes a sentinel that does not parse.
 */
export function readTypedDecision(wire: AgentResultWire): { result: AgentResult; signal?: DecisionSignal } {
  const { decision, ...rest } = wire;
  if (decision === undefined) return { result: rest };
  const checked = checkRunConfig(decision, 'the typed decision');
  if (checked.kind === 'config') return { result: { ...rest, decision: checked.config } };
  return { result: rest, signal: { kind: 'invalid', source: 'typed', diagnostic: checked.diagnostic, code: checked.code } };
}

/**
 * What an agent result decided, as the routing cascade reads it: the typed `decision` wins; else
 * the body's AGENT_RUN_CONFIG sentinel is parsed (absent, a config, or invalid with its
 * diagnostic); a result with neither body nor decision decided nothing.
 */
export function decisionSignalOf(result: Pick<AgentResult, 'decision' | 'body'>): DecisionSignal {
  if (result.decision !== undefined) return { kind: 'config', source: 'typed', config: result.decision };
  if (result.body === undefined) return { kind: 'absent' };
  const parsed = parseSentinel(result.body);
  switch (parsed.kind) {
    case 'config':
      return { kind: 'config', source: 'sentinel', config: parsed.config };
    case 'absent':
      return { kind: 'absent' };
    case 'invalid':
      return { kind: 'invalid', diagnostic: parsed.diagnostic, code: parsed.code };
    default:
      return assertNever(parsed, 'sentinel parse');
  }
}

/**
 * Decide a workflow-run command. The router is the aggregate's only writer. Never throws for a
 * business reason: a refusal is a typed DomainError (see {@link RunErrorCode}).
 *
 * Idempotency: a result id, answer id or stop packet id the run already applied yields no events
 * (so a redelivered message changes nothing, and emits no second notice). Every id the decider
 * derives (handoff, notice, stop packet) is a function of the causing id.
 */
export function decideRun(command: RunCommand, state: RunState): DecisionResult<RunEvent> {
  const decided = decideRunCommand(command, state);
  // The events of a decision the engine made speak for it, not for whoever caused it (seed 000 §5).
  return decided.ok ? { ok: true, events: attributeEngineDecisions(decided.events) } : decided;
}

function decideRunCommand(command: RunCommand, state: RunState): DecisionResult<RunEvent> {
  switch (command.type) {
    case 'start_run':
      return startRun(command, state);
    case 'record_result':
      return recordResult(command, state);
    case 'resume':
      return resume(command, state);
    case 'stop':
      return stopRun(command, state);
    case 'reject_result':
      return rejectResult(command, state);
    case 'session_message':
      return sessionMessage(command, state);
    case 'handoff_failed':
      return failHandoff(command, state);
    default:
      return assertNever(command, 'run command');
  }
}

/** The workflow-run decider: `{ decide, evolve, initialState }`. */
export const runDecider: Decider<RunCommand, RunEvent, RunState> = {
  decide: decideRun,
  evolve: evolveRun,
  initialState: initialRunState,
  passive: isPassiveRunEvent,
  resuming: (command, stored) =>
    command.type === 'record_result' && beginsWithRecordOf(stored, command.data.result)
      ? { ...command, data: { ...command.data, claim_recorded: true } }
      : command,
};

/**
 * What the run records without deciding anything for later commands: a refused input (its id kept
 * so it is not decided again) and a notice. An answer, result or start cut short between its two
 * appends (`run.resumed` stored, `run.terminated` not: a publish that timed out) and retried after
 * a refusal of something else was recorded is still completed, not left half done.
 */
const PASSIVE_RUN_EVENTS: ReadonlySet<string> = new Set<RunEvent['type']>(['run.result_rejected', 'run.notice_emitted']);

/** Whether a run event of this type is passive (see `Decider.passive`). */
export function isPassiveRunEvent(type: string): boolean {
  return PASSIVE_RUN_EVENTS.has(type);
}

/**
 * Whether a command's stored events begin with `result`'s `run.result_recorded`, from its agent
 * under its claim: a result cut short after that record (its `run.routed` not stored) is completed
 * under the claim it was recorded under, not judged again on a claim that has moved on since (the
 * ledger completed the handoff from that record; the claim lapsed and was taken again).
 */
export function beginsWithRecordOf(stored: readonly RunEvent[], result: ClaimedRecord): boolean {
  const first = stored[0];
  return first?.type === 'run.result_recorded' && recordsSameClaim(first.data, result);
}

/**
 * The session variables a definition declares: every MEMORY variable and GATHER field of its
 * agents, sorted, at most MAX_DECLARED_VARIABLES. Any other variable a run holds is implicit.
 */
export function declaredVariables(agents: readonly AgentDefinition[]): string[] {
  const names = new Set<string>();
  for (const agent of agents) {
    for (const variable of agent.memory ?? []) names.add(variable.name);
    for (const field of agent.gather ?? []) names.add(field.name);
  }
  return [...names].sort().slice(0, MAX_DECLARED_VARIABLES);
}

/** Do two starts name the same people (absent and null alike)? */
function samePeople(a: RunPeople, b: RunPeople): boolean {
  return (
    (a.started_by ?? null) === (b.started_by ?? null) &&
    (a.issue_author ?? null) === (b.issue_author ?? null) &&
    (a.trigger_author ?? null) === (b.trigger_author ?? null)
  );
}

function startRun(command: StartRun, state: RunState): DecisionResult<RunEvent> {
  const { data, metadata } = command;
  if (state.status !== 'none') {
    // The same start again (a retry, a redelivery) changes nothing; a start of another workflow or by
    // other people under a taken id is another run, refused rather than silently taken for this one.
    const same = state.workflowRunId === data.workflow_run_id && state.workflow.name === data.workflow.name && samePeople(state.people, data.people);
    return same
      ? accept()
      : reject(
          DomainErrorKind.wrongState,
          RunErrorCode.runAlreadyStarted,
          `run ${data.workflow_run_id} is already started (workflow '${state.workflow.name}'); a new run needs a new workflow_run_id`,
          { workflow: state.workflow.name },
        );
  }
  if (selectNoticeRecipient(data.people) === null) {
    return reject(
      DomainErrorKind.invalid,
      RunErrorCode.noNoticeRecipient,
      'a run needs started_by, issue_author or trigger_author: every stop for a human notifies one of them',
    );
  }
  const entry = entryRoute(data.workflow);
  const cause: RouteCause = { kind: 'start', id: data.workflow_run_id };
  const declared = data.agents !== undefined ? declaredVariables(data.agents) : undefined;
  const started: RunEvent = {
    type: 'run.started',
    data: {
      ...(data.definition_digest !== undefined ? { definition_digest: data.definition_digest } : {}),
      workflow_run_id: data.workflow_run_id,
      project: data.project,
      workflow: { name: data.workflow.name, version: data.workflow.version },
      entry: entry.target,
      people: { ...data.people },
      variables: { ...(data.variables ?? {}) },
      ...(declared !== undefined ? { declared_variables: declared } : {}),
      started_at: metadata.now,
    },
  };
  if (data.agents !== undefined && isConversational(data.workflow, data.agents)) {
    // A conversation (seed 001): the input is the customer's first message; the entry agent's
    // WHEN routes are evaluated on it before any model runs.
    const c = conversationCtx(evolveRun(state, started) as StartedRunState, cause, metadata.now, { agents: data.agents, workflow: data.workflow });
    if (data.input !== undefined && data.input.trim() !== '') receiveMessage(c, deriveId('msg', data.workflow_run_id), data.input);
    deliverMessage(c, entry.target, data.input ?? null, 0, 'start');
    return accept(started, ...c.events);
  }
  return accept<RunEvent>(started, {
    type: 'run.routed',
    data: {
      decision: entry,
      target: entry.target,
      from: null,
      handoff_id: handoffIdFor(data.workflow_run_id, cause),
      hop: 1,
      cause,
      routed_at: metadata.now,
    },
  });
}

function recordResult(command: RecordResult, state: RunState): DecisionResult<RunEvent> {
  const { result, workflow, agents } = command.data;
  const now = command.metadata.now;
  if (state.status === 'none') return notFound();
  if (hasProcessedId(state.processedIds, result.result_id)) return accept();
  if (result.workflow_run_id !== state.workflowRunId || result.project !== state.project) {
    return reject(
      DomainErrorKind.invalid,
      RunErrorCode.wrongRun,
      `result ${result.result_id} belongs to run ${result.workflow_run_id}, not ${state.workflowRunId}`,
    );
  }
  if (state.status !== 'running') {
    return reject(DomainErrorKind.wrongState, RunErrorCode.runNotRunning, `run ${state.workflowRunId} is ${state.status}; it takes no agent results`, {
      status: state.status,
    });
  }
  if (state.awaitingInput) {
    return reject(
      DomainErrorKind.wrongState,
      RunErrorCode.awaitingInput,
      `run ${state.workflowRunId} waits for the customer's message, not for a result from '${result.agent}'`,
    );
  }
  if (result.agent !== state.agent) {
    return reject(DomainErrorKind.invalid, RunErrorCode.unexpectedAgent, `run ${state.workflowRunId} waits for '${state.agent}', not '${result.agent}'`, {
      expected: state.agent,
      got: result.agent,
    });
  }
  const refusal =
    command.data.claim_recorded === true
      ? null
      : checkResultClaim(
          state.handoffId,
          command.data.stored_at !== undefined ? { ...result, stored_at: command.data.stored_at } : result,
          command.data.handoff,
        );
  if (refusal !== null) {
    const kind =
      refusal.code === ResultClaimCode.staleHandoff || refusal.code === ResultClaimCode.handoffNotClaimed
        ? DomainErrorKind.wrongState
        : DomainErrorKind.forbidden;
    return reject(kind, refusal.code, refusal.message, { handoff_id: state.handoffId });
  }
  const mismatch = checkWorkflow(state, workflow);
  if (mismatch !== null) return mismatch;

  const signal = command.data.signal ?? decisionSignalOf(result);
  const cause: RouteCause = { kind: 'result', id: result.result_id };
  const recorded: RunEvent = {
    type: 'run.result_recorded',
    data: {
      result_id: result.result_id,
      run_id: result.run_id,
      agent: result.agent,
      step: state.step,
      signal,
      ...(result.variables !== undefined ? { variables: { ...result.variables } } : {}),
      ...(result.evidence !== undefined ? { evidence: structuredCopy(result.evidence) } : {}),
      // The claim it was accepted under (checked above): the watchdog holds back its requeue, the
      // ledger voids a lapse of it that lands first (docs/handoffs.md rule 4a).
      ...(state.handoffId !== null && result.claim_id !== undefined ? { handoff_id: state.handoffId, claim_id: result.claim_id } : {}),
      ...postedFields(result.body, signal.kind === 'config' ? signal.config : null),
      // The call it reported pending, kept whatever the decision: one that goes on freezes nothing.
      ...(result.pending_tool_call ? { pending_tool_call: structuredCopy(result.pending_tool_call) } : {}),
      recorded_at: now,
    },
  };
  const ctx: OutcomeContext = {
    state,
    cause,
    now,
    agentText: agentTextOf(result),
    ...(command.data.trace_id !== undefined ? { traceId: command.data.trace_id } : {}),
  };

  /** `run.handoff_completed` (success) when this result is the first of the pending handoff's target; else nothing. */
  const ranEvents = (): RunEvent[] => {
    if (state.pendingHandoff === null || state.pendingHandoff.to !== result.agent) return [];
    const c = conversationCtx(evolveRun(state, recorded) as StartedRunState, cause, now, { agents, workflow, execution: command.data.execution });
    handoffRan(c, result.agent);
    return c.events;
  };

  if (result.stop !== undefined) {
    // The agent reports a stop condition itself (seed 003): a stop with a packet, never a route.
    const facts: StopFacts = {
      ...runFacts(state, now, stopIdFor(state.workflowRunId, cause)),
      why: result.stop.why,
      tried: triedBy(result),
      pending: result.pending_tool_call ?? null,
      ...(result.stop.detail !== undefined ? { detail: result.stop.detail } : {}),
      ...(result.stop.cap !== undefined ? { cap: { ...result.stop.cap } } : {}),
      ...(result.stop.why === 'unknown_intent' ? { intents: knownIntents(workflow, agents) } : {}),
    };
    // A handoff's target that stops on its first result ran: its handoff is `success` before the stop.
    return accept(recorded, ...ranEvents(), ...stopEvents(ctx, facts, 'agent'));
  }

  if (isConversational(workflow, agents) && !(signal.kind === 'config' && signal.config.dispatch?.status === 'terminate')) {
    const c = conversationCtx(evolveRun(state, recorded) as StartedRunState, cause, now, { agents, workflow, execution: command.data.execution });
    afterResult(c, result, agentTextOf(result));
    return accept(recorded, ...c.events);
  }
  const decision = resolveRoute({ workflow, agents, step: state.step, agent: state.agent, callback: state.callback, signal });
  // A handoff's target that ends the run (terminate) ran too: its handoff is `success`, and the
  // ended run shows no pending handoff.
  return accept(recorded, ...ranEvents(), ...outcomeEvents(ctx, decision, { workflow, agents, result, signal }));
}

function resume(command: ResumeRun, state: RunState): DecisionResult<RunEvent> {
  const { answer: runAnswer, workflow, agents } = command.data;
  const { now, actorRole } = command.metadata;
  if (state.status === 'none') return notFound();
  const answerId = runAnswer.answer.answer_id;
  if (hasProcessedId(state.processedIds, answerKey(answerId))) return accept();
  if (actorRole !== 'operator' && actorRole !== 'admin') {
    return reject(
      DomainErrorKind.forbidden,
      RunErrorCode.answerForbidden,
      `a ${actorRole ?? 'caller without a role'} may not resume a run; only an operator does`,
    );
  }
  const mismatch = checkWorkflow(state, workflow);
  if (mismatch !== null) return mismatch;
  const cause: RouteCause = { kind: 'resume', id: answerId };
  const ctx: OutcomeContext = { state, cause, now, agentText: null };

  if (runAnswer.kind === 'hold_answer') {
    if (state.status !== 'held') {
      return reject(DomainErrorKind.wrongState, RunErrorCode.runNotHeld, `run ${state.workflowRunId} is ${state.status}, not held`);
    }
    const answer = runAnswer.answer;
    const heldBy = state.hold.cause;
    if (answer.hold_cause !== undefined && (answer.hold_cause.kind !== heldBy.kind || answer.hold_cause.id !== heldBy.id)) {
      // Made for an earlier hold (a second operator's form, rendered before the first answer moved
      // the run on and it held again): fail closed, as a stale stop answer is.
      return reject(
        DomainErrorKind.wrongState,
        RunErrorCode.staleHoldAnswer,
        `the answer was made for the hold caused by ${answer.hold_cause.kind} ${answer.hold_cause.id}; run ${state.workflowRunId} is held now by ${heldBy.kind} ${heldBy.id}`,
        { hold_cause: heldBy },
      );
    }
    const resumed: RunEvent = {
      type: 'run.resumed',
      data: { answer_id: answerId, answered_by: answer.answered_by, from: { kind: 'hold', hold_kind: state.hold.kind, answer }, resumed_at: now },
    };
    const reason = answer.note ?? `${answer.action} by ${answer.answered_by} after a ${state.hold.kind === 'human_gate' ? 'human gate' : 'hold'}`;
    // The call the result before the hold left pending goes with the work wherever the person sends it.
    const handedOn = state.hold.pendingCall != null ? { pending_call: state.hold.pendingCall } : {};
    switch (answer.action) {
      case 'continue': {
        const target = state.hold.pendingTarget;
        if (target === null) {
          // A hold at a terminal step (an agent there that gave no decision: the run does not
          // complete on its own) continues by completing, as the step's advance would — now a
          // person's decision. Anywhere else there is nowhere to go.
          const decision = resolveRoute({
            workflow,
            agents,
            step: state.step,
            agent: state.agent,
            callback: null,
            signal: { kind: 'config', source: 'typed', config: { dispatch: { status: 'advance' } } },
          });
          if (decision.outcome === 'complete') {
            const human: RouteDecision = { ...decision, dispatch: { ...decision.dispatch, origin: 'human', reason } };
            return accept(resumed, ...outcomeEvents(ctx, human, { workflow, agents, result: null }));
          }
          return reject(
            DomainErrorKind.invalid,
            RunErrorCode.nothingToContinue,
            `the hold at step '${state.step}' has nowhere to continue to; reroute or terminate it`,
          );
        }
        return accept(resumed, routedEvent(ctx, humanRoute(target, reason, null), handedOn));
      }
      case 'reroute': {
        const resolved = resolveNamedTarget(answer.target ?? '', workflow, agents, state.step);
        if (!resolved.ok) return reject(DomainErrorKind.invalid, RunErrorCode.resumeTargetUnknown, resolved.problem);
        return accept(resumed, routedEvent(ctx, humanRoute(resolved.target, reason, null), handedOn));
      }
      case 'terminate':
        return accept(resumed, terminatedEvent(reason, 'operator', undefined, now));
      default:
        return assertNever(answer.action, 'hold answer action');
    }
  }

  if (state.status !== 'stopped') {
    return reject(DomainErrorKind.wrongState, RunErrorCode.runNotStopped, `run ${state.workflowRunId} is ${state.status}; it has no open stop packet`);
  }
  const answer = runAnswer.answer;
  const decided = decideResume(state.openStop, answer, { now, actorRole });
  if (!decided.ok) return { ok: false, error: decided.error };
  const effect = decided.effect;
  const resumed: RunEvent = {
    type: 'run.resumed',
    data: {
      answer_id: answerId,
      answered_by: answer.answered_by,
      from: { kind: 'stop', packet_id: state.openStop.packet_id, answer, effect },
      resumed_at: now,
    },
  };
  const here: RouteTarget = { agent: state.agent, step: state.step };
  switch (effect.kind) {
    case 'reroute': {
      // `rework` sends the work back to the agent that did it; any other intent is resolved like a task.
      const resolved = effect.intent === 'rework' ? { ok: true as const, target: here } : resolveNamedTarget(effect.intent, workflow, agents, state.step);
      if (!resolved.ok) return reject(DomainErrorKind.invalid, RunErrorCode.resumeTargetUnknown, resolved.problem);
      // A call frozen in the packet goes with the work to where the person sent it (never dropped,
      // not approved: docs/stop-packets.md rule 4), as it does with a raised cap.
      const pending = state.openStop.pending;
      return accept(resumed, routedEvent(ctx, humanRoute(resolved.target, effect.reason, null), pending !== null ? { pending_call: pending } : {}));
    }
    case 'run_pending_call':
      // The stopped agent carries on with exactly the frozen call; its return address survives.
      return accept(resumed, routedEvent(ctx, humanRoute(here, `approved: ${effect.call.name}`, state.callback), { approved_call: effect.call }));
    case 'raise_cap': {
      // The call the agent was making when the cap stopped it goes back with the raised cap: frozen
      // calls are never dropped (docs/stop-packets.md rule 4). It is not approved: the agent makes it
      // again within the new cap, or not.
      const pending = state.openStop.pending;
      const extra = pending !== null ? { raised_cap: effect.cap, pending_call: pending } : { raised_cap: effect.cap };
      return accept(resumed, routedEvent(ctx, humanRoute(here, `cap raised to ${effect.cap}`, state.callback), extra));
    }
    case 'continue': {
      // Carry on as if the agent had advanced: callback, then workflow edge (seed 000 §3 rules 3–4).
      const decision = resolveRoute({
        workflow,
        agents,
        step: state.step,
        agent: state.agent,
        callback: state.callback,
        signal: { kind: 'config', source: 'typed', config: { dispatch: { status: 'advance' } } },
      });
      const human: RouteDecision = { ...decision, dispatch: { ...decision.dispatch, origin: 'human' } };
      return accept(resumed, ...outcomeEvents(ctx, human, { workflow, agents, result: null }));
    }
    case 'stop':
      return accept(resumed, terminatedEvent(effect.reason, 'operator', undefined, now));
    default:
      return assertNever(effect, 'resume effect');
  }
}

function stopRun(command: StopRun, state: RunState): DecisionResult<RunEvent> {
  const { data, metadata } = command;
  if (state.status === 'none') return notFound();
  if (hasProcessedId(state.processedIds, data.packet_id)) return accept();
  if (state.status === 'completed' || state.status === 'terminated') {
    return reject(DomainErrorKind.wrongState, RunErrorCode.runNotRunning, `run ${state.workflowRunId} is ${state.status}; it cannot stop`, {
      status: state.status,
    });
  }
  if (state.status === 'stopped') {
    return reject(
      DomainErrorKind.wrongState,
      RunErrorCode.runAlreadyStopped,
      `run ${state.workflowRunId} is already stopped on packet ${state.openStop.packet_id}`,
    );
  }
  const facts: StopFacts = {
    ...runFacts(state, metadata.now, data.packet_id),
    // A circuit stop is about the agent whose circuit opened, which need not be the run's own.
    ...(data.agent !== undefined ? { agent: data.agent } : {}),
    why: data.why,
    tried: data.tried ?? [],
    // The stop names the call, or the run holds one: frozen, never dropped (docs/stop-packets.md
    // rule 4) — a held run's (the call the result before the hold left pending), or the call the
    // working agent's handoff carries (handed on, or approved and not yet made).
    pending: data.pending ?? (state.status === 'held' ? state.hold.pendingCall : state.handoffCall) ?? null,
    ...(data.trace_ids !== undefined ? { trace_ids: data.trace_ids } : {}),
    ...(data.detail !== undefined ? { detail: data.detail } : {}),
    ...(data.cap !== undefined ? { cap: data.cap } : {}),
  };
  // The watchdog counted the hop that spent the budget; hops the run routed before its stop landed
  // (a fast agent) count too: the packet says what the run used, and a raise must exceed it.
  if (data.cap?.name === HopCapName && state.hops > (data.cap.used ?? data.cap.limit)) {
    facts.cap = { ...data.cap, used: state.hops };
    facts.detail = clip(`${data.detail ?? 'hop budget spent'}; the run reached hop ${state.hops} before the stop landed`, 1_000);
  }
  const ctx: OutcomeContext = { state, cause: { kind: 'stop', id: data.packet_id }, now: metadata.now, agentText: null };
  return accept(...stopEvents(ctx, facts, 'external', undefined, data.escalation, data.on_behalf_of));
}

function rejectResult(command: RejectResult, state: RunState): DecisionResult<RunEvent> {
  const { data, metadata } = command;
  if (state.status === 'none') return notFound();
  if (hasProcessedId(state.processedIds, refusedKey(data.refused ?? 'result', data.result_id))) return accept();
  return accept({
    type: 'run.result_rejected',
    data: {
      result_id: data.result_id,
      agent: data.agent,
      code: data.code,
      message: clip(data.message, 4_000),
      rejected_at: metadata.now,
      ...(data.refused !== undefined ? { refused: data.refused } : {}),
      ...(data.handoff_id !== undefined ? { handoff_id: data.handoff_id } : {}),
      ...(data.claim_id !== undefined ? { claim_id: data.claim_id } : {}),
    },
  });
}

function sessionMessage(command: SessionMessageCommand, state: RunState): DecisionResult<RunEvent> {
  const { data, metadata } = command;
  if (state.status === 'none') return notFound();
  if (hasProcessedId(state.processedIds, messageKey(data.message_id))) return accept();
  if (state.status !== 'running') {
    // Held, stopped, completed or terminated: nobody would answer it (a held or stopped run waits for a person).
    return reject(DomainErrorKind.wrongState, RunErrorCode.notAwaitingInput, `run ${state.workflowRunId} is ${state.status}; it takes no customer messages`, {
      status: state.status,
      agent: state.agent,
    });
  }
  const mismatch = checkWorkflow(state, data.workflow);
  if (mismatch !== null) return mismatch;
  const c = conversationCtx(state, { kind: 'message', id: data.message_id }, metadata.now, data);
  if (!state.awaitingInput) {
    // An agent works on the previous turn: a conversation keeps the message for the next time it
    // waits for the customer (decided there, in order); a workflow run takes no customer messages.
    if (!isConversational(data.workflow, data.agents)) {
      return reject(
        DomainErrorKind.wrongState,
        RunErrorCode.notAwaitingInput,
        `run ${state.workflowRunId} is not a conversation; it takes no customer messages`,
        {
          status: state.status,
          agent: state.agent,
        },
      );
    }
    if (state.queuedMessages.length >= MAX_QUEUED_MESSAGES) {
      return reject(
        DomainErrorKind.wrongState,
        RunErrorCode.messageQueueFull,
        `run ${state.workflowRunId} already holds ${state.queuedMessages.length} customer messages while '${state.agent}' works; send the message after its reply`,
        { status: state.status, agent: state.agent, queued: state.queuedMessages.length },
      );
    }
    queueMessage(c, data.message_id, data.text, data.sent_by, data.relayed_by);
    return accept(...c.events);
  }
  receiveMessage(c, data.message_id, data.text, { sentBy: data.sent_by, relayedBy: data.relayed_by });
  deliverMessage(c, { agent: state.agent, step: state.step }, data.text, 0, 'message');
  return accept(...c.events);
}

function failHandoff(command: HandoffFailedCommand, state: RunState): DecisionResult<RunEvent> {
  const { data, metadata } = command;
  if (state.status === 'none') return notFound();
  const cause: RouteCause = { kind: 'handoff_failed', id: data.handoff_id };
  const c = conversationCtx(state, cause, metadata.now, data);
  // ON_FAILURE applies to a running run only; a stopped or held one records the child's end and
  // stays as it is until a person answers (a stop racing the child's failure is not undone).
  const outcome = handoffFailed(c, data.handoff_id, data.code, data.message, data.reason, state.status === 'running');
  if (outcome === null) return stepHandoffEnded(command, state, cause);
  if (outcome === 'done') return accept(...c.events);
  // ON_FAILURE ESCALATE: hold the run for a person, with the caller as where `continue` goes.
  const pending = state.pendingHandoff!;
  const reason =
    data.reason === 'timeout'
      ? `handoff ${pending.from} → ${pending.to} timed out: no result from ${pending.to} by its deadline (${data.code}); ON_FAILURE ESCALATE`
      : data.reason === 'ended'
        ? `handoff ${pending.from} → ${pending.to} ended without a result from ${pending.to} (${data.code}); ON_FAILURE ESCALATE`
        : `handoff ${pending.from} → ${pending.to} failed before ${pending.to} accepted it (${data.code}); ON_FAILURE ESCALATE`;
  const caller = { agent: pending.from, step: pending.fromStep };
  const decision = engineHold('handoff', caller, reason);
  // The hold names the caller — the agent a person's `continue` runs (its `pending_target`), whose
  // turn it is now that the child is gone — not the failed child: `run.held.agent` / `step` (the run's
  // agent from here, the inbox item's), and the notice.
  const ctx: OutcomeContext = { state: { ...c.state, ...caller }, cause, now: metadata.now, agentText: null };
  return accept(...c.events, ...outcomeEvents(ctx, decision, { workflow: data.workflow, agents: data.agents, result: null }));
}

/**
 * The handoff a running run's current agent works on ended without a result (failed by its
 * claimer or a person, abandoned by a person), or was never created (the ledger refused it: the
 * agent left the project's roster after the run pinned its definition, say): nothing will route
 * the run, so it holds for a person — `continue` dispatches the same agent again (a new handoff),
 * `reroute` another, `terminate` ends it. Any other handoff, or a run not running on it, is not
 * this run's concern; a deadline is a returnable child's only.
 */
function stepHandoffEnded(command: HandoffFailedCommand, state: RunState, cause: RouteCause): DecisionResult<RunEvent> {
  const { data, metadata } = command;
  if (data.reason === HandoffFailureReason.timeout || state.status !== 'running' || state.handoffId !== data.handoff_id) return accept();
  // A refused create of a handoff whose agent already answered (a conversation waiting for the
  // customer after the agent's turn) is no news: that handoff was created, and worked.
  const refused = data.reason === undefined || data.reason === HandoffFailureReason.createRefused;
  if (refused && state.awaitingInput) return accept();
  const what =
    data.reason === HandoffFailureReason.ended
      ? `handoff ${data.handoff_id} of '${state.agent}' ended without a result`
      : `the ledger refused to create handoff ${data.handoff_id} to '${state.agent}'`;
  const reason = clip(`${what} (${data.code}): ${data.message}`, 1_000);
  const ctx: OutcomeContext = { state, cause, now: metadata.now, agentText: null };
  const decision = engineHold('no_action_default', { agent: state.agent, step: state.step }, reason);
  return accept(...outcomeEvents(ctx, decision, { workflow: data.workflow, agents: data.agents, result: null }));
}

/** A hold the engine decides for a person (no agent decided it): `continue` goes to `pendingTarget`. */
function engineHold(rule: RouteDecision['rule'], pendingTarget: RouteTarget, reason: string): RouteDecision {
  return {
    rule,
    outcome: 'hold',
    hold_kind: 'hold',
    pending_target: pendingTarget,
    dispatch: { status: 'hold', reason, origin: 'engine_fallback' },
    callback_after: null,
  };
}

// ---------------------------------------------------------------------------------------------

interface OutcomeContext {
  state: StartedRunState;
  cause: RouteCause;
  now: string;
  /** Agent-authored text to excerpt in a notice (neutralised there), if any. */
  agentText: string | null;
  /** The trace of the message that caused the decision (a result's): a stop links it (seed 003: the packet points at the trace). */
  traceId?: string;
}

interface Definitions {
  workflow: WorkflowDefinition;
  agents: readonly AgentDefinition[];
  result: AgentResult | null;
  /** How the result gave its decision (absent or unreadable: the no-action default applied). */
  signal?: DecisionSignal;
}

/**
 * The events of one routing decision. Each stop-for-a-human outcome (hold, human gate, terminal
 * step, stop packet) carries exactly one `run.notice_emitted`; dispatch and terminate carry none.
 */
function outcomeEvents(ctx: OutcomeContext, decision: RouteDecision, defs: Definitions): RunEvent[] {
  switch (decision.outcome) {
    case 'dispatch': {
      // A callee that gave no decision Baton could read goes back to its caller (rule 5); a call it
      // left pending goes back with it, for the caller to make or not (never dropped, not approved).
      const pending = defs.result?.pending_tool_call ?? null;
      const decisionless = decision.rule === 'no_action_default' && defs.signal !== undefined && defs.signal.kind !== 'config';
      return [routedEvent(ctx, decision, pending !== null && decisionless ? { pending_call: structuredCopy(pending) } : {})];
    }
    case 'hold': {
      const reason = decision.dispatch.reason ?? 'agent dispatched hold';
      const result = defs.result;
      const pending = result?.pending_tool_call ?? null;
      if (result !== null && pending !== null && decision.hold_kind === 'hold' && holdsItsCall(decision, defs.signal)) {
        // An agent that holds with a tool call pending, or that gave no decision with one pending,
        // waits for a person to approve that call (seed 003: waiting_human has a pending tool; a
        // real freeze is never dropped): a policy stop whose packet freezes the call and whose
        // form approves or denies it.
        const facts: StopFacts = {
          ...runFacts(ctx.state, ctx.now, stopIdFor(ctx.state.workflowRunId, ctx.cause)),
          why: 'policy',
          tried: triedBy(result),
          pending,
          detail: reason,
        };
        // The hold it records: the agent's own (source agent), or the no-action default Baton made
        // (source router, attributed to the engine with its notice: seed 000 §5).
        return stopEvents(ctx, facts, decision.dispatch.origin === 'engine_fallback' ? 'router' : 'agent', decision);
      }
      const noticeReason: NoticeReason = decision.hold_kind === 'human_gate' ? 'human_gate' : 'hold';
      return [
        {
          type: 'run.held',
          data: {
            decision,
            hold_kind: decision.hold_kind,
            reason,
            pending_target: decision.pending_target,
            agent: ctx.state.agent,
            step: ctx.state.step,
            cause: ctx.cause,
            // A result that went on with a call pending (into a human gate, or nowhere) froze
            // nothing, but its call is not dropped: the person sees it and a continue hands it on.
            ...(pending !== null ? { pending_call: structuredCopy(pending) } : {}),
            held_at: ctx.now,
          },
        },
        noticeEvent(ctx, noticeReason, reason),
      ];
    }
    case 'terminate':
      return [terminatedEvent(decision.dispatch.reason ?? 'agent dispatched terminate', decision.dispatch.origin, decision, ctx.now)];
    case 'complete': {
      const reason = decision.dispatch.reason ?? `workflow '${ctx.state.workflow.name}' completed`;
      return [
        { type: 'run.completed', data: { decision, agent: ctx.state.agent, step: ctx.state.step, completed_at: ctx.now } },
        noticeEvent(ctx, 'terminal', reason),
      ];
    }
    case 'unresolved': {
      // The router's unknown kind is unknown_intent (seed 003): stop with a packet, never guess.
      const result = defs.result;
      const facts: StopFacts = {
        ...runFacts(ctx.state, ctx.now, stopIdFor(ctx.state.workflowRunId, ctx.cause)),
        why: 'unknown_intent',
        // Before any result (a start that names nothing) the stop is "before the loop": nothing tried.
        tried: result ? triedBy(result) : [],
        pending: result?.pending_tool_call ?? null,
        detail: decision.problem,
        intents: knownIntents(defs.workflow, defs.agents),
      };
      // The unresolved decision (its engine_fallback hold and `unresolved target: …` reason) is recorded with the stop.
      return stopEvents(ctx, facts, 'router', decision);
    }
    default:
      return assertNever(decision, 'route decision');
  }
}

/**
 * Whether a hold keeps the result's pending call frozen: the agent's own hold, or the no-action
 * hold of a result that gave no readable decision. An advance with nowhere to go (also a no-action
 * hold) was a decision to go on, which leaves no call waiting.
 */
function holdsItsCall(decision: RouteDecision & { outcome: 'hold' }, signal: DecisionSignal | undefined): boolean {
  if (decision.dispatch.origin === 'agent') return true;
  return decision.rule === 'no_action_default' && signal !== undefined && signal.kind !== 'config';
}

function routedEvent(
  ctx: OutcomeContext,
  decision: RouteDecision & { outcome: 'dispatch' },
  extra: { approved_call?: AgentResult['pending_tool_call']; raised_cap?: number; pending_call?: AgentResult['pending_tool_call'] } = {},
): RunEvent {
  return {
    type: 'run.routed',
    data: {
      decision,
      target: decision.target,
      from: { agent: ctx.state.agent, step: ctx.state.step },
      handoff_id: handoffIdFor(ctx.state.workflowRunId, ctx.cause),
      hop: ctx.state.hops + 1,
      cause: ctx.cause,
      ...(extra.approved_call ? { approved_call: extra.approved_call } : {}),
      ...(extra.raised_cap !== undefined ? { raised_cap: extra.raised_cap } : {}),
      ...(extra.pending_call ? { pending_call: extra.pending_call } : {}),
      routed_at: ctx.now,
    },
  };
}

function stopEvents(
  ctx: OutcomeContext,
  facts: StopFacts,
  source: 'agent' | 'router' | 'external',
  decision?: RouteDecision,
  escalation?: StopEscalation,
  onBehalfOf?: string,
): RunEvent[] {
  // The trace of the result that led here, after any the agent named itself (buildStop dedupes).
  const { packet } = buildStop(ctx.traceId !== undefined ? { ...facts, trace_ids: [...(facts.trace_ids ?? []), ctx.traceId] } : facts);
  return [
    {
      type: 'run.stopped',
      data: {
        packet,
        source,
        cause: ctx.cause,
        stopped_at: ctx.now,
        ...(decision !== undefined ? { decision } : {}),
        ...(escalation !== undefined ? { escalation } : {}),
        ...(onBehalfOf !== undefined ? { on_behalf_of: onBehalfOf } : {}),
      },
    },
    // The notice names the agent its packet names (a circuit stop's: whose circuit opened).
    noticeEvent(ctx, 'stop', `run stopped (${packet.why})${packet.detail ? `: ${packet.detail}` : ''}`, packet.packet_id, packet.agent),
  ];
}

function noticeEvent(ctx: OutcomeContext, reason: NoticeReason, headline: string, stopId?: string, agent = ctx.state.agent): RunEvent {
  // start_run refuses a run with nobody to notify, so a started run always has a recipient.
  const recipient = selectNoticeRecipient(ctx.state.people) ?? { handle: 'unknown', source: 'trigger_author' as const };
  return {
    type: 'run.notice_emitted',
    data: {
      notice: buildHumanActionNotice({
        noticeId: noticeIdFor(ctx.state.workflowRunId, ctx.cause),
        project: ctx.state.project,
        workflowRunId: ctx.state.workflowRunId,
        reason,
        recipient,
        headline,
        agentText: ctx.agentText,
        step: ctx.state.step,
        agent,
        ...(stopId !== undefined ? { stopId } : {}),
        now: ctx.now,
      }),
    },
  };
}

function terminatedEvent(reason: string, origin: ResolvedDispatch['origin'] | 'operator', decision: RouteDecision | undefined, now: string): RunEvent {
  return { type: 'run.terminated', data: { reason: clip(reason, 4_000), origin, ...(decision ? { decision } : {}), terminated_at: now } };
}

/** A route decided by an operator's answer (rule `resume`, origin `human`). */
function humanRoute(target: RouteTarget, reason: string, callbackAfter: string | null): RouteDecision & { outcome: 'dispatch' } {
  return {
    rule: 'resume',
    outcome: 'dispatch',
    target,
    dispatch: { status: 'advance', reason: clip(reason, 4_000), origin: 'human' },
    callback_after: callbackAfter === target.agent ? null : callbackAfter,
  };
}

/**
 * What every stop packet of a workflow run is built from. Its `run_id` is the run's own id, the
 * same on every packet of the run whoever stopped it — an agent's own stop, the router's, the
 * watchdog's (seed 003: "Same inbox. Same run_id."); the agent's id for its run of a step stays on
 * the result it sent (`run.result_recorded.run_id`). Packets stored before carry what they had.
 */
function runFacts(state: StartedRunState, now: string, packetId: string) {
  return {
    packet_id: packetId,
    now,
    run_id: state.workflowRunId,
    workflow_run_id: state.workflowRunId,
    project: state.project,
    agent: state.agent,
    step: state.step,
  };
}

/** The names an operator may type to reroute an unknown-intent stop: step ids, then agent names. */
function knownIntents(workflow: WorkflowDefinition, agents: readonly AgentDefinition[]): string[] {
  return [...new Set([...workflow.steps.map((s) => s.id), ...agents.map((a) => a.name)])];
}

/** `posted_body` / `posted_body_truncated` of a recorded result: what the agent said, posted with one canonical sentinel. */
function postedFields(body: string | undefined, decision: AgentRunConfig | null): { posted_body?: string; posted_body_truncated?: boolean } {
  // The posted sentinel is the durable record of the decision taken: an agent's claim of
  // `engine_fallback` provenance is not Baton's record of it (seed 000 §5), so it says `agent`.
  const recorded = decision?.dispatch?.origin === 'engine_fallback' ? { ...decision, dispatch: { ...decision.dispatch, origin: 'agent' as const } } : decision;
  const posted = postedBodyOf(body, recorded);
  if (posted === null) return {};
  return posted.truncated ? { posted_body: posted.text, posted_body_truncated: true } : { posted_body: posted.text };
}

/**
 * The `tried` of a stop that follows an agent's result: what the agent says it tried, else the agent
 * itself — it ran, so the stop is not "before the loop", and seed 003 calls a stop with no tried a
 * shrug (an empty list is read as none named).
 */
function triedBy(result: AgentResult): StopFacts['tried'] {
  return result.tried !== undefined && result.tried.length > 0 ? result.tried : [result.agent];
}

function agentTextOf(result: AgentResult): string | null {
  const text = result.deliverable ?? (result.body !== undefined ? stripSentinels(result.body) : '');
  return text.trim() === '' ? null : text.trim();
}

function checkWorkflow(state: StartedRunState, workflow: WorkflowDefinition): DecisionResult<RunEvent> | null {
  if (workflow.name === state.workflow.name && workflow.version === state.workflow.version) return null;
  return reject(
    DomainErrorKind.invalid,
    RunErrorCode.workflowMismatch,
    `run ${state.workflowRunId} runs workflow '${state.workflow.name}' v${state.workflow.version}, not '${workflow.name}' v${workflow.version}`,
  );
}

function notFound(): DecisionResult<RunEvent> {
  return reject(DomainErrorKind.notFound, RunErrorCode.runNotFound, 'the run has not started');
}

/** A plain-data copy, so the event never shares arrays with the caller's result. */
function structuredCopy<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}
