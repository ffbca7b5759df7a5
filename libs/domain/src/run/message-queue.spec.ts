import { ProjectDefinitionSchema, type AgentResult, type ProjectDefinition } from '@baton/contracts';
import type { RunCommand } from './commands';
// Results are sent under the run's current claim unless a test says otherwise (withCurrentClaim).
import { CUSTOMER } from './conversation';
import { ENGINE } from './attribution';
import { decideClaimed as decideRun } from './test-helpers';
import { handoffIdFor } from './ids';
import { evolveRun, initialRunState, MAX_QUEUED_MESSAGES, type RunEvent, type RunState } from './state';
import { agents as workflowAgents, expectValidEvents, workflow as plainWorkflow } from './test-helpers';

/*
 * A customer message that arrives while an agent of a running conversation works is queued
 * (`run.message_queued`), not refused; the next time the run waits for the customer the oldest
 * one is delivered exactly as if it arrived then (`run.message_received` + the active agent's
 * routes, in the same decision). `siblingIntentMs` on `run.handoff_completed` is the time queued
 * messages waited during the handoff attempt.
 */

const T0 = '2025-01-01T00:00:00.000Z';
const at = (s: number) => new Date(Date.parse(T0) + s * 1000).toISOString();

function loanProject(gate: object = {}, child: object = {}): ProjectDefinition {
  return ProjectDefinitionSchema.parse({
    project: 'loans',
    agents: [
      {
        name: 'Loan_Supervisor',
        supervisor: true,
        memory: [{ name: 'annual_income', type: 'number' }],
        handoffs: [
          {
            to: 'Income_Capture_Agent',
            when: { kind: 'expression', source: 'annual_income IS NOT SET' },
            return: true,
            on_return: { action: 'continue', map: { annual_income: 'annual_income' } },
            ...gate,
          },
          { to: 'Offer_Agent', when: { kind: 'expression', source: 'annual_income IS SET' }, pass: ['annual_income'] },
        ],
      },
      {
        name: 'Income_Capture_Agent',
        gather: [{ name: 'annual_income', type: 'number', required: true }],
        complete: [{ when: { kind: 'expression', source: 'annual_income IS SET' }, respond: 'Thanks. I have your income.' }],
        ...child,
      },
      { name: 'Offer_Agent' },
    ],
    workflows: [{ name: 'loan_session', version: 1, entry: 'converse', steps: [{ id: 'converse', agent: 'Loan_Supervisor', terminal: true }] }],
  });
}

class Session {
  state: RunState = initialRunState();
  constructor(readonly project: ProjectDefinition) {}

  decide(command: RunCommand): ReturnType<typeof decideRun> {
    return decideRun(command, this.state);
  }
  run(command: RunCommand): RunEvent[] {
    const decided = decideRun(command, this.state);
    if (!decided.ok) throw new Error(`${decided.error.code}: ${decided.error.message}`);
    expectValidEvents(decided.events);
    for (const e of decided.events) this.state = evolveRun(this.state, e);
    return decided.events;
  }
  private get defs() {
    return { workflow: this.project.workflows[0]!, agents: this.project.agents };
  }
  start(input: string, s = 0, variables: Record<string, unknown> = {}): RunEvent[] {
    return this.run({
      type: 'start_run',
      data: {
        workflow_run_id: 'wr-1',
        project: 'loans',
        ...this.defs,
        people: { started_by: 'sam', issue_author: null, trigger_author: null },
        variables,
        input,
      },
      metadata: { now: at(s), actor: 'sam' },
    });
  }
  sayCmd(id: string, text: string, s: number, relayedBy?: string): RunCommand {
    return {
      type: 'session_message',
      data: { message_id: id, text, sent_by: 'sam', ...(relayedBy !== undefined ? { relayed_by: relayedBy } : {}), ...this.defs },
      metadata: { now: at(s), actor: 'sam' },
    };
  }
  say(id: string, text: string, s: number, relayedBy?: string): RunEvent[] {
    return this.run(this.sayCmd(id, text, s, relayedBy));
  }
  result(id: string, agent: string, s: number, extra: Partial<AgentResult> = {}): RunEvent[] {
    const result: AgentResult = { result_id: id, run_id: `ar-${id}`, project: 'loans', workflow_run_id: 'wr-1', agent, produced_at: at(s), ...extra };
    return this.run({ type: 'record_result', data: { result, ...this.defs }, metadata: { now: at(s), actor: agent } });
  }
  fail(handoffId: string, s: number, reason: 'create_refused' | 'timeout' = 'create_refused'): RunEvent[] {
    return this.run({
      type: 'handoff_failed',
      data: { handoff_id: handoffId, code: 'refused', message: 'refused', reason, ...this.defs },
      metadata: { now: at(s), actor: 'router' },
    });
  }
  holdContinue(answerId: string, s: number): RunEvent[] {
    return this.run({
      type: 'resume',
      data: { answer: { kind: 'hold_answer', answer: { answer_id: answerId, action: 'continue', answered_by: 'olga', answered_at: at(s) } }, ...this.defs },
      metadata: { now: at(s), actor: 'olga', actorRole: 'operator' },
    });
  }
  get queue() {
    return this.state.status === 'none' ? [] : this.state.queuedMessages.map((m) => m.messageId);
  }
}

const ofType = <T extends RunEvent['type']>(events: readonly RunEvent[], type: T) => events.filter((e): e is Extract<RunEvent, { type: T }> => e.type === type);
const types = (events: readonly RunEvent[]) => events.map((e) => e.type);
const handoffIdOf = (events: readonly RunEvent[]) => ofType(events, 'run.handoff')[0]!.data.handoffId;

describe('customer messages while an agent works are queued, not refused', () => {
  it('the agent that relayed a message (relayed_by, from its subject) stays with it: queued, then delivered; and on a message received at once', () => {
    const s = new Session(loanProject());
    s.start('I want a loan offer', 0);
    expect(s.say('m1', 'first', 3, 'chat-front')[0]).toMatchObject({ type: 'run.message_queued', data: { message_id: 'm1', relayed_by: 'chat-front' } });
    expect(s.say('m2', 'second', 4)[0]!.data).not.toHaveProperty('relayed_by');
    const delivered = ofType(s.result('r1', 'Income_Capture_Agent', 10, { body: 'What is your annual income?' }), 'run.message_received');
    expect(delivered.map((e) => e.data.relayed_by)).toEqual(['chat-front']);
    const next = ofType(s.result('r2', 'Income_Capture_Agent', 12, { body: 'And your savings?' }), 'run.message_received');
    expect(next.map((e) => [e.data.message_id, e.data.relayed_by])).toEqual([['m2', undefined]]);
    // Once the run waits for the customer, a message is received at once, with its relay and its sender.
    const agent = s.state.status === 'none' ? '' : s.state.agent;
    s.result('r3', agent, 13, { body: 'Anything else?' });
    expect(s.state.status !== 'none' && s.state.awaitingInput).toBe(true);
    expect(ofType(s.say('m3', 'third', 14, 'chat-front'), 'run.message_received')[0]!.data).toMatchObject({
      message_id: 'm3',
      relayed_by: 'chat-front',
      sent_by: 'sam',
    });
  });

  it("a customer's words are the customer's whichever command records them: the start's input, a queued message and its delivery by an agent's reply speak for the customer (by: CUSTOMER); the route the engine takes for them is the engine's (by: ENGINE); the command's own events are the command's", () => {
    const s = new Session(loanProject());
    const started = s.start('I want a loan offer', 0);
    expect(started.filter((e) => e.by !== undefined).map((e) => [e.type, e.by])).toEqual([
      ['run.message_received', CUSTOMER],
      ['run.handoff', ENGINE],
      ['run.routed', ENGINE],
    ]);
    expect(s.say('m1', 'first', 3)[0]!.by).toEqual(CUSTOMER);
    const reply = s.result('r1', 'Income_Capture_Agent', 10, { body: 'What is your annual income?' });
    expect(reply.map((e) => [e.type, e.by?.actor ?? null])).toEqual([
      ['run.result_recorded', null],
      ['run.handoff_completed', null],
      ['run.awaiting_input', null],
      ['run.message_received', 'customer'],
      ['run.routed', 'baton-router'],
    ]);
    expect(CUSTOMER).toEqual({ actor: 'customer', origin: 'human' });
    expect(ENGINE).toEqual({ actor: 'baton-router', origin: 'engine_fallback' });
  });

  it('given a conversation whose child is working, when the customer writes, then the message is queued (run.message_queued) and nothing is routed', () => {
    const s = new Session(loanProject());
    s.start('I want a loan offer', 0);
    const events = s.say('m1', 'hello?', 3);
    expect(events).toEqual([
      {
        type: 'run.message_queued',
        by: CUSTOMER,
        data: { message_id: 'm1', text: 'hello?', sent_by: 'sam', agent: 'Income_Capture_Agent', position: 1, queued_at: at(3) },
      },
    ]);
    expect(s.say('m2', 'are you there?', 4)[0]).toMatchObject({ type: 'run.message_queued', data: { position: 2 } });
    expect(s.queue).toEqual(['m1', 'm2']);
    expect(s.state.status !== 'none' && s.state.awaitingInput).toBe(false);
  });

  it('given queued messages, when the working agent replies and the run waits, then the oldest is delivered at once as if it arrived then, and the next one the next time the run waits', () => {
    const s = new Session(loanProject());
    s.start('I want a loan offer', 0);
    s.say('m1', 'first', 3);
    s.say('m2', 'second', 4);
    const events = s.result('r1', 'Income_Capture_Agent', 10, { body: 'What is your annual income?' });
    expect(types(events)).toEqual(['run.result_recorded', 'run.handoff_completed', 'run.awaiting_input', 'run.message_received', 'run.routed']);
    expect(ofType(events, 'run.message_received')[0]!.data).toEqual({
      message_id: 'm1',
      text: 'first',
      agent: 'Income_Capture_Agent',
      queued_at: at(3),
      received_at: at(10),
      // Who sent it stays with it from the queue (the SessionMessage's sent_by).
      sent_by: 'sam',
    });
    const routed = ofType(events, 'run.routed')[0]!.data;
    // The routes it causes take the message's cause, as if it had been sent now.
    expect(routed).toMatchObject({
      target: { agent: 'Income_Capture_Agent' },
      decision: { rule: 'message' },
      cause: { kind: 'message', id: 'm1' },
      conversation: { message: 'first' },
    });
    expect(routed.handoff_id).toBe(handoffIdFor('wr-1', { kind: 'message', id: 'm1' }));
    expect(s.queue).toEqual(['m2']);

    const next = s.result('r2', 'Income_Capture_Agent', 12, { body: 'And your employer?' });
    expect(types(next)).toEqual(['run.result_recorded', 'run.awaiting_input', 'run.message_received', 'run.routed']);
    expect(ofType(next, 'run.message_received')[0]!.data).toMatchObject({ message_id: 'm2', text: 'second', queued_at: at(4) });
    expect(s.queue).toEqual([]);
    // With nothing queued, the run simply waits.
    expect(types(s.result('r3', 'Income_Capture_Agent', 13, { body: 'Thanks.' }))).toEqual(['run.result_recorded', 'run.awaiting_input']);
    expect(s.state.status !== 'none' && s.state.awaitingInput).toBe(true);
  });

  it('given a queued message, when a return continues the parent, then the message is delivered to the parent and its routes are evaluated before any model runs', () => {
    const s = new Session(loanProject());
    s.start('I want a loan offer', 0);
    s.say('m1', 'what can you offer me?', 2);
    const events = s.result('r1', 'Income_Capture_Agent', 5, { variables: { annual_income: 52000 } });
    expect(types(events)).toEqual([
      'run.result_recorded',
      'run.handoff_completed',
      'run.handoff_return_handler',
      'run.awaiting_input',
      'run.message_received',
      'run.handoff_completed',
      'run.handoff',
      'run.routed',
    ]);
    expect(ofType(events, 'run.awaiting_input')[0]!.data).toMatchObject({ agent: 'Loan_Supervisor', reply: 'Thanks. I have your income.' });
    expect(ofType(events, 'run.message_received')[0]!.data).toMatchObject({ message_id: 'm1', agent: 'Loan_Supervisor' });
    // The gate is blocked (income set), the permanent route to Offer_Agent fires on the delivered message.
    expect(ofType(events, 'run.handoff_completed')[1]!.data).toMatchObject({ to: 'Income_Capture_Agent', outcome: 'blocked' });
    expect(ofType(events, 'run.handoff')[0]!.data).toMatchObject({
      from: 'Loan_Supervisor',
      to: 'Offer_Agent',
      message: 'what can you offer me?',
      handoffId: handoffIdFor('wr-1', { kind: 'message', id: 'm1' }),
    });
  });

  it('given a queued message, when the handoff fails and ON_FAILURE continue gives the caller control, then the message is delivered to the caller', () => {
    const s = new Session(loanProject({ on_failure: { action: 'continue' } }));
    const id = handoffIdOf(s.start('I want a loan offer', 0));
    s.say('m1', 'hello?', 1);
    const events = s.fail(id, 4, 'timeout');
    expect(types(events)).toEqual(['run.handoff_completed', 'run.awaiting_input', 'run.message_received', 'run.handoff', 'run.routed']);
    expect(ofType(events, 'run.message_received')[0]!.data).toMatchObject({ message_id: 'm1', agent: 'Loan_Supervisor' });
    // The supervisor's gate fires again on the delivered message (income still not set).
    expect(ofType(events, 'run.handoff')[0]!.data).toMatchObject({ to: 'Income_Capture_Agent', message: 'hello?' });
  });

  it('given a queued message and a run held by ON_FAILURE ESCALATE, when an operator continues and the agent replies, then the message is delivered', () => {
    const s = new Session(loanProject({ on_failure: { action: 'escalate' } }));
    const id = handoffIdOf(s.start('I want a loan offer', 0));
    s.say('m1', 'hello?', 1);
    expect(types(s.fail(id, 2))).toEqual(['run.handoff_completed', 'run.held', 'run.notice_emitted']);
    expect(s.queue).toEqual(['m1']);
    expect(types(s.holdContinue('a1', 3))).toEqual(['run.resumed', 'run.routed']);
    const events = s.result('r1', 'Loan_Supervisor', 4, { body: 'Sorry for the wait.' });
    expect(types(events)).toEqual(['run.result_recorded', 'run.awaiting_input', 'run.message_received', 'run.handoff', 'run.routed']);
    expect(s.queue).toEqual([]);
  });

  it('a returnable child that stops on its first result ran: its handoff is success before the stop (ON_FAILURE no longer applies; durationMs = handoff → that result)', () => {
    const s = new Session(loanProject({ on_failure: { action: 'escalate' } }));
    const id = handoffIdOf(s.start('I want a loan offer', 0));
    const events = s.result('r1', 'Income_Capture_Agent', 2, { stop: { why: 'policy', detail: 'needs a person' } });
    expect(types(events)).toEqual(['run.result_recorded', 'run.handoff_completed', 'run.stopped', 'run.notice_emitted']);
    expect(ofType(events, 'run.handoff_completed')[0]!.data).toMatchObject({ handoffId: id, outcome: 'success', durationMs: 2000 });
    expect(s.state.status === 'stopped' && s.state.pendingHandoff).toBeNull();
  });

  it('a handoff target that ends the run on its first result ran: its handoff is success and the ended run shows no pending handoff', () => {
    const s = new Session(loanProject());
    const id = handoffIdOf(s.start('I want a loan offer', 0));
    const events = s.result('r1', 'Income_Capture_Agent', 2, { decision: { dispatch: { status: 'terminate', reason: 'nothing to offer' } } });
    expect(types(events)).toEqual(['run.result_recorded', 'run.handoff_completed', 'run.terminated']);
    expect(ofType(events, 'run.handoff_completed')[0]!.data).toMatchObject({ handoffId: id, outcome: 'success', durationMs: 2000 });
    expect(s.state.status === 'terminated' && s.state.pendingHandoff).toBeNull();
  });

  it('a person who routes a stopped child`s run to its waiting parent takes the work back to it: the call frame goes, and the next return maps into the session', () => {
    const s = new Session(loanProject());
    s.start('I want a loan offer', 0);
    const stopped = s.result('r1', 'Income_Capture_Agent', 2, { stop: { why: 'unknown_intent' } });
    const packetId = ofType(stopped, 'run.stopped')[0]!.data.packet.packet_id;
    expect(s.state.status === 'stopped' && s.state.waitingParents.map((f) => f.agent)).toEqual(['Loan_Supervisor']);
    s.run({
      type: 'resume',
      data: {
        answer: {
          kind: 'stop_answer',
          answer: { packet_id: packetId, answer_id: 'a1', action: 'intent', intent: 'Loan_Supervisor', answered_by: 'olga', answered_at: at(3) },
        },
        ...(s as unknown as { defs: object }).defs,
      },
      metadata: { now: at(3), actor: 'olga', actorRole: 'operator' },
    } as RunCommand);
    expect(s.state).toMatchObject({ status: 'running', agent: 'Loan_Supervisor', waitingParents: [], pendingHandoff: null });
    // The supervisor speaks; the customer answers; the route fires again and its child returns.
    s.result('r2', 'Loan_Supervisor', 4, { body: 'Let me get your income first.' });
    s.say('m1', 'sure', 5);
    s.result('r3', 'Income_Capture_Agent', 6, { body: 'Thanks.', variables: { annual_income: 90_000 } });
    expect(s.state.status !== 'none' && s.state.waitingParents).toEqual([]);
    expect(s.state.status !== 'none' && s.state.variables).toMatchObject({ annual_income: 90_000 });
  });

  it('queueing is idempotent on message_id: the same message again, queued or delivered, yields no events', () => {
    const s = new Session(loanProject());
    s.start('I want a loan offer', 0);
    s.say('m1', 'hello?', 1);
    expect(s.say('m1', 'hello?', 2)).toEqual([]);
    expect(s.queue).toEqual(['m1']);
    s.result('r1', 'Income_Capture_Agent', 3, { body: 'Income?' });
    expect(s.queue).toEqual([]);
    s.result('r2', 'Income_Capture_Agent', 4, { body: 'Income, please?' });
    expect(s.say('m1', 'hello?', 5)).toEqual([]);
  });

  it('message ids and result ids are apart: a customer message whose id equals the next result id does not swallow that result (nor the reverse)', () => {
    const s = new Session(loanProject());
    s.start('I want a loan offer', 0);
    expect(types(s.say('turn-1', 'hello?', 1))).toEqual(['run.message_queued']);
    // The agent's result with the same id is recorded, and the queued message then delivered.
    expect(types(s.result('turn-1', 'Income_Capture_Agent', 2, { body: 'Income?' }))).toEqual(
      expect.arrayContaining(['run.result_recorded', 'run.awaiting_input', 'run.message_received']),
    );
    expect(s.queue).toEqual([]);
    // A message whose id is an applied result id is a message like any other.
    s.result('r-9', 'Income_Capture_Agent', 4, { body: 'Income, please?' });
    expect(types(s.say('r-9', '5000 a month', 5))).toContain('run.message_received');
    // A result id that spells a message's key (ids may hold `:`) spends nothing of the customer's.
    s.result('message:m-7', 'Income_Capture_Agent', 6, { body: 'Anything else?' });
    expect(types(s.say('m-7', 'no, thanks', 7))).toContain('run.message_received');
  });

  it('a refused message is recorded under its own kind: the same id again is not re-decided, and a result of that id is still decided', () => {
    const s = new Session(loanProject());
    s.start('I want a loan offer', 0);
    for (let i = 1; i <= MAX_QUEUED_MESSAGES; i++) s.say(`m${i}`, `message ${i}`, i);
    const rejected = s.run({
      type: 'reject_result',
      data: { result_id: 'x-1', agent: 'customer', code: 'message_queue_full', message: 'full', refused: 'message' },
      metadata: { now: at(30), actor: 'router' },
    });
    expect(ofType(rejected, 'run.result_rejected')[0]!.data).toMatchObject({ result_id: 'x-1', refused: 'message' });
    expect(s.say('x-1', 'again', 31)).toEqual([]);
    expect(types(s.result('x-1', 'Income_Capture_Agent', 32, { body: 'Income?' }))).toContain('run.result_recorded');
  });

  it(`the queue is bounded: with ${MAX_QUEUED_MESSAGES} messages waiting, one more is refused (message_queue_full)`, () => {
    const s = new Session(loanProject());
    s.start('I want a loan offer', 0);
    for (let i = 1; i <= MAX_QUEUED_MESSAGES; i++) s.say(`m${i}`, `message ${i}`, i);
    const refused = s.decide(s.sayCmd('m-extra', 'one more', 30));
    expect(refused.ok === false && refused.error.code).toBe('message_queue_full');
    expect(s.queue).toHaveLength(MAX_QUEUED_MESSAGES);
    // Once one is delivered there is room again.
    s.result('r1', 'Income_Capture_Agent', 31, { body: 'Income?' });
    expect(types(s.say('m-extra', 'one more', 32))).toEqual(['run.message_queued']);
  });

  it('a message to a held, stopped, terminated or non-conversation run is refused (run_not_awaiting_input), as before', () => {
    const held = new Session(loanProject({ on_failure: { action: 'escalate' } }));
    held.fail(handoffIdOf(held.start('I want a loan offer', 0)), 1);
    expect(held.decide(held.sayCmd('m1', 'hello?', 2))).toMatchObject({ ok: false, error: { code: 'run_not_awaiting_input' } });

    const stopped = new Session(loanProject());
    stopped.start('I want a loan offer', 0);
    stopped.result('r1', 'Income_Capture_Agent', 1, { stop: { why: 'policy', detail: 'needs a person' } });
    expect(stopped.state.status).toBe('stopped');
    expect(stopped.decide(stopped.sayCmd('m1', 'hello?', 2))).toMatchObject({ ok: false, error: { code: 'run_not_awaiting_input' } });

    const ended = new Session(loanProject());
    ended.start('I want a loan offer', 0);
    ended.result('r1', 'Income_Capture_Agent', 1, { decision: { dispatch: { status: 'terminate', reason: 'done' } } });
    expect(ended.state.status).toBe('terminated');
    expect(ended.decide(ended.sayCmd('m1', 'hello?', 2))).toMatchObject({ ok: false, error: { code: 'run_not_awaiting_input' } });

    const plain = new Session(loanProject());
    plain.state = evolveRun(initialRunState(), {
      type: 'run.started',
      data: {
        workflow_run_id: 'wr-1',
        project: 'loans',
        workflow: { name: plainWorkflow.name, version: plainWorkflow.version },
        entry: { agent: 'a', step: 's' },
        people: { started_by: 'sam', issue_author: null, trigger_author: null },
        variables: {},
        started_at: at(0),
      },
    });
    const refused = decideRun(
      {
        type: 'session_message',
        data: { message_id: 'm1', text: 'hello?', workflow: plainWorkflow, agents: workflowAgents },
        metadata: { now: at(1), actor: 'sam' },
      },
      plain.state,
    );
    expect(refused).toMatchObject({ ok: false, error: { code: 'run_not_awaiting_input' } });
  });
});

describe('siblingIntentMs: the time queued customer messages waited during a handoff attempt', () => {
  it('given messages queued during the attempt, when the child answers, then siblingIntentMs is the sum of their queued time within the attempt; durationMs stays handoff → result', () => {
    const s = new Session(loanProject());
    s.start('I want a loan offer', 0);
    s.say('m1', 'first', 3);
    s.say('m2', 'second', 6);
    const [completed] = ofType(s.result('r1', 'Income_Capture_Agent', 10, { body: 'Income?' }), 'run.handoff_completed');
    expect(completed!.data).toMatchObject({ outcome: 'success', durationMs: 10_000, siblingIntentMs: 7_000 + 4_000 });
  });

  it('a message queued before the handoff counts from the handoff; with nothing queued siblingIntentMs is not set', () => {
    const s = new Session(loanProject({}, { handoffs: [{ to: 'Offer_Agent', when: { kind: 'intent', text: 'the customer wants an offer now' } }] }));
    s.start('I want a loan offer', 0);
    const [first] = ofType(s.result('r1', 'Income_Capture_Agent', 2, { body: 'Income?' }), 'run.handoff_completed');
    expect(first!.data).not.toHaveProperty('siblingIntentMs');
    s.say('m1', 'just show me offers', 3); // delivered to the waiting child: it works on it
    s.say('m2', 'please', 4); // queued at 4 while the child works
    const chose = s.result('r2', 'Income_Capture_Agent', 6, { handoff: { to: 'Offer_Agent' } }); // permanent handoff at 6; m2 still queued
    expect(types(chose)).toEqual(['run.result_recorded', 'run.handoff', 'run.routed']);
    const [completed] = ofType(s.result('r3', 'Offer_Agent', 9, { body: 'Here are your offers.' }), 'run.handoff_completed');
    expect(completed!.data).toMatchObject({ outcome: 'success', durationMs: 3_000, siblingIntentMs: 3_000 });
  });

  it('a failed attempt (timeout) reports siblingIntentMs too; refused and blocked routes, which are no attempt, do not', () => {
    const s = new Session(loanProject({ on_failure: { action: 'continue' } }));
    const id = handoffIdOf(s.start('I want a loan offer', 0));
    s.say('m1', 'hello?', 5);
    const events = s.fail(id, 20, 'timeout');
    const completed = ofType(events, 'run.handoff_completed');
    expect(completed[0]!.data).toMatchObject({ outcome: 'timeout', durationMs: 20_000, siblingIntentMs: 15_000 });
    expect(completed.slice(1).every((e) => e.data.siblingIntentMs === undefined)).toBe(true);
  });
});
