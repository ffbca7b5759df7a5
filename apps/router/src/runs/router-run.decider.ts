import type { AgentResult, DecisionSignal, RunAnswer } from '@baton/contracts';
import {
  accept,
  assertNever,
  decideRun,
  DomainErrorKind,
  evolveRun,
  answerKey,
  hasProcessedId,
  messageKey,
  beginsWithRecordOf,
  runDecider,
  initialRunState,
  reject,
  RunErrorCode,
  foreignRefusalsOf,
  idleRefusalsOf,
  waitsForNoResult,
  type Decider,
  type HandoffClaimView,
  type HandoffFailureReason,
  type DecisionResult,
  type RejectResult,
  type RunCommandMetadata,
  type RunEvent,
  type RunState,
  type StartRun,
  type StopRun,
} from '@baton/domain';
import { pinnedForRun, type DefinitionState } from '../definitions/definition.decider';

/**
 * The run decider as the router drives it. `record_result` and `resume` need the workflow the run
 * is pinned to, which is only known once the run is folded; so those commands carry the
 * project's published definitions and the lookup happens inside `decide`, on the folded state.
 * One decider object for every command, so the event store's folded-state cache is shared.
 */
export type RouterRunCommand =
  | { kind: 'start'; command: StartRun }
  | {
      kind: 'reject';
      command: RejectResult;
      /**
       * Most refused results of an agent the run does not wait for that the run records
       * (`ROUTER_FOREIGN_REFUSALS_PER_RUN`; absent or 0: no cap): past it the refusal is refused
       * `foreign_refusals_spent`, and the router dead-letters the result instead. The same cap holds
       * the run's own agent's refused results while the run waits for no result (held, stopped,
       * finished, waiting for the customer): past it `idle_refusals_spent`.
       */
      foreignCap?: number;
    }
  | { kind: 'stop'; command: StopRun }
  | {
      kind: 'result';
      result: AgentResult;
      /** What the result decided when the edge read it apart (a typed decision that breaks the contract); else derived from the result. */
      signal?: DecisionSignal;
      definitions: DefinitionState;
      metadata: RunCommandMetadata;
      handoff?: HandoffClaimView | null;
      /** When the inbox stored the result (ISO; rule 4b). */
      storedAt?: string;
      /** The trace id of the result's message (a stop it causes links it). */
      traceId?: string;
      /** Its `run.result_recorded` under the same claim is stored: the claim rule is not judged again (set by `resuming`). */
      claimRecorded?: true;
    }
  | { kind: 'answer'; answer: RunAnswer; definitions: DefinitionState; metadata: RunCommandMetadata }
  | {
      kind: 'message';
      message: { message_id: string; text: string; sent_by?: string; relayed_by?: string };
      definitions: DefinitionState;
      metadata: RunCommandMetadata;
    }
  | {
      kind: 'handoff_failed';
      failure: { handoff_id: string; code: string; message: string; reason?: HandoffFailureReason };
      definitions: DefinitionState;
      metadata: RunCommandMetadata;
    };

/** Refusals the router adds to the run decider's ({@link RunErrorCode}). */
export const RouterRunErrorCode = {
  /** The run's pinned workflow version is not in the definitions given (a stale cache: re-read). */
  definitionMissing: 'definition_missing',
  /** The result names an agent the run's project definition does not list. */
  unknownAgent: 'unknown_agent',
  /**
   * A refused result of an agent the run does not wait for, when the run already holds its cap of
   * such refusals of that agent (`ROUTER_FOREIGN_REFUSALS_PER_RUN`): not recorded on the run; the
   * router dead-letters the result with this reason, under its sender's budget of letters.
   */
  foreignRefusalsSpent: 'foreign_refusals_spent',
  /**
   * A refused result of the agent the run waited for, sent while the run waits for no agent result
   * (held, stopped, completed, terminated, or waiting for the customer: `run_not_running`,
   * `awaiting_input`), when the run already holds its cap of such refusals of that agent
   * (`ROUTER_FOREIGN_REFUSALS_PER_RUN`): not recorded on the run; the router dead-letters the
   * result with this reason, under its sender's budget of letters.
   */
  idleRefusalsSpent: 'idle_refusals_spent',
} as const;

function decide(command: RouterRunCommand, state: RunState): DecisionResult<RunEvent> {
  switch (command.kind) {
    case 'start':
    case 'stop':
      return decideRun(command.command, state);
    case 'reject':
      return decideReject(command.command, state, command.foreignCap ?? 0);
    case 'result': {
      const { result, definitions, metadata } = command;
      if (state.status === 'none') return reject(DomainErrorKind.notFound, RunErrorCode.runNotFound, `run ${result.workflow_run_id} has not started`);
      if (hasProcessedId(state.processedIds, result.result_id)) return accept();
      const pinned = pinnedForRun(definitions, state);
      if (pinned === undefined) return missingDefinition(state);
      if (!pinned.agents.some((agent) => agent.name === result.agent)) {
        return reject(DomainErrorKind.invalid, RouterRunErrorCode.unknownAgent, `'${result.agent}' is not an agent of project '${state.project}'`, {
          agent: result.agent,
        });
      }
      return decideRun(
        {
          type: 'record_result',
          data: {
            result,
            ...(command.signal !== undefined ? { signal: command.signal } : {}),
            workflow: pinned.workflow,
            agents: pinned.agents,
            execution: pinned.definition.execution,
            handoff: command.handoff ?? null,
            ...(command.storedAt !== undefined ? { stored_at: command.storedAt } : {}),
            ...(command.traceId !== undefined ? { trace_id: command.traceId } : {}),
            ...(command.claimRecorded === true ? { claim_recorded: true as const } : {}),
          },
          metadata,
        },
        state,
      );
    }
    case 'answer': {
      const { answer, definitions, metadata } = command;
      if (state.status === 'none') return reject(DomainErrorKind.notFound, RunErrorCode.runNotFound, 'the run has not started');
      if (hasProcessedId(state.processedIds, answerKey(answer.answer.answer_id))) return accept();
      const pinned = pinnedForRun(definitions, state);
      if (pinned === undefined) return missingDefinition(state);
      return decideRun({ type: 'resume', data: { answer, workflow: pinned.workflow, agents: pinned.agents }, metadata }, state);
    }
    case 'message': {
      const { message, definitions, metadata } = command;
      if (state.status === 'none') return reject(DomainErrorKind.notFound, RunErrorCode.runNotFound, 'the run has not started');
      if (hasProcessedId(state.processedIds, messageKey(message.message_id))) return accept();
      const pinned = pinnedForRun(definitions, state);
      if (pinned === undefined) return missingDefinition(state);
      return decideRun(
        { type: 'session_message', data: { ...message, workflow: pinned.workflow, agents: pinned.agents, execution: pinned.definition.execution }, metadata },
        state,
      );
    }
    case 'handoff_failed': {
      const { failure, definitions, metadata } = command;
      if (state.status === 'none') return reject(DomainErrorKind.notFound, RunErrorCode.runNotFound, 'the run has not started');
      const pinned = pinnedForRun(definitions, state);
      if (pinned === undefined) return missingDefinition(state);
      return decideRun({ type: 'handoff_failed', data: { ...failure, workflow: pinned.workflow, agents: pinned.agents }, metadata }, state);
    }
    default:
      return assertNever(command, 'router run command');
  }
}

/**
 * Record a refusal (`reject_result`), unless the run already holds `cap` (0: no cap) refusals of
 * its sender's results that it records without bound otherwise:
 *
 * - a refused result of an agent the run does not wait for (`foreignRefusals`): an agent may
 *   publish a result naming any run of its project, and each refusal recorded is an event on that
 *   run, read by every later decision on it — past the cap `foreign_refusals_spent`;
 * - a refused result of the agent the run waited for, while the run waits for no agent result
 *   (held, stopped, finished, waiting for the customer: `idleRefusals`) — a finished run's last
 *   agent could append to it for ever — past the cap `idle_refusals_spent`. These refusals
 *   (`run_not_running`, `awaiting_input`) are none the guards read as a failure on the run
 *   (`OwnTurnRefusalCodes`), so the circuit loses nothing it stops a run for.
 *
 * Both are counted in the run's own events, the same for every router instance. The run's own
 * agent's refusals on its turn (a stale or missing claim, the wrong workflow) are always recorded:
 * the circuit reads them, and stops the run after `circuitFailures` of them — from then on they
 * are refusals of a stopped run. A redelivered refusal that is recorded already is accepted with
 * nothing new, whatever the count.
 */
function decideReject(command: RejectResult, state: RunState, cap: number): DecisionResult<RunEvent> {
  const { data } = command;
  if (cap <= 0 || state.status === 'none' || (data.refused ?? 'result') !== 'result') return decideRun(command, state);
  const foreign = data.agent !== state.agent;
  if (!foreign && !waitsForNoResult(state)) return decideRun(command, state);
  if (hasProcessedId(state.processedIds, data.result_id)) return accept();
  const recorded = foreign ? foreignRefusalsOf(state, data.agent) : idleRefusalsOf(state, data.agent);
  if (recorded < cap) return decideRun(command, state);
  const held = foreign
    ? `which waits for '${state.agent}' and holds ${recorded} refused results of '${data.agent}' already`
    : `which is ${state.status}${state.status === 'running' ? ' and waits for the customer' : ''} and holds ${recorded} refused results of '${data.agent}' sent since it waits for no result already`;
  return reject(
    DomainErrorKind.forbidden,
    foreign ? RouterRunErrorCode.foreignRefusalsSpent : RouterRunErrorCode.idleRefusalsSpent,
    `result ${data.result_id} of '${data.agent}' refused (${data.code}: ${data.message}); not recorded on run ${state.workflowRunId}, ${held} (ROUTER_FOREIGN_REFUSALS_PER_RUN ${cap})`,
    { agent: data.agent, refused_code: data.code, recorded, cap },
  );
}

function missingDefinition(state: Exclude<RunState, { status: 'none' }>): DecisionResult<RunEvent> {
  return reject(
    DomainErrorKind.notFound,
    RouterRunErrorCode.definitionMissing,
    `workflow '${state.workflow.name}' v${state.workflow.version} of run ${state.workflowRunId} is not among the published definitions`,
  );
}

export const routerRunDecider: Decider<RouterRunCommand, RunEvent, RunState> = {
  decide,
  evolve: evolveRun,
  initialState: initialRunState,
  passive: runDecider.passive,
  // A result recorded (`run.result_recorded` stored) and cut short before `run.routed` is completed
  // under the claim it was recorded under (as `runDecider.resuming` does).
  resuming: (command, stored) => (command.kind === 'result' && beginsWithRecordOf(stored, command.result) ? { ...command, claimRecorded: true } : command),
};
