import { AgentResult, AgentRunConfig, RunEventSchemas } from '@baton/contracts';
import type { Decider, DecisionResult } from '../decider';
import { agents, workflow } from '../routing/test-fixtures';
import { RecordResult, ResumeRun, RunCommand, RunCommandMetadata, StartRun } from './commands';
import { decideRun, runDecider } from './decide';
import { RunEvent, RunState } from './state';

/** Test helpers for the run aggregate (not exported from the library). */
export { agents, workflow };

export const RUN = 'wr-1';
export const NOW = '2025-01-01T00:00:00.000Z';
export const meta: RunCommandMetadata = { now: NOW, actor: 'router' };
export const operatorMeta: RunCommandMetadata = { now: NOW, actor: 'olga', actorRole: 'operator' };

export function startCmd(people: StartRun['data']['people'] = { started_by: 'sam', issue_author: 'ivy', trigger_author: 'tom' }): StartRun {
  return { type: 'start_run', data: { workflow_run_id: RUN, project: 'demo', workflow, people }, metadata: meta };
}

export function result(id: string, agent: string, extra: Partial<AgentResult> = {}): AgentResult {
  return { result_id: id, run_id: `ar-${id}`, project: 'demo', workflow_run_id: RUN, agent, produced_at: NOW, ...extra };
}

export function resultCmd(id: string, agent: string, extra: Partial<AgentResult> = {}): RecordResult {
  return { type: 'record_result', data: { result: result(id, agent, extra), workflow, agents }, metadata: meta };
}

export function decided(id: string, agent: string, decision: AgentRunConfig, extra: Partial<AgentResult> = {}): RecordResult {
  return resultCmd(id, agent, { decision, ...extra });
}

export function holdAnswer(answerId: string, action: 'continue' | 'reroute' | 'terminate', target?: string): ResumeRun {
  return {
    type: 'resume',
    data: {
      answer: {
        kind: 'hold_answer',
        answer: { answer_id: answerId, action, ...(target ? { target } : {}), answered_by: 'olga', answered_at: NOW },
      },
      workflow,
      agents,
    },
    metadata: operatorMeta,
  };
}

/** Every event a decider emits must be a valid payload of its registered schema. */
export function expectValidEvents(events: readonly RunEvent[]): void {
  for (const event of events) {
    const schema = RunEventSchemas[event.type];
    const parsed = schema.safeParse(event.data);
    if (!parsed.success) throw new Error(`${event.type} payload is invalid: ${parsed.error.message}`);
  }
}

/** The claim id tests give the agent that holds handoff `handoffId`. */
export const claimIdFor = (handoffId: string): string => `claim-${handoffId}`;

/**
 * A result command as the router sends it when the agent claimed the run's current handoff: the
 * parts the test left out (`handoff_id`, `claim_id`, the router's read of the handoff) are filled
 * from `state`, with the handoff claimed by the result's agent. For tests about routing, not about
 * claims: a test of the claim rule sets those parts itself (and uses `runDecider`).
 */
export function withCurrentClaim(command: RunCommand, state: RunState): RunCommand {
  if (command.type !== 'record_result' || state.status === 'none' || state.handoffId === null) return command;
  const handoffId = state.handoffId;
  const result = command.data.result;
  const handoff_id = result.handoff_id ?? handoffId;
  const claim_id = result.claim_id ?? claimIdFor(handoff_id);
  const handoff =
    command.data.handoff !== undefined
      ? command.data.handoff
      : { handoff_id: handoffId, status: 'claimed' as const, claim: { claim_id: claimIdFor(handoffId), claimed_by: result.agent } };
  return { ...command, data: { ...command.data, result: { ...result, handoff_id, claim_id }, handoff } };
}

/** `decideRun` for a result sent under the current claim (see {@link withCurrentClaim}). */
export function decideClaimed(command: RunCommand, state: RunState): DecisionResult<RunEvent> {
  return decideRun(withCurrentClaim(command, state), state);
}

/** The run decider with every result sent under the current claim (see {@link withCurrentClaim}). */
export const claimedRunDecider: Decider<RunCommand, RunEvent, RunState> = { ...runDecider, decide: decideClaimed };
