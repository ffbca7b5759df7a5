import { AgentResult, AgentRunConfig, RunEventSchemas } from '@baton/contracts';
import { agents, workflow } from '../routing/test-fixtures';
import { RecordResult, ResumeRun, RunCommandMetadata, StartRun } from './commands';
import { RunEvent } from './state';

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
