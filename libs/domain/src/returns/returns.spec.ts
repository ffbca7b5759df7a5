import { ProjectDefinitionSchema, type AgentResult, type ProjectDefinition } from '@baton/contracts';
import type { RunCommand } from '../run/commands';
// Results are sent under the run's current claim unless a test says otherwise (withCurrentClaim).
import { decideClaimed as decideRun } from '../run/test-helpers';
import { evolveRun, initialRunState, type RunEvent, type RunState } from '../run/state';
import { expectValidEvents } from '../run/test-helpers';
import { buildHandoffContext, computeReturnEffects, effectiveParentReturn, parentReturnVerdict } from './returns';

/*
 * Returnable and permanent handoffs (seed 001), decided purely: a session is played through the
 * run decider (start with the first message, agent results, customer messages) and the trace
 * events are read back like the seed's verification steps.
 */

const T0 = '2025-01-01T00:00:00.000Z';
const at = (s: number) => new Date(Date.parse(T0) + s * 1000).toISOString();

const gate = {
  to: 'Income_Capture_Agent',
  when: { kind: 'expression', source: 'annual_income IS NOT SET' },
  summary: "Collect the applicant's annual income, then return.",
  history: { mode: 'summary_only' },
  return: true,
  on_return: { action: 'resume_intent', map: { annual_income: 'annual_income' } },
  on_failure: { action: 'respond', message: 'I cannot collect your income details right now. Please try again later.' },
};
const offer = {
  to: 'Offer_Agent',
  when: { kind: 'expression', source: 'annual_income IS SET' },
  pass: ['annual_income'],
  summary: 'The offer agent now owns the conversation.',
};

function loanProject(over: { gate?: object; supervisor?: object; child?: object; offer?: object; execution?: object } = {}): ProjectDefinition {
  return ProjectDefinitionSchema.parse({
    project: 'loans',
    ...(over.execution ? { execution: over.execution } : {}),
    agents: [
      {
        name: 'Loan_Supervisor',
        supervisor: true,
        memory: [
          { name: 'annual_income', type: 'number' },
          { name: 'income_note', type: 'string' },
          { name: 'locked', readonly: true },
        ],
        handoffs: [{ ...gate, ...(over.gate ?? {}) }, offer],
        ...(over.supervisor ?? {}),
      },
      {
        name: 'Income_Capture_Agent',
        gather: [{ name: 'annual_income', type: 'number', required: true }],
        complete: [{ when: { kind: 'expression', source: 'annual_income IS SET' }, respond: 'Thanks. I have your income.' }],
        handoffs: [{ to: 'Loan_Supervisor', when: { kind: 'intent', text: 'the customer asks about something other than income' } }],
        ...(over.child ?? {}),
      },
      { name: 'Offer_Agent', ...(over.offer ?? {}) },
    ],
    workflows: [{ name: 'loan_session', version: 1, entry: 'converse', steps: [{ id: 'converse', agent: 'Loan_Supervisor', terminal: true }] }],
  });
}

class Session {
  state: RunState = initialRunState();
  readonly log: RunEvent[] = [];
  private n = 0;
  constructor(readonly project: ProjectDefinition) {}

  private run(command: RunCommand): RunEvent[] {
    const decided = decideRun(command, this.state);
    if (!decided.ok) throw new Error(`${decided.error.code}: ${decided.error.message}`);
    expectValidEvents(decided.events);
    for (const e of decided.events) this.state = evolveRun(this.state, e);
    this.log.push(...decided.events);
    return decided.events;
  }
  private get defs() {
    return { workflow: this.project.workflows[0]!, agents: this.project.agents, execution: this.project.execution };
  }
  start(input: string, variables: Record<string, unknown> = {}): RunEvent[] {
    return this.run({
      type: 'start_run',
      data: {
        workflow_run_id: 'wr-1',
        project: 'loans',
        workflow: this.defs.workflow,
        agents: this.defs.agents,
        people: { started_by: 'sam', issue_author: null, trigger_author: null },
        variables,
        input,
      },
      metadata: { now: at(this.n++), actor: 'sam' },
    });
  }
  say(text: string): RunEvent[] {
    const id = `m${this.n}`;
    return this.run({ type: 'session_message', data: { message_id: id, text, ...this.defs }, metadata: { now: at(this.n++), actor: 'sam' } });
  }
  result(agent: string, extra: Partial<AgentResult> = {}): RunEvent[] {
    const id = `r${this.n}`;
    const result: AgentResult = { result_id: id, run_id: `ar-${id}`, project: 'loans', workflow_run_id: 'wr-1', agent, produced_at: at(this.n), ...extra };
    return this.run({ type: 'record_result', data: { result, ...this.defs }, metadata: { now: at(this.n++), actor: agent } });
  }
  fail(handoffId: string, code = 'invalid'): RunEvent[] {
    return this.run({
      type: 'handoff_failed',
      data: { handoff_id: handoffId, code, message: 'refused', ...this.defs },
      metadata: { now: at(this.n++), actor: 'router' },
    });
  }
  get active() {
    return this.state.status === 'none' ? null : { agent: this.state.agent, awaiting: this.state.awaitingInput, variables: this.state.variables };
  }
}

const ofType = <T extends RunEvent['type']>(events: readonly RunEvent[], type: T) => events.filter((e): e is Extract<RunEvent, { type: T }> => e.type === type);
const types = (events: readonly RunEvent[]) => events.map((e) => e.type);

describe('returnable handoffs (seed 001)', () => {
  it('verification 2: "I want a loan offer" in a new session: the WHEN gate hands off before any model runs (returnExpected: true, reasonCode: handoff_return_expected)', () => {
    const s = new Session(loanProject());
    const events = s.start('I want a loan offer');
    expect(types(events)).toEqual(['run.started', 'run.message_received', 'run.handoff', 'run.routed']);
    const [handoff] = ofType(events, 'run.handoff');
    expect(handoff!.data).toMatchObject({ from: 'Loan_Supervisor', to: 'Income_Capture_Agent', returnExpected: true, reasonCode: 'handoff_return_expected' });
    expect(ofType(events, 'run.routed')[0]!.data.target.agent).toBe('Income_Capture_Agent');
    expect(s.state.status !== 'none' && s.state.waitingParents.map((p) => p.agent)).toEqual(['Loan_Supervisor']);
  });

  it('verification 3–4: the income returns through MAP (mappedFields), resume_intent replays the request, and the permanent route hands off to Offer_Agent', () => {
    const s = new Session(loanProject());
    s.start('I want a loan offer');
    s.result('Income_Capture_Agent', { body: 'What is your annual income?' });
    expect(s.active).toMatchObject({ agent: 'Income_Capture_Agent', awaiting: true });
    s.say('About 52000 a year');
    const events = s.result('Income_Capture_Agent', { variables: { annual_income: 52000 } });
    // The gate's WHEN is false now (blocked), so the replay takes the permanent route.
    expect(types(events)).toEqual([
      'run.result_recorded',
      'run.handoff_return_handler',
      'run.resume_intent',
      'run.handoff_completed',
      'run.handoff',
      'run.routed',
    ]);
    expect(ofType(events, 'run.handoff_completed')[0]!.data).toMatchObject({ to: 'Income_Capture_Agent', outcome: 'blocked' });
    expect(ofType(events, 'run.handoff_return_handler')[0]!.data).toMatchObject({
      path: 'complete',
      mappedFields: ['annual_income'],
      respond: 'Thanks. I have your income.',
    });
    // The child's COMPLETE RESPOND is said to the customer before the replay, and kept in the transcript.
    expect(ofType(events, 'run.resume_intent')[0]!.data).toMatchObject({
      reasonCode: 'resume_intent',
      resumeWith: 'original_handoff_utterance',
      message: 'I want a loan offer',
      reply: 'Thanks. I have your income.',
      replyFrom: 'Income_Capture_Agent',
    });
    expect(s.state.status !== 'none' && s.state.transcript.at(-1)).toMatchObject({
      role: 'agent',
      agent: 'Income_Capture_Agent',
      text: 'Thanks. I have your income.',
    });
    expect(ofType(events, 'run.handoff')[0]!.data).toMatchObject({ to: 'Offer_Agent', returnExpected: false, reasonCode: 'handoff_permanent' });
    const routed = ofType(events, 'run.routed')[0]!.data;
    expect(routed.conversation).toMatchObject({ message: 'I want a loan offer', variables: { annual_income: 52000 }, handoff: { passed: ['annual_income'] } });
    // Offer_Agent's history (full) includes what the customer was told.
    expect(routed.conversation?.handoff?.history?.at(-1)).toEqual({ role: 'agent', agent: 'Income_Capture_Agent', text: 'Thanks. I have your income.' });
    expect(s.active).toMatchObject({ agent: 'Offer_Agent', variables: { annual_income: 52000 } });
    expect(s.state.status !== 'none' && s.state.waitingParents).toEqual([]);
  });

  it('verification 5: handoff_completed has outcome and durationMs once the child ran', () => {
    const s = new Session(loanProject());
    s.start('I want a loan offer');
    const events = s.result('Income_Capture_Agent', { body: 'What is your annual income?' });
    expect(ofType(events, 'run.handoff_completed')[0]!.data).toMatchObject({
      outcome: 'success',
      durationMs: 1000,
      from: 'Loan_Supervisor',
      to: 'Income_Capture_Agent',
    });
  });

  it('a returning customer with the value set goes straight to Offer_Agent (permanent)', () => {
    const s = new Session(loanProject());
    const events = s.start('Hello again', { annual_income: 70000 });
    expect(ofType(events, 'run.handoff_completed')[0]!.data).toMatchObject({ to: 'Income_Capture_Agent', outcome: 'blocked', code: 'handoff_condition_check' });
    expect(ofType(events, 'run.handoff')[0]!.data).toMatchObject({ to: 'Offer_Agent', returnExpected: false });
  });

  it('an unanswered gate: the child keeps the conversation until COMPLETE is true', () => {
    const s = new Session(loanProject());
    s.start('I want a loan offer');
    s.result('Income_Capture_Agent', { body: 'What is your annual income?' });
    s.say('I would rather not say');
    const events = s.result('Income_Capture_Agent', { body: 'I need it to continue.' });
    expect(types(events)).toEqual(['run.result_recorded', 'run.awaiting_input']);
    expect(s.active).toMatchObject({ agent: 'Income_Capture_Agent' });
  });

  it('only mapped fields come back; a child field with no value is skipped', () => {
    const s = new Session(loanProject({ gate: { on_return: { action: 'continue', map: { annual_income: 'annual_income', employer: 'income_note' } } } }));
    s.start('I want a loan offer');
    const events = s.result('Income_Capture_Agent', { variables: { annual_income: 1, secret: 'x' } });
    expect(ofType(events, 'run.handoff_return_handler')[0]!.data).toMatchObject({ mappedFields: ['annual_income'], skippedFields: ['employer'] });
    expect(s.active!.variables).toEqual({ annual_income: 1 });
  });

  it('expecting values to return without MAP: nothing is copied to the parent', () => {
    const s = new Session(loanProject({ gate: { on_return: { action: 'continue' } } }));
    s.start('I want a loan offer');
    s.result('Income_Capture_Agent', { variables: { annual_income: 1 } });
    expect(s.active!.variables).toEqual({});
  });

  it('action: continue with SET: SET runs after MAP and the parent does not route again', () => {
    const s = new Session(
      loanProject({
        gate: {
          on_return: {
            action: 'continue',
            map: { annual_income: 'annual_income' },
            set: { income_note: 'Income collected by the income agent.', annual_income: 5 },
          },
        },
      }),
    );
    s.start('I want a loan offer');
    const events = s.result('Income_Capture_Agent', { variables: { annual_income: 1 } });
    expect(types(events)).toEqual(['run.result_recorded', 'run.handoff_completed', 'run.handoff_return_handler', 'run.awaiting_input']);
    expect(s.active).toMatchObject({
      agent: 'Loan_Supervisor',
      awaiting: true,
      variables: { annual_income: 5, income_note: 'Income collected by the income agent.' },
    });
  });

  it('the return applies no effects when a MAP or SET target is not writable by the parent (memory_error)', () => {
    const s = new Session(loanProject({ gate: { on_return: { action: 'resume_intent', map: { annual_income: 'annual_income' }, set: { locked: 'x' } } } }));
    s.start('I want a loan offer');
    const events = s.result('Income_Capture_Agent', { variables: { annual_income: 1 } });
    expect(types(events)).toEqual(['run.result_recorded', 'run.handoff_completed', 'run.memory_error', 'run.handoff_return_handler', 'run.awaiting_input']);
    expect(ofType(events, 'run.memory_error')[0]!.data.targets).toEqual(['locked']);
    expect(ofType(events, 'run.handoff_return_handler')[0]!.data).toMatchObject({ applied: false, mappedFields: [] });
    expect(s.active).toMatchObject({ agent: 'Loan_Supervisor', variables: {} });
  });

  it('a MAP target the parent may not write refuses the return even when its child field has no value this time (seed 001: each target)', () => {
    const parent = { name: 'sup', memory: [{ name: 'annual_income', type: 'number' as const, scope: 'session' as const }] };
    const effects = computeReturnEffects({ map: { annual_income: 'annual_income', employer: 'not_declared' }, set: {} }, { annual_income: 5 }, parent);
    expect(effects).toMatchObject({ mappedFields: ['annual_income'], skippedFields: ['employer'], notWritable: ['not_declared'] });
    const s = new Session(
      loanProject({ gate: { on_return: { action: 'resume_intent', map: { annual_income: 'annual_income', employer: 'not_declared' }, set: {} } } }),
    );
    s.start('I want a loan offer');
    const events = s.result('Income_Capture_Agent', { variables: { annual_income: 1 } });
    expect(ofType(events, 'run.memory_error')[0]!.data.targets).toEqual(['not_declared']);
    expect(ofType(events, 'run.handoff_return_handler')[0]!.data).toMatchObject({ applied: false });
    expect(s.active).toMatchObject({ agent: 'Loan_Supervisor', variables: {} });
  });

  it('the child hands off to the waiting parent: the parent resumes and, without ON_RETURN, replays the forwarded message', () => {
    const s = new Session(loanProject({ gate: { on_return: undefined } }));
    s.start('I want a loan offer');
    s.result('Income_Capture_Agent', { body: 'What is your annual income?' });
    s.say('Actually, what are your opening hours?');
    const events = s.result('Income_Capture_Agent', { handoff: { to: 'Loan_Supervisor' } });
    expect(types(events)).toEqual(['run.result_recorded', 'run.handoff_return_handler', 'run.resume_intent', 'run.handoff', 'run.routed']);
    expect(ofType(events, 'run.handoff_return_handler')[0]!.data).toMatchObject({
      path: 'hand_back',
      forwardedMessage: 'Actually, what are your opening hours?',
    });
    expect(ofType(events, 'run.resume_intent')[0]!.data).toMatchObject({
      resumeWith: 'forwarded_return_message',
      message: 'Actually, what are your opening hours?',
    });
    // The parent routes the replayed message: its gate is still open, so it fires again (a replay, depth 1).
    expect(ofType(events, 'run.handoff')[0]!.data).toMatchObject({
      to: 'Income_Capture_Agent',
      replayDepth: 1,
      message: 'Actually, what are your opening hours?',
    });
  });

  it('without ON_RETURN, a return that forwards no message continues without a replay', () => {
    const s = new Session(loanProject({ gate: { on_return: undefined } }));
    s.start('I want a loan offer');
    const events = s.result('Income_Capture_Agent', { variables: { annual_income: 1 } });
    expect(types(events)).toEqual(['run.result_recorded', 'run.handoff_completed', 'run.handoff_return_handler', 'run.awaiting_input']);
  });

  it('expecting a replay to chain: replay runs one level only (resume_intent_depth_limit)', () => {
    const s = new Session(loanProject());
    s.start('I want a loan offer');
    // The child hands back; the replay re-fires the gate (depth 1); that child's return cannot replay again.
    s.result('Income_Capture_Agent', { handoff: { to: 'Loan_Supervisor', message: 'tell me about rates' } });
    expect(s.active).toMatchObject({ agent: 'Income_Capture_Agent' });
    const events = s.result('Income_Capture_Agent', { variables: { annual_income: 3 } });
    expect(ofType(events, 'run.resume_intent')[0]!.data.reasonCode).toBe('resume_intent_depth_limit');
    expect(s.active).toMatchObject({ agent: 'Loan_Supervisor', awaiting: true, variables: { annual_income: 3 } });
  });

  it('resume_with latest_child_user_utterance replays what the customer last told the child', () => {
    const s = new Session(
      loanProject({ gate: { on_return: { action: 'resume_intent', resume_with: 'latest_child_user_utterance', map: { annual_income: 'annual_income' } } } }),
    );
    s.start('I want a loan offer');
    s.result('Income_Capture_Agent', { body: 'Income?' });
    s.say('52000, and show me offers');
    const events = s.result('Income_Capture_Agent', { variables: { annual_income: 52000 } });
    expect(ofType(events, 'run.resume_intent')[0]!.data).toMatchObject({ message: '52000, and show me offers' });
    expect(ofType(events, 'run.routed')[0]!.data.conversation!.message).toBe('52000, and show me offers');
  });

  it('the built-in return action forwards the customer message, subject to parentReturn (the supervisor overrides the project)', () => {
    const execution = { pipeline: { parent_return: { min_confidence: 0.2 } } };
    const s = new Session(
      loanProject({ execution, supervisor: { execution: { pipeline: { parent_return: { min_confidence: 0.8, ignore_ambiguous: true } } } } }),
    );
    s.start('I want a loan offer');
    const low = s.result('Income_Capture_Agent', { return_to_parent: { message: 'rates?', confidence: 0.5 } });
    expect(ofType(low, 'run.awaiting_input')[0]!.data.note).toMatch(/below_min_confidence/);
    s.say('what are your rates?');
    const ambiguous = s.result('Income_Capture_Agent', { return_to_parent: { confidence: 0.9, ambiguous: true } });
    expect(ofType(ambiguous, 'run.awaiting_input')[0]!.data.note).toMatch(/ambiguous/);
    s.say('rates please');
    const ok = s.result('Income_Capture_Agent', { return_to_parent: { confidence: 0.9 } });
    expect(ofType(ok, 'run.handoff_return_handler')[0]!.data).toMatchObject({ path: 'return_action', forwardedMessage: 'rates please' });
  });

  it('a route to an agent that is already active is refused with recursion; a target waiting for input with target_waiting_for_input', () => {
    const s = new Session(loanProject({ offer: { handoffs: [{ to: 'Offer_Agent', when: { kind: 'expression', source: 'annual_income IS SET' } }] } }));
    s.start('hi', { annual_income: 1 });
    const recursion = s.result('Offer_Agent', { handoff: { to: 'Offer_Agent' } });
    expect(ofType(recursion, 'run.handoff_completed').map((e) => e.data)).toEqual([
      expect.objectContaining({ outcome: 'success', to: 'Offer_Agent' }),
      expect.objectContaining({ outcome: 'rejected', code: 'recursion' }),
    ]);
    const waiting = s.say('more');
    expect(ofType(waiting, 'run.handoff_completed').map((e) => e.data)).toEqual([
      expect.objectContaining({ outcome: 'rejected', code: 'target_waiting_for_input' }),
    ]);
    expect(ofType(waiting, 'run.routed')[0]!.data.target.agent).toBe('Offer_Agent');
  });

  it('ENABLED_WHEN switches the target off: handoff_completed blocked', () => {
    const s = new Session(loanProject({ child: { enabled_when: { kind: 'expression', source: 'income_gate_open = true' } } }));
    const events = s.start('I want a loan offer');
    expect(ofType(events, 'run.handoff_completed')[0]!.data).toMatchObject({ outcome: 'blocked', cause: 'target_disabled' });
    expect(ofType(events, 'run.routed')[0]!.data.target.agent).toBe('Loan_Supervisor');
  });

  it('ON_FAILURE RESPOND runs when the handoff fails before the child accepts it; not after the child ran', () => {
    const s = new Session(loanProject());
    const started = s.start('I want a loan offer');
    const handoffId = ofType(started, 'run.handoff')[0]!.data.handoffId;
    const events = s.fail(handoffId, 'invalid');
    expect(ofType(events, 'run.handoff_completed')[0]!.data).toMatchObject({ outcome: 'error', code: 'invalid', onFailure: 'respond' });
    expect(ofType(events, 'run.awaiting_input')[0]!.data).toMatchObject({
      agent: 'Loan_Supervisor',
      reply: 'I cannot collect your income details right now. Please try again later.',
    });
    expect(s.state.status !== 'none' && s.state.waitingParents).toEqual([]);

    const t = new Session(loanProject());
    const h = ofType(t.start('I want a loan offer'), 'run.handoff')[0]!.data.handoffId;
    t.result('Income_Capture_Agent', { body: 'Income?' });
    expect(t.fail(h)).toEqual([]);
  });

  it('ON_FAILURE ESCALATE holds the run for a person; continue (the default) gives control back to the caller', () => {
    const s = new Session(loanProject({ gate: { on_failure: { action: 'escalate' } } }));
    const id = ofType(s.start('I want a loan offer'), 'run.handoff')[0]!.data.handoffId;
    expect(types(s.fail(id))).toEqual(['run.handoff_completed', 'run.held', 'run.notice_emitted']);
    const c = new Session(loanProject({ gate: { on_failure: { action: 'continue' } } }));
    const id2 = ofType(c.start('I want a loan offer'), 'run.handoff')[0]!.data.handoffId;
    c.fail(id2);
    expect(c.active).toMatchObject({ agent: 'Loan_Supervisor', awaiting: true });
  });

  it('a customer message while the agent works is queued (run/message-queue.spec); a result while the run waits for the customer is refused', () => {
    const s = new Session(loanProject());
    s.start('I want a loan offer');
    expect(types(s.say('hello?'))).toEqual(['run.message_queued']);
    s.result('Income_Capture_Agent', { body: 'Income?' });
    expect(s.active).toMatchObject({ agent: 'Income_Capture_Agent', awaiting: false });
    s.result('Income_Capture_Agent', { body: 'Income?' });
    expect(() => s.result('Income_Capture_Agent', { body: 'again' })).toThrow(/awaiting_input/);
  });
});

describe('HISTORY, PASS and SUMMARY decide exactly what the child receives', () => {
  const transcript = [1, 2, 3, 4, 5, 6, 7].map((i) => ({ role: 'customer' as const, agent: null, text: `m${i}` }));
  const scope = { a: 1, b: 2, empty: '' };
  it.each([
    [{ mode: 'full' }, 7, 'full'],
    [{ mode: 'none' }, 0, 'none'],
    [{ mode: 'summary_only' }, 0, 'summary_only'],
    [{ mode: 'last_n', count: 3 }, 3, 'last_n'],
  ] as const)('history %j gives %i messages', (history, count, mode) => {
    const { context } = buildHandoffContext({ history, summary: 'why' }, transcript, scope);
    expect(context.history).toHaveLength(count);
    expect(context.history_mode).toBe(mode);
  });
  it('auto uses summary_only when SUMMARY has text, otherwise the last five messages', () => {
    expect(buildHandoffContext({ history: { mode: 'auto' }, summary: 'why' }, transcript, scope).context.history_mode).toBe('summary_only');
    const none = buildHandoffContext({ history: { mode: 'auto' } }, transcript, scope).context;
    expect(none.history.map((m) => m.text)).toEqual(['m3', 'm4', 'm5', 'm6', 'm7']);
  });
  it('PASS lists the parent variables the child receives (none without PASS; unset ones are not passed)', () => {
    expect(buildHandoffContext({ history: { mode: 'none' }, pass: ['a', 'empty', 'missing'] }, [], scope).variables).toEqual({ a: 1 });
    expect(buildHandoffContext({ history: { mode: 'none' } }, [], scope).variables).toEqual({});
  });
  it('a PASS name that is an Object.prototype member passes only a value the parent set (never the inherited function)', () => {
    expect(buildHandoffContext({ history: { mode: 'none' }, pass: ['toString', 'valueOf', 'a'] }, [], scope)).toMatchObject({
      variables: { a: 1 },
      context: { passed: ['a'] },
    });
    const set = buildHandoffContext({ history: { mode: 'none' }, pass: ['toString'] }, [], { toString: 'spelled out' });
    expect(set.variables).toEqual({ toString: 'spelled out' });
  });
  it('MAP reads only the fields the child set: an unset field named like an Object.prototype member is skipped, not mapped to a function', () => {
    const parent = { name: 'sup', memory: [{ name: 'total', type: 'any' as const, scope: 'session' as const }] };
    const unset = computeReturnEffects({ map: { toString: 'total' }, set: {} }, {}, parent);
    expect(unset).toMatchObject({ mappedFields: [], skippedFields: ['toString'], writes: {} });
    const set = computeReturnEffects({ map: { toString: 'total' }, set: {} }, { toString: 42 }, parent);
    expect(set).toMatchObject({ mappedFields: ['toString'], writes: { total: 42 }, notWritable: [] });
  });
  it('parentReturn defaults: minConfidence 0, ignoreAmbiguous false', () => {
    const policy = effectiveParentReturn(undefined, undefined);
    expect(policy).toEqual({ minConfidence: 0, ignoreAmbiguous: false });
    expect(parentReturnVerdict({ ambiguous: true }, policy)).toEqual({ honoured: true });
  });
});
