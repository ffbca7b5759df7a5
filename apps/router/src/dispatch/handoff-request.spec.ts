import { CompleteFromResultCommandSchema, CreateHandoffCommandSchema } from '@baton/contracts';
import { calledBySentence } from '@baton/domain';
import {
  completeFromResultRequest,
  createHandoffRequest,
  MAX_CONTEXT_VARIABLES_CHARS,
  returnableDeadlineAt,
  returnableParent,
  type RunRouted,
} from './handoff-request';

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
    expect(body).toMatchObject({
      handoff_id: 'ho-r-r1',
      kind: 'task',
      from_agent: 'issue',
      to_agent: 'context',
      idempotency_key: 'ev1-r-r1',
      workflow_run_id: 'wr-1',
    });
    expect(body.context?.['called_by']).toBe('issue');
    expect(String(body.context?.['team_context'])).toContain(calledBySentence('issue', 'issue'));
    expect(CreateHandoffCommandSchema.safeParse(body).success).toBe(true); // the ledger's wire contract
  });

  it('a resumed stop hands the agent what the operator decided: the approved call, or the raised cap with the call the cap stopped', () => {
    const call = { name: 'search', args: { q: 'x' }, call_id: 'c-1' };
    const here = routed('workflow_edge', { agent: 'issue', step: 'triage' });
    const approved = createHandoffRequest(input({ ...here, approved_call: call }));
    expect(approved.context).toMatchObject({ approved_call: call });
    const raised = createHandoffRequest(input({ ...here, raised_cap: 250, pending_call: call }));
    expect(raised.context).toMatchObject({ raised_cap: 250, pending_call: call });
    expect(raised.context).not.toHaveProperty('approved_call');
    expect(CreateHandoffCommandSchema.safeParse(raised).success).toBe(true);
  });

  it('the team context says the result returns to callback_after, which may be another agent or none', () => {
    const call = routed('function_call', { agent: 'issue', step: 'triage' });
    const elsewhere = createHandoffRequest(input({ ...call, decision: { ...call.decision, callback_after: 'lena' } }));
    expect(String(elsewhere.context?.['team_context'])).toContain('You were called by issue — your result returns to lena.');
    expect(elsewhere.context?.['callback']).toBe('lena');
    const none = createHandoffRequest(input({ ...call, decision: { ...call.decision, callback_after: null } }));
    expect(String(none.context?.['team_context'])).toContain(calledBySentence('issue', null));
    expect(String(none.context?.['team_context'])).not.toContain('returns to');
  });

  it("a workflow-edge route names no caller, and a run's first handoff comes from baton-router", () => {
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
    expect(body).not.toHaveProperty('claim_id');
  });

  it('complete_from_result names the claim the result was accepted under (the ledger voids a lapse of it, rule 4a)', () => {
    const body = completeFromResultRequest(
      { result_id: 'r8', run_id: 'ar-8', agent: 'context', step: 'triage', signal: { kind: 'absent' }, claim_id: 'cl-3', recorded_at: NOW },
      'ho-r-r1',
      'wr-1',
    );
    expect(body.claim_id).toBe('cl-3');
    expect(CompleteFromResultCommandSchema.parse(body).claim_id).toBe('cl-3');
  });
});

describe('the deadline of a returnable child handoff (issue 5)', () => {
  const handoffRouted: RunRouted = { ...routed('entry', { agent: 'issue', step: 'triage' }), decision: { ...routed('entry', null).decision, rule: 'handoff' } };
  const pending = { handoffId: 'ho-r-r1', from: 'issue', route: 0, returnExpected: true };
  const withRoute = (route: object) => [
    { name: 'issue', handoffs: [{ to: 'context', history: { mode: 'full' as const }, return: true, on_failure: { action: 'continue' as const }, ...route }] },
    { name: 'context' },
  ];

  it('deadline_at = the route event time + the route DEADLINE, else the project return_deadline_ms, else 24 h', () => {
    expect(returnableDeadlineAt(handoffRouted, pending, withRoute({ deadline_ms: 1500 }), { return_deadline_ms: 60_000 })).toBe('2025-01-01T00:00:01.500Z');
    expect(returnableDeadlineAt(handoffRouted, pending, withRoute({}), { return_deadline_ms: 60_000 })).toBe('2025-01-01T00:01:00.000Z');
    expect(returnableDeadlineAt(handoffRouted, pending, withRoute({}), undefined)).toBe('2025-01-02T00:00:00.000Z');
  });

  it('only a returnable HANDOFF route gets a deadline: a permanent handoff, a workflow step or another pending handoff get none', () => {
    expect(returnableDeadlineAt(handoffRouted, { ...pending, returnExpected: false }, withRoute({ deadline_ms: 1500 }), undefined)).toBeNull();
    expect(returnableDeadlineAt(routed('workflow_edge', null), pending, withRoute({ deadline_ms: 1500 }), undefined)).toBeNull();
    expect(returnableDeadlineAt(handoffRouted, { ...pending, handoffId: 'other' }, withRoute({ deadline_ms: 1500 }), undefined)).toBeNull();
    expect(returnableDeadlineAt(handoffRouted, null, withRoute({ deadline_ms: 1500 }), undefined)).toBeNull();
  });

  it('a returnable HANDOFF`s child is told who called it and that its result returns there (seed 000 §7, seed 001); a permanent handoff`s is not', () => {
    expect(returnableParent(handoffRouted, pending)).toBe('issue');
    const body = createHandoffRequest({ ...input(handoffRouted), returnableParent: returnableParent(handoffRouted, pending) });
    expect(body.context?.['called_by']).toBe('issue');
    expect(String(body.context?.['team_context'])).toContain(calledBySentence('issue', 'issue'));
    expect(CreateHandoffCommandSchema.safeParse(body).success).toBe(true);
    expect(returnableParent(handoffRouted, { ...pending, returnExpected: false })).toBeNull();
    expect(returnableParent(routed('workflow_edge', null), pending)).toBeNull();
    const permanent = createHandoffRequest({
      ...input(handoffRouted),
      returnableParent: returnableParent(handoffRouted, { ...pending, returnExpected: false }),
    });
    expect(permanent.context?.['called_by']).toBeNull();
    expect(String(permanent.context?.['team_context'])).not.toContain('You were called by');
  });

  it('the ledger create carries deadline_at only when given', () => {
    const body = createHandoffRequest({ ...input(handoffRouted), deadlineAt: '2025-01-01T00:00:01.500Z' });
    expect(body.deadline_at).toBe('2025-01-01T00:00:01.500Z');
    expect(CreateHandoffCommandSchema.safeParse(body).success).toBe(true);
    expect(createHandoffRequest(input(handoffRouted))).not.toHaveProperty('deadline_at');
  });
});
