import {
  CompleteFromResultCommandSchema,
  CreateHandoffCommandSchema,
  MAX_RETURNED_EVIDENCE_CHARS,
  ProjectDefinitionSchema,
  ReturnedAnswerSchema,
  type AgentResult,
  type ProjectDefinition,
} from '@baton/contracts';
import { calledBySentence, decideRun, evolveRun, initialRunState, type RunCommand, type RunEvent, type RunState } from '@baton/domain';
import {
  answerLookup,
  answerScan,
  completeFromResultRequest,
  createHandoffRequest,
  MAX_CONTEXT_VARIABLES_CHARS,
  returnableDeadlineAt,
  returnableParent,
  returnedAnswer,
  returnsToCaller,
  type RunResultRecorded,
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

describe("the caller's handoff carries the callee's answer (context.returned; seed 000 §4–§5)", () => {
  const back = (
    rule: 'callback' | 'no_action_default' | 'message' | 'workflow_edge' | 'function_call',
    cause: RunRouted['cause'] = { kind: 'result', id: 'r2' },
  ): RunRouted => ({
    ...routed('workflow_edge', { agent: 'context', step: 'triage' }),
    decision: {
      rule,
      outcome: 'dispatch',
      target: { agent: 'issue', step: 'triage' },
      dispatch: { status: 'advance', reason: 'answered', origin: 'agent' },
      callback_after: null,
    },
    target: { agent: 'issue', step: 'triage' },
    cause,
  });
  const answer = (over: Partial<RunResultRecorded> = {}): RunResultRecorded => ({
    result_id: 'r2',
    run_id: 'ar-2',
    agent: 'context',
    step: 'triage',
    signal: { kind: 'config', source: 'typed', config: { dispatch: { status: 'advance', reason: 'answered' } } },
    posted_body: `ANSWER: the plan is wrong in step 3\n<!-- AGENT_RUN_CONFIG ${JSON.stringify({ dispatch: { status: 'advance', reason: 'answered' } })} -->`,
    evidence: { tests_run: ['plan.spec: 3 passed'] },
    recorded_at: NOW,
    ...over,
  });

  it('a return to the caller (callback, the no-action default, a child`s return replayed to its parent) carries the callee`s body without its sentinel, and its evidence', () => {
    for (const rule of ['callback', 'no_action_default', 'message'] as const) {
      const body = createHandoffRequest({ ...input(back(rule)), answer: answer() });
      expect({ rule, returned: body.context?.['returned'] }).toEqual({
        rule,
        returned: {
          from_agent: 'context',
          step: 'triage',
          result_id: 'r2',
          body: 'ANSWER: the plan is wrong in step 3',
          body_truncated: false,
          evidence: { tests_run: ['plan.spec: 3 passed'] },
        },
      });
      expect(ReturnedAnswerSchema.safeParse(body.context?.['returned']).success).toBe(true);
      expect(CreateHandoffCommandSchema.safeParse(body).success).toBe(true);
    }
  });

  it('no other route carries it, nor an answer that is not the route`s cause, nor a route no result caused', () => {
    for (const rule of ['workflow_edge', 'function_call'] as const) {
      expect(createHandoffRequest({ ...input(back(rule)), answer: answer() }).context).not.toHaveProperty('returned');
    }
    expect(createHandoffRequest({ ...input(back('callback')), answer: answer({ result_id: 'r1' }) }).context).not.toHaveProperty('returned');
    expect(createHandoffRequest({ ...input(back('message', { kind: 'message', id: 'r2' })), answer: answer() }).context).not.toHaveProperty('returned');
    expect(createHandoffRequest(input(back('callback'))).context).not.toHaveProperty('returned');
    expect(returnsToCaller(back('message', { kind: 'start', id: 'wr-1' }))).toBe(false);
  });

  it('a body the run cut says so; a callee that wrote no text has a null body; evidence too large is left out with its size', () => {
    const cut = returnedAnswer(answer({ posted_body: `${'x'.repeat(20)}\n… (cut at 16384 characters)`, posted_body_truncated: true }));
    expect(cut).toMatchObject({ body: `${'x'.repeat(20)}\n… (cut at 16384 characters)`, body_truncated: true });
    const silent = returnedAnswer(answer({ posted_body: `<!-- AGENT_RUN_CONFIG ${JSON.stringify({ dispatch: { status: 'advance' } })} -->` }));
    expect(silent.body).toBeNull();
    expect(returnedAnswer(answer({ posted_body: undefined })).body).toBeNull();
    const big = returnedAnswer(answer({ evidence: { artifacts: ['y'.repeat(MAX_RETURNED_EVIDENCE_CHARS)] } }));
    expect(big).not.toHaveProperty('evidence');
    expect(big.evidence_omitted).toMatch(/^\d+ characters/);
    expect(returnedAnswer(answer({ evidence: {} }))).not.toHaveProperty('evidence');
    expect(ReturnedAnswerSchema.safeParse(big).success).toBe(true);
  });
});

/*
 * Every way control comes back to a waiting parent after its child's return (seed 001), played
 * through the run decider, then the route that gives the parent its next turn read back the way the
 * dispatch reactor reads it (answerLookup, then answerScan over the run's events before the route,
 * newest first).
 */
describe("a returnable child's answer reaches its parent on every path that gives the parent control back", () => {
  const gate = {
    to: 'Income_Capture_Agent',
    when: { kind: 'expression', source: 'annual_income IS NOT SET' },
    return: true,
    on_return: { action: 'continue', map: { annual_income: 'annual_income' } },
    on_failure: { action: 'continue' },
  };
  /** The gate as an intent: skipped at message time, so the supervisor gets every message and hands off by its own choice. */
  const byChoice = { when: { kind: 'intent', text: 'the applicant has not told us their income' } };
  const project = (over: { gate?: object; offer?: boolean; child?: object } = {}): ProjectDefinition =>
    ProjectDefinitionSchema.parse({
      project: 'loans',
      agents: [
        {
          name: 'Loan_Supervisor',
          supervisor: true,
          memory: [{ name: 'annual_income', type: 'number' }],
          handoffs: [
            { ...gate, ...(over.gate ?? {}) },
            ...(over.offer === true ? [{ to: 'Offer_Agent', when: { kind: 'expression', source: 'annual_income IS SET' } }] : []),
          ],
        },
        {
          name: 'Income_Capture_Agent',
          gather: [{ name: 'annual_income', type: 'number', required: true }],
          complete: [{ when: { kind: 'expression', source: 'annual_income IS SET' }, respond: 'Thanks. I have your income.' }],
          ...(over.child ?? {}),
        },
        { name: 'Offer_Agent' },
      ],
      workflows: [{ name: 'loan_session', version: 1, entry: 'converse', steps: [{ id: 'converse', agent: 'Loan_Supervisor', terminal: true }] }],
    });

  /** A conversation run played through the run decider; `log` is its history. */
  class Session {
    state: RunState = initialRunState();
    readonly log: RunEvent[] = [];
    private n = 0;
    constructor(readonly definition: ProjectDefinition) {}

    private get defs() {
      return { workflow: this.definition.workflows[0]!, agents: this.definition.agents };
    }
    private run(command: RunCommand): this {
      const decided = decideRun(command, this.state);
      if (!decided.ok) throw new Error(`${decided.error.code}: ${decided.error.message}`);
      for (const event of decided.events) this.state = evolveRun(this.state, event);
      this.log.push(...decided.events);
      return this;
    }
    start(input: string): this {
      return this.run({
        type: 'start_run',
        data: {
          workflow_run_id: 'wr-1',
          project: 'loans',
          workflow: this.defs.workflow,
          agents: this.defs.agents,
          people: { started_by: 'sam', issue_author: null, trigger_author: null },
          input,
        },
        metadata: { now: NOW, actor: 'sam' },
      });
    }
    say(text: string): this {
      return this.run({ type: 'session_message', data: { message_id: `m${++this.n}`, text, ...this.defs }, metadata: { now: NOW, actor: 'sam' } });
    }
    /** A result of `agent` under the claim of the run's current handoff (the claim rule is not what this is about). */
    result(agent: string, extra: Partial<AgentResult> = {}): this {
      const handoffId = this.state.status === 'none' ? null : this.state.handoffId;
      const claim = { handoff_id: handoffId!, claim_id: `claim-${handoffId}` };
      const result: AgentResult = {
        result_id: `r${++this.n}`,
        run_id: `ar-${this.n}`,
        project: 'loans',
        workflow_run_id: 'wr-1',
        agent,
        produced_at: NOW,
        ...claim,
        ...extra,
      };
      return this.run({
        type: 'record_result',
        data: { result, ...this.defs, handoff: { handoff_id: handoffId!, status: 'claimed', claim: { claim_id: claim.claim_id, claimed_by: agent } } },
        metadata: { now: NOW, actor: agent },
      });
    }
    fail(): this {
      const handoffId = this.state.status === 'none' || this.state.pendingHandoff === null ? '' : this.state.pendingHandoff.handoffId;
      return this.run({
        type: 'handoff_failed',
        data: { handoff_id: handoffId, code: 'agent_unavailable', message: 'refused', ...this.defs },
        metadata: { now: NOW, actor: 'router' },
      });
    }
    /** The last route's target and rule. */
    get lastRoute(): RunRouted {
      const routes = this.log.filter((e): e is Extract<RunEvent, { type: 'run.routed' }> => e.type === 'run.routed');
      return routes[routes.length - 1]!.data as RunRouted;
    }
    /** The result whose answer the last route carries (as the dispatch reactor finds it): its result id, or null. */
    answerOfLastRoute(): string | null {
      const at = this.log.map((e) => e.type).lastIndexOf('run.routed');
      const lookup = answerLookup(this.log[at]!.data as RunRouted, this.definition.agents);
      if (lookup === null) return null;
      const scan = answerScan(lookup);
      for (let i = at - 1; i >= 0; i--) {
        const verdict = scan({ type: this.log[i]!.type, payload: this.log[i]!.data });
        if (verdict === 'none') return null;
        if (verdict !== 'older') return verdict.found.result_id;
      }
      return null;
    }
    /** The id of the last result `agent` sent. */
    lastResultOf(agent: string): string {
      const results = this.log.filter(
        (e): e is Extract<RunEvent, { type: 'run.result_recorded' }> => e.type === 'run.result_recorded' && e.data.agent === agent,
      );
      return results[results.length - 1]!.data.result_id;
    }
  }

  /** The income child asks, the customer answers, the child completes (COMPLETE: its return). */
  const throughTheGate = (s: Session) =>
    s
      .start('I want a loan offer')
      .result('Income_Capture_Agent', { body: 'What is your annual income?' })
      .say('About 52000 a year')
      .result('Income_Capture_Agent', { body: 'Income noted.', variables: { annual_income: 52000 } });

  it("ON_RETURN continue (its MAP applied, COMPLETE's RESPOND said as the parent's): the parent's next turn carries the child's answer; its turn after that none", () => {
    const s = throughTheGate(new Session(project()));
    expect(s.log.map((e) => e.type).slice(-2)).toEqual(['run.handoff_return_handler', 'run.awaiting_input']);
    s.say('What can I get?');
    expect(s.lastRoute).toMatchObject({ target: { agent: 'Loan_Supervisor' }, decision: { rule: 'message' }, cause: { kind: 'message' } });
    expect(s.answerOfLastRoute()).toBe(s.lastResultOf('Income_Capture_Agent'));
    s.result('Loan_Supervisor', { body: 'Two offers.' }).say('Thanks');
    expect(s.lastRoute).toMatchObject({ target: { agent: 'Loan_Supervisor' }, decision: { rule: 'message' } });
    expect(s.answerOfLastRoute()).toBeNull();
  });

  it('a return handler that continues (its RESPOND said, MAP and SET applied) is the same path', () => {
    const handler = { on_return: { action: 'continue', handler: 'noted', respond: 'Noted.', map: { annual_income: 'annual_income' } } };
    const s = throughTheGate(new Session(project({ gate: handler }))).say('What can I get?');
    expect(s.log.find((e) => e.type === 'run.handoff_return_handler')!.data).toMatchObject({ action: 'continue', handler: 'noted', respond: 'Noted.' });
    expect(s.answerOfLastRoute()).toBe(s.lastResultOf('Income_Capture_Agent'));
  });

  it('resume_intent with nothing to replay (resume_intent_no_message) lets the parent wait: its next turn carries the answer', () => {
    const resume = { on_return: { action: 'resume_intent', resume_with: 'forwarded_return_message', map: { annual_income: 'annual_income' } } };
    const s = throughTheGate(new Session(project({ gate: resume })));
    expect(s.log.find((e) => e.type === 'run.resume_intent')!.data).toMatchObject({ reasonCode: 'resume_intent_no_message' });
    s.say('What can I get?');
    expect(s.answerOfLastRoute()).toBe(s.lastResultOf('Income_Capture_Agent'));
  });

  it('resume_intent whose replay reaches the parent itself carries it at once (the route`s cause); a replay that fires a route hands no answer to that route`s target', () => {
    const resume = { on_return: { action: 'resume_intent', map: { annual_income: 'annual_income' } } };
    const replayed = throughTheGate(new Session(project({ gate: resume })));
    expect(replayed.lastRoute).toMatchObject({ target: { agent: 'Loan_Supervisor' }, decision: { rule: 'message' }, cause: { kind: 'result' } });
    expect(replayed.answerOfLastRoute()).toBe(replayed.lastResultOf('Income_Capture_Agent'));
    const onward = throughTheGate(new Session(project({ gate: resume, offer: true })));
    expect(onward.lastRoute).toMatchObject({ target: { agent: 'Offer_Agent' }, decision: { rule: 'handoff' } });
    expect(onward.answerOfLastRoute()).toBeNull();
  });

  it('a return that applies no effects (memory_error) still gives the parent control back with the answer (return_to_parent)', () => {
    const unwritable = { ...byChoice, on_return: { action: 'continue', set: { locked: 'x' } } };
    const s = new Session(project({ gate: unwritable }))
      .start('I want a loan offer')
      .result('Loan_Supervisor', { handoff: { to: 'Income_Capture_Agent' } })
      .result('Income_Capture_Agent', { body: 'Income is 52000.', return_to_parent: { message: 'done' } });
    expect(s.log.map((e) => e.type)).toContain('run.memory_error');
    s.say('What can I get?');
    expect(s.lastRoute).toMatchObject({ target: { agent: 'Loan_Supervisor' }, decision: { rule: 'message' } });
    expect(s.answerOfLastRoute()).toBe(s.lastResultOf('Income_Capture_Agent'));
  });

  it('no answer where there is none: a child that failed (ON_FAILURE continue), a return a customer message caused (a child route back to the parent), an agent that is never a parent', () => {
    const failed = new Session(project({ gate: byChoice }))
      .start('I want a loan offer')
      .result('Loan_Supervisor', { handoff: { to: 'Income_Capture_Agent' } })
      .fail()
      .say('Hello?');
    expect(failed.lastRoute).toMatchObject({ target: { agent: 'Loan_Supervisor' }, decision: { rule: 'message' } });
    expect(failed.answerOfLastRoute()).toBeNull();

    const backRoute = { handoffs: [{ to: 'Loan_Supervisor', when: { kind: 'expression', source: 'annual_income IS NOT SET' } }] };
    const handedBack = new Session(project({ gate: byChoice, child: backRoute }))
      .start('I want a loan offer')
      .result('Loan_Supervisor', { handoff: { to: 'Income_Capture_Agent' } })
      .result('Income_Capture_Agent', { body: 'What is your annual income?' })
      .say('What are your opening hours?');
    expect(handedBack.log.find((e) => e.type === 'run.handoff_return_handler')!.data).toMatchObject({ path: 'hand_back', action: 'continue' });
    handedBack.say('Hello?');
    expect(handedBack.lastRoute).toMatchObject({ target: { agent: 'Loan_Supervisor' }, decision: { rule: 'message' } });
    expect(handedBack.answerOfLastRoute()).toBeNull();

    const offer = project({ offer: true });
    const to = (agent: string): RunRouted => {
      const target = { agent, step: 'converse' };
      const dispatch = { status: 'advance', reason: null, origin: 'agent' } as const;
      const decision = { rule: 'message', outcome: 'dispatch', target, dispatch, callback_after: null } as const;
      return { ...routed('workflow_edge', null), decision, target, cause: { kind: 'message', id: 'm1' } };
    };
    expect(answerLookup(to('Offer_Agent'), offer.agents)).toBeNull();
    expect(answerLookup(to('Loan_Supervisor'), offer.agents)).toEqual({ kind: 'continued', parent: 'Loan_Supervisor' });
  });

  it("the parent's handoff carries what the look-back found as `context.returned`; an agent that is never a parent gets none", () => {
    const s = throughTheGate(new Session(project())).say('What can I get?');
    const recorded = s.log.filter((e): e is Extract<RunEvent, { type: 'run.result_recorded' }> => e.type === 'run.result_recorded').at(-1)!.data;
    const turn = s.lastRoute;
    const body = createHandoffRequest({ ...input(turn), agents: s.definition.agents, answer: recorded });
    expect(body.context?.['returned']).toEqual({
      from_agent: 'Income_Capture_Agent',
      step: 'converse',
      result_id: recorded.result_id,
      body: 'Income noted.',
      body_truncated: false,
    });
    expect(CreateHandoffCommandSchema.safeParse(body).success).toBe(true);
    const elsewhere = { ...turn, target: { agent: 'Offer_Agent', step: 'converse' } };
    expect(createHandoffRequest({ ...input(elsewhere), agents: s.definition.agents, answer: recorded }).context).not.toHaveProperty('returned');
  });
});
