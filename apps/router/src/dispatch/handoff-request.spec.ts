import { CompleteFromResultCommandSchema, CreateHandoffCommandSchema } from '@baton/contracts';
import { calledBySentence } from '@baton/domain';
import { completeFromResultRequest, createHandoffRequest, MAX_CONTEXT_VARIABLES_CHARS, type RunRouted } from './handoff-request';

const NOW = '2025-01-01T00:00:00.000Z';
const agents = [
  { name: 'issue', role: 'Triage' },
  { name: 'context', role: 'Context gatherer' },
];

const routed = (rule: 'function_call' | 'workflow_edge' | 'entry', from: RunRouted['from']): RunRouted => ({
  decision: {
    rule,
    outcome: 'dispatch',
    target: { agent: 'context', step: 'triage' },
    dispatch: { status: 'advance', reason: null, origin: 'agent' },
    callback_after: rule === 'function_call' ? 'issue' : null,
  },
  target: { agent: 'context', step: 'triage' },
  from,
  handoff_id: 'ho-r-r1',
  hop: 2,
  cause: { kind: 'result', id: 'r1' },
  routed_at: NOW,
});

const input = (r: RunRouted, variables: Record<string, unknown> = { input: 'x' }) => ({
  project: 'demo',
  workflowRunId: 'wr-1',
  eventId: 'ev1-r-r1',
  routed: r,
  workflow: { name: 'flow', version: 1 },
  agents,
  variables,
});

describe('the ledger create for run.routed', () => {
  it('a function_call route names the caller in the injected team context (seed 000 §7)', () => {
    const body = createHandoffRequest(input(routed('function_call', { agent: 'issue', step: 'triage' })));
    expect(body).toMatchObject({ handoff_id: 'ho-r-r1', kind: 'task', from_agent: 'issue', to_agent: 'context', idempotency_key: 'ev1-r-r1', workflow_run_id: 'wr-1' });
    expect(body.context?.['called_by']).toBe('issue');
    expect(String(body.context?.['team_context'])).toContain(calledBySentence('issue'));
    expect(CreateHandoffCommandSchema.safeParse(body).success).toBe(true); // the ledger's wire contract
  });

  it('a workflow-edge route names no caller, and a run\'s first handoff comes from baton-router', () => {
    const edge = createHandoffRequest(input(routed('workflow_edge', { agent: 'issue', step: 'triage' })));
    expect(String(edge.context?.['team_context'])).not.toContain('You were called by');
    expect(createHandoffRequest(input(routed('entry', null))).from_agent).toBe('baton-router');
  });

  it('session variables too large for a handoff context are left out, with a note', () => {
    const body = createHandoffRequest(input(routed('entry', null), { input: 'x'.repeat(MAX_CONTEXT_VARIABLES_CHARS) }));
    expect(body.context?.['variables']).toBeNull();
    expect(body.context?.['variables_omitted']).toMatch(/characters/);
  });

  it('complete_from_result is keyed by the result id', () => {
    const body = completeFromResultRequest(
      { result_id: 'r7', run_id: 'ar-7', agent: 'context', step: 'triage', signal: { kind: 'absent' }, recorded_at: NOW },
      'ho-r-r1',
      'wr-1',
    );
    expect(body).toMatchObject({ handoff_id: 'ho-r-r1', result_id: 'r7', agent: 'context', idempotency_key: 'r7', workflow_run_id: 'wr-1' });
    expect(CompleteFromResultCommandSchema.safeParse(body).success).toBe(true);
  });
});
