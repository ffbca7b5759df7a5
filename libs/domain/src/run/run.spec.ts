import { pendingDigest } from '../stop';
import { fold } from '../decider';
import { given } from '../testing/given';
import { RunCommand, StopRun } from './commands';
// Results are sent under the run's current claim unless a test says otherwise (withCurrentClaim).
import { claimedRunDecider as runDecider } from './test-helpers';
import { RunEvent, RunEventOf, RunState } from './state';
import { hasLiveMention } from '../notices';
import { ENGINE } from './attribution';
import { agents, decided, expectValidEvents, holdAnswer, NOW, operatorMeta, resultCmd, RUN, startCmd, workflow, meta } from './test-helpers';

/** Run commands in order; every one must be accepted. Returns the history and the final state. */
function play(commands: RunCommand[], history: RunEvent[] = []): { events: RunEvent[]; state: RunState; last: RunEvent[] } {
  const events = [...history];
  let last: RunEvent[] = [];
  for (const command of commands) {
    const result = runDecider.decide(command, fold(runDecider, events));
    if (!result.ok) throw new Error(`${command.type} refused: ${result.error.code} ${result.error.message}`);
    expectValidEvents(result.events);
    last = result.events;
    events.push(...result.events);
  }
  return { events, state: fold(runDecider, events), last };
}

const ofType = <T extends RunEvent['type']>(events: RunEvent[], type: T) => events.filter((e): e is RunEventOf<T> => e.type === type);
const advance = { dispatch: { status: 'advance' as const } };
const started = () => play([startCmd()]).events;
/** A run currently at step `context` with agent `context` (issue → architect → context). */
const atContext = () => play([decided('r1', 'issue', advance), decided('r2', 'architect', advance)], started()).events;

describe('workflow run: start', () => {
  it('start_run records the run and routes its entry step, with a handoff id derived from the run id', () => {
    const events = given(runDecider)
      .when(startCmd())
      .then([
        {
          type: 'run.started',
          data: {
            workflow_run_id: RUN,
            project: 'demo',
            workflow: { name: 'feature', version: 1 },
            entry: { agent: 'issue', step: 'triage' },
            people: { started_by: 'sam', issue_author: 'ivy', trigger_author: 'tom' },
            variables: {},
            started_at: NOW,
          },
        },
        expect.objectContaining({
          type: 'run.routed',
          data: expect.objectContaining({ target: { agent: 'issue', step: 'triage' }, handoff_id: `ho-s-${RUN}`, hop: 1 }),
        }),
      ]);
    expectValidEvents(events);
  });

  it('starting a started run again yields no events (idempotent)', () => {
    given(runDecider, started()).when(startCmd()).then([]);
  });

  it('a start under a taken run id for another workflow or by other people is another run: refused run_already_started, not taken for this one', () => {
    const other = startCmd({ started_by: 'bob', issue_author: null, trigger_author: null });
    given(runDecider, started()).when(other).thenFails('run_already_started');
    const otherWorkflow: RunCommand = { ...startCmd(), data: { ...startCmd().data, workflow: { ...startCmd().data.workflow, name: 'another' } } };
    given(runDecider, started()).when(otherWorkflow).thenFails('run_already_started');
  });

  it('a run with nobody to notify is refused: every stop for a human must reach a person', () => {
    given(runDecider)
      .when(startCmd({ started_by: null, issue_author: null, trigger_author: null }))
      .thenFails('no_notice_recipient');
  });
});

describe('workflow run: seed 000 §6 through the aggregate', () => {
  it("architect → context → architect (workflow edge): each advance dispatches the next step's agent", () => {
    const { state, events } = play([decided('r1', 'issue', advance), decided('r2', 'architect', advance), decided('r3', 'context', advance)], started());
    expect(ofType(events, 'run.routed').map((e) => `${e.data.target.agent}@${e.data.target.step}`)).toEqual([
      'issue@triage',
      'architect@analyze',
      'context@context',
      'architect@plan',
    ]);
    expect(state).toMatchObject({ status: 'running', agent: 'architect', step: 'plan', callback: null, hops: 4 });
  });

  it('issue → context → issue (imperative call): the callback is registered on the run and returns control to issue', () => {
    const afterCall = play([decided('r1', 'issue', { function_call: { function: 'call_agent', agent_name: 'context' } })], started());
    expect(afterCall.state).toMatchObject({ agent: 'context', step: 'triage', callback: 'issue' });
    const back = play([decided('r2', 'context', advance)], afterCall.events);
    expect(back.state).toMatchObject({ agent: 'issue', step: 'triage', callback: null });
    expect(ofType(back.last, 'run.routed')[0]!.data.decision.rule).toBe('callback');
  });

  it('an unresolved decision from a callee (unknown_intent stop) clears the return address on the run, as every non-call transition does', () => {
    const afterCall = play([decided('r1', 'issue', { function_call: { function: 'call_agent', agent_name: 'context' } })], started());
    expect(afterCall.state).toMatchObject({ callback: 'issue' });
    const stopped = play([decided('r2', 'context', { task: 'nobody' })], afterCall.events);
    expect(ofType(stopped.last, 'run.stopped')[0]!.data.packet.why).toBe('unknown_intent');
    expect(stopped.state).toMatchObject({ status: 'stopped', callback: null });
    // A stop the agent asked for keeps it: an approval or a raised cap lets the callee carry on and return.
    const agentStop = play(
      [decided('r2', 'context', advance, { stop: { why: 'policy' }, pending_tool_call: { name: 'refund', args: { amount: 40 } } })],
      afterCall.events,
    );
    expect(agentStop.state).toMatchObject({ status: 'stopped', callback: 'issue' });
  });

  it('the legacy sentinel in a body routes like a typed decision (typed decision wins when both are present)', () => {
    const body = 'done\n<!-- AGENT_RUN_CONFIG {"dispatch": {"status": "hold"}} -->';
    const viaBody = play([resultCmd('r1', 'issue', { body })], started());
    expect(viaBody.state.status).toBe('held');
    const typedWins = play([resultCmd('r1', 'issue', { body, decision: advance })], started());
    expect(typedWins.state).toMatchObject({ status: 'running', agent: 'architect' });
  });

  it('a decision-less callee returns to its caller (engine_fallback), and the routed event says so', () => {
    const { last, state } = play(
      [decided('r1', 'issue', { function_call: { function: 'call_agent', agent_name: 'context' } }), resultCmd('r2', 'context', { body: 'my answer' })],
      started(),
    );
    expect(last[1]).toMatchObject({
      type: 'run.routed',
      data: {
        decision: {
          rule: 'no_action_default',
          dispatch: { origin: 'engine_fallback', reason: "no-action default: agent emitted no decision; returning to caller 'issue'" },
        },
      },
    });
    expect(state).toMatchObject({ agent: 'issue', status: 'running' });
  });
});

describe('workflow run: idempotency and refusals', () => {
  it('the same result_id twice yields no new events', () => {
    const history = play([decided('r1', 'issue', advance)], started()).events;
    given(runDecider, history)
      .when(decided('r1', 'issue', advance))
      .then([]);
  });

  it('run.routed carries a handoff id derived from the result id, so the ledger call is idempotent', () => {
    const { last } = play([decided('r1', 'issue', advance)], started());
    expect(ofType(last, 'run.routed')[0]!.data.handoff_id).toBe('ho-r-wr-1:r1');
    const again = runDecider.decide(decided('r1', 'issue', advance), fold(runDecider, started()));
    expect(again.ok && ofType(again.events, 'run.routed')[0]!.data.handoff_id).toBe('ho-r-wr-1:r1');
  });

  it("a result from an agent that is not the run's current agent is refused (unexpected_agent)", () => {
    given(runDecider, started())
      .when(decided('r1', 'architect', advance))
      .thenFails('unexpected_agent');
  });

  it('a result for a finished run is refused (run_not_running)', () => {
    const done = play([decided('r1', 'issue', { dispatch: { status: 'terminate' } })], started()).events;
    given(runDecider, done)
      .when(decided('r2', 'issue', advance))
      .thenFails('run_not_running');
  });

  it('a result for a held run is refused until a person answers (run_not_running)', () => {
    const held = play([decided('r1', 'issue', { dispatch: { status: 'hold' } })], started()).events;
    given(runDecider, held)
      .when(decided('r2', 'issue', advance))
      .thenFails('run_not_running');
  });

  it('a result for another run, a stale handoff, or another workflow version is refused', () => {
    given(runDecider, started())
      .when(resultCmd('r1', 'issue', { workflow_run_id: 'wr-2' }))
      .thenFails('wrong_run');
    given(runDecider, started())
      .when(resultCmd('r1', 'issue', { handoff_id: 'ho-old' }))
      .thenFails('stale_handoff');
    const v2 = { ...decided('r1', 'issue', advance) };
    v2.data = { ...v2.data, workflow: { ...workflow, version: 2 } };
    given(runDecider, started()).when(v2).thenFails('workflow_mismatch');
  });

  it('a result before the run started is refused (run_not_found)', () => {
    given(runDecider)
      .when(decided('r1', 'issue', advance))
      .thenFails('run_not_found');
  });

  it("a refused result can be recorded in the run's history once (reject_result is idempotent)", () => {
    const reject: RunCommand = { type: 'reject_result', data: { result_id: 'r9', agent: 'architect', code: 'unexpected_agent', message: 'x' }, metadata: meta };
    const { events } = play([reject], started());
    expect(ofType(events, 'run.result_rejected')).toHaveLength(1);
    given(runDecider, events).when(reject).then([]);
  });
});

describe('workflow run: seed 000 §5 engine-owned human notification', () => {
  it('hold → exactly one HumanActionNotice, addressed to the workflow starter; replaying the same result → none', () => {
    const { last, events } = play([decided('r1', 'issue', { dispatch: { status: 'hold', reason: 'ask @bob' } })], started());
    const notices = ofType(last, 'run.notice_emitted');
    expect(notices).toHaveLength(1);
    expect(notices[0]!.data.notice).toMatchObject({ reason: 'hold', recipient: { handle: 'sam', source: 'started_by' }, notice_id: 'nt-r-wr-1:r1' });
    expect(hasLiveMention(notices[0]!.data.notice.headline)).toBe(false);
    given(runDecider, events)
      .when(decided('r1', 'issue', { dispatch: { status: 'hold' } }))
      .then([]);
  });

  it('the notice falls back to the issue author, then the trigger author, when the run has no starter', () => {
    const history = play([startCmd({ started_by: null, issue_author: null, trigger_author: 'tom' })]).events;
    const { last } = play([resultCmd('r1', 'issue', { body: 'no decision here' })], history);
    expect(ofType(last, 'run.notice_emitted')[0]!.data.notice.recipient).toEqual({ handle: 'tom', source: 'trigger_author' });
  });

  it('the no-action default hold notifies once, and agent text in the notice is notification-inert', () => {
    const { last, state } = play([resultCmd('r1', 'issue', { body: 'Answer for @alice and @@bob' })], started());
    expect(state).toMatchObject({ status: 'held', hold: { kind: 'hold', reason: 'no-action default: agent emitted no decision' } });
    const notices = ofType(last, 'run.notice_emitted');
    expect(notices).toHaveLength(1);
    expect(notices[0]!.data.notice.agent_excerpt).toContain('alice');
    expect(hasLiveMention(notices[0]!.data.notice.agent_excerpt ?? '')).toBe(false);
  });

  it('seed 000 §5: the events of a decision the engine made speak for the engine (baton-router, engine_fallback), the agent`s recorded result for the agent; an agent`s own decision stays its own', () => {
    const fallback = play([resultCmd('r1', 'issue', { body: 'no decision here' })], started()).last;
    expect(fallback.map((e) => [e.type, e.by ?? null])).toEqual([
      ['run.result_recorded', null],
      ['run.held', { actor: 'baton-router', origin: 'engine_fallback' }],
      ['run.notice_emitted', { actor: 'baton-router', origin: 'engine_fallback' }],
    ]);
    const own = play([decided('r1', 'issue', { dispatch: { status: 'hold', reason: 'ask a person' } })], started()).last;
    expect(own.every((e) => e.by === undefined)).toBe(true);
    // The workflow's entry route is the engine's too; the start itself is its starter's.
    const start = play([startCmd()]).last;
    expect(start.map((e) => [e.type, e.by?.origin ?? null])).toEqual([
      ['run.started', null],
      ['run.routed', 'engine_fallback'],
    ]);
  });

  it('human_gate hold → one notice (reason human_gate); an operator continue follows the gated edge with origin human', () => {
    const toReview = play([decided('r3', 'context', advance), decided('r4', 'architect', advance)], atContext()).events;
    const gated = play([decided('r5', 'reviewer', advance)], toReview);
    expect(gated.state).toMatchObject({ status: 'held', hold: { kind: 'human_gate', pendingTarget: { agent: 'shipper', step: 'ship' } } });
    expect(ofType(gated.last, 'run.notice_emitted').map((e) => e.data.notice.reason)).toEqual(['human_gate']);
    const resumed = play([holdAnswer('a1', 'continue')], gated.events);
    expect(resumed.last.map((e) => e.type)).toEqual(['run.resumed', 'run.routed']);
    expect(ofType(resumed.last, 'run.routed')[0]!.data.decision).toMatchObject({ rule: 'resume', dispatch: { origin: 'human' } });
    expect(resumed.state).toMatchObject({ status: 'running', agent: 'shipper', step: 'ship' });
  });

  it('terminal step → the workflow completes with exactly one notice (reason terminal)', () => {
    const history = play([decided('r3', 'context', { task: 'ship' })], atContext()).events;
    const done = play([decided('r4', 'shipper', advance)], history);
    expect(done.last.map((e) => e.type)).toEqual(['run.result_recorded', 'run.completed', 'run.notice_emitted']);
    expect(done.state.status).toBe('completed');
  });

  it('dispatch and terminate are not stops for a human: they emit no notice', () => {
    const routed = play([decided('r1', 'issue', advance)], started());
    const ended = play([decided('r1', 'issue', { dispatch: { status: 'terminate' } })], started());
    expect(ofType(routed.last, 'run.notice_emitted')).toHaveLength(0);
    expect(ofType(ended.last, 'run.notice_emitted')).toHaveLength(0);
  });
});

describe('workflow run: holds answered by an operator', () => {
  it('reroute sends the held run to the named agent; terminate ends it', () => {
    const held = play([decided('r1', 'issue', { dispatch: { status: 'hold' } })], started()).events;
    expect(play([holdAnswer('a1', 'reroute', 'security reviewer')], held).state).toMatchObject({ status: 'running', agent: 'security' });
    expect(play([holdAnswer('a1', 'terminate')], held).state.status).toBe('terminated');
  });

  it('an answer made for an earlier hold is refused (stale_answer): it names the hold it was made for by its cause', () => {
    const firstHold = play([decided('r1', 'issue', { dispatch: { status: 'hold' } })], started()).events;
    expect(ofType(firstHold, 'run.held').at(-1)!.data.cause).toEqual({ kind: 'result', id: 'r1' });
    const forHold = (answerId: string, id: string): RunCommand => {
      const command = holdAnswer(answerId, 'terminate');
      const answer = command.data.answer;
      if (answer.kind !== 'hold_answer') throw new Error('a hold answer');
      return { ...command, data: { ...command.data, answer: { kind: 'hold_answer', answer: { ...answer.answer, hold_cause: { kind: 'result', id } } } } };
    };
    // Operator A reroutes the run back to issue, which holds again (r2): B's form was rendered for r1's hold.
    const secondHold = play([holdAnswer('a1', 'reroute', 'issue'), decided('r2', 'issue', { dispatch: { status: 'hold' } })], firstHold).events;
    given(runDecider, secondHold).when(forHold('a2', 'r1')).thenFails('stale_answer');
    expect(play([forHold('a3', 'r2')], secondHold).state.status).toBe('terminated');
    // Without a hold_cause the answer answers whatever hold the run is in (as before).
    expect(play([holdAnswer('a4', 'terminate')], secondHold).state.status).toBe('terminated');
  });

  it('continue on a hold with nowhere to go is refused (nothing_to_continue)', () => {
    const drafted = play([decided('r1', 'issue', { task: 'draft' })], started()).events;
    const held = play([decided('r2', 'writer', advance)], drafted).events;
    given(runDecider, held).when(holdAnswer('a1', 'continue')).thenFails('nothing_to_continue');
  });

  it("continue on a no-action hold at a terminal step completes the run, as the person's decision (it does not complete on its own)", () => {
    const history = play([decided('r3', 'context', { task: 'ship' })], atContext()).events;
    const held = play([resultCmd('r4', 'shipper')], history);
    expect(held.state.status).toBe('held');
    const done = play([holdAnswer('a1', 'continue')], held.events);
    expect(done.last.map((e) => e.type)).toEqual(['run.resumed', 'run.completed', 'run.notice_emitted']);
    expect(ofType(done.last, 'run.completed')[0]!.data.decision).toMatchObject({ outcome: 'complete', dispatch: { origin: 'human' } });
    expect(done.state.status).toBe('completed');
    expectValidEvents(done.last);
  });

  it('only an operator resumes a run; the same answer twice yields no new events', () => {
    const held = play([decided('r1', 'issue', { dispatch: { status: 'hold' } })], started()).events;
    const byAgent = holdAnswer('a1', 'continue');
    byAgent.metadata = { ...meta, actorRole: 'agent' };
    given(runDecider, held).when(byAgent).thenFails('answer_forbidden');
    const answered = play([holdAnswer('a1', 'continue')], held).events;
    given(runDecider, answered).when(holdAnswer('a1', 'continue')).then([]);
  });
});

describe('workflow run: stops with a packet (seed 003)', () => {
  const pending = { name: 'refund', args: { order: 99, amount: 40 } };

  it('an agent result with stop set produces a stop with a packet via buildStop, and one notice', () => {
    const { last, state } = play(
      [
        decided('r1', 'issue', advance, {
          stop: { why: 'policy', detail: 'refund over cap' },
          pending_tool_call: pending,
          tried: [{ name: 'lookup', trace_id: 't1' }],
        }),
      ],
      started(),
    );
    expect(last.map((e) => e.type)).toEqual(['run.result_recorded', 'run.stopped', 'run.notice_emitted']);
    const stopped = ofType(last, 'run.stopped')[0]!.data;
    expect(stopped.packet).toMatchObject({
      packet_id: 'stop-r-wr-1:r1',
      why: 'policy',
      pending,
      tried: ['lookup'],
      trace_ids: ['t1'],
      status: 'open',
      goal_done: false,
    });
    expect(state.status).toBe('stopped');
    expect(ofType(last, 'run.notice_emitted')[0]!.data.notice).toMatchObject({ reason: 'stop', stop_id: 'stop-r-wr-1:r1' });
  });

  it('an agent that stops naming nothing it tried (absent or empty) tried itself: the packet says so, never a shrug with no tried', () => {
    for (const tried of [undefined, []]) {
      const { last } = play([decided('r1', 'issue', advance, { stop: { why: 'banned_click' }, ...(tried ? { tried } : {}) })], started());
      expect({ tried, packet: ofType(last, 'run.stopped')[0]!.data.packet.tried }).toEqual({ tried, packet: ['issue'] });
    }
    // A hold with a call pending becomes a policy stop: the same.
    const held = play([decided('r1', 'issue', { dispatch: { status: 'hold' } }, { pending_tool_call: pending })], started());
    expect(ofType(held.last, 'run.stopped')[0]!.data.packet).toMatchObject({ why: 'policy', tried: ['issue'] });
  });

  it('approve runs exactly the frozen call (the stopped agent carries on); deny terminates the run', () => {
    const stopped = play([decided('r1', 'issue', advance, { stop: { why: 'policy' }, pending_tool_call: pending })], started()).events;
    const answer = (action: 'approve' | 'deny'): RunCommand => ({
      type: 'resume',
      data: {
        answer: {
          kind: 'stop_answer',
          answer: {
            packet_id: 'stop-r-wr-1:r1',
            answer_id: `a-${action}`,
            action,
            pending_digest: pendingDigest(pending),
            answered_by: 'olga',
            answered_at: NOW,
          },
        },
        workflow,
        agents,
      },
      metadata: operatorMeta,
    });
    const approved = play([answer('approve')], stopped);
    expect(ofType(approved.last, 'run.routed')[0]!.data).toMatchObject({ target: { agent: 'issue' }, approved_call: pending });
    expect(play([answer('deny')], stopped).state.status).toBe('terminated');
  });

  it('an agent that holds with a tool call pending asks a person to approve it: a policy stop freezing the call (seed 003: a real freeze is never dropped)', () => {
    const hold = { dispatch: { status: 'hold' as const, reason: 'refund needs a person' } };
    const { last, state } = play([decided('r1', 'issue', hold, { pending_tool_call: pending, tried: [{ name: 'lookup' }] })], started());
    expect(last.map((e) => e.type)).toEqual(['run.result_recorded', 'run.stopped', 'run.notice_emitted']);
    const packet = ofType(last, 'run.stopped')[0]!.data.packet;
    expect(packet).toMatchObject({ why: 'policy', pending, tried: ['lookup'], detail: 'refund needs a person', next_form: { kind: 'approve_deny' } });
    expect(state.status).toBe('stopped');
    // The agent's own hold: recorded on the stop, and the stop is the agent's.
    const agentStop = ofType(last, 'run.stopped')[0]!;
    expect(agentStop.data).toMatchObject({ source: 'agent', decision: { dispatch: { status: 'hold', origin: 'agent' } } });
    expect(agentStop.by).toBeUndefined();
    // Approving runs exactly the frozen call.
    const approve: RunCommand = {
      type: 'resume',
      data: {
        answer: {
          kind: 'stop_answer',
          answer: {
            packet_id: packet.packet_id,
            answer_id: 'a-1',
            action: 'approve',
            pending_digest: pendingDigest(pending),
            answered_by: 'olga',
            answered_at: NOW,
          },
        },
        workflow,
        agents,
      },
      metadata: operatorMeta,
    };
    const approved = play([approve], play([decided('r1', 'issue', hold, { pending_tool_call: pending, tried: [{ name: 'lookup' }] })], started()).events);
    expect(ofType(approved.last, 'run.routed')[0]!.data).toMatchObject({ target: { agent: 'issue' }, approved_call: pending });
    // A hold without a pending call stays a hold (no packet); a null pending call is none.
    expect(play([decided('r1', 'issue', hold)], started()).last.map((e) => e.type)).toEqual(['run.result_recorded', 'run.held', 'run.notice_emitted']);
    expect(play([decided('r1', 'issue', hold, { pending_tool_call: null })], started()).state.status).toBe('held');
  });

  it('a result with a tool call pending and no decision (none, or one that cannot be read) freezes the call in a policy stop instead of a no-action hold that drops it', () => {
    const noDecision = play([resultCmd('r1', 'issue', { pending_tool_call: pending, tried: [{ name: 'lookup' }] })], started());
    expect(noDecision.last.map((e) => e.type)).toEqual(['run.result_recorded', 'run.stopped', 'run.notice_emitted']);
    expect(ofType(noDecision.last, 'run.stopped')[0]!.data.packet).toMatchObject({
      why: 'policy',
      pending,
      tried: ['lookup'],
      detail: 'no-action default: agent emitted no decision',
      next_form: { kind: 'approve_deny' },
    });
    expectValidEvents(noDecision.last);
    // Baton made this decision, not the agent: the stop records the no-action hold, and it and its
    // notice speak for the engine (seed 000 §5: a fabricated decision is told apart by its origin).
    const engineStop = ofType(noDecision.last, 'run.stopped')[0]!;
    expect(engineStop.data).toMatchObject({
      source: 'router',
      decision: { rule: 'no_action_default', dispatch: { status: 'hold', origin: 'engine_fallback' } },
    });
    expect(engineStop.by).toEqual(ENGINE);
    expect(ofType(noDecision.last, 'run.notice_emitted')[0]!.by).toEqual(ENGINE);
    const unreadable = play([resultCmd('r1', 'issue', { pending_tool_call: pending, body: 'done <!-- AGENT_RUN_CONFIG {nope -->' })], started());
    expect(ofType(unreadable.last, 'run.stopped')[0]!.data.packet).toMatchObject({ why: 'policy', pending });
    expect(ofType(unreadable.last, 'run.stopped')[0]!.data.packet.detail).toMatch(
      /^no-action default: agent emitted no decision and the AGENT_RUN_CONFIG sentinel could not be parsed/,
    );
    // Without a pending call the no-action default is still the hold it always was.
    expect(play([resultCmd('r1', 'issue')], started()).last.map((e) => e.type)).toEqual(['run.result_recorded', 'run.held', 'run.notice_emitted']);
  });

  it('a result that goes on (advance, task) with a tool call pending freezes nothing and drops nothing: the call is kept on run.result_recorded, a copy of what the agent sent', () => {
    const advanced = play([decided('r1', 'issue', advance, { pending_tool_call: pending })], started());
    expect(advanced.last.map((e) => e.type)).toEqual(['run.result_recorded', 'run.routed']);
    const recorded = ofType(advanced.last, 'run.result_recorded')[0]!.data;
    expect(recorded.pending_tool_call).toEqual(pending);
    expect(recorded.pending_tool_call).not.toBe(pending);
    expectValidEvents(advanced.last);
    const tasked = play([decided('r1', 'issue', { task: 'reviewer' }, { pending_tool_call: pending })], started());
    expect(ofType(tasked.last, 'run.result_recorded')[0]!.data.pending_tool_call).toEqual(pending);
    // A stop freezes it in its packet and the result keeps it too; without one (or null) there is none.
    const stopped = play([decided('r1', 'issue', advance, { stop: { why: 'policy' }, pending_tool_call: pending })], started());
    expect(ofType(stopped.last, 'run.result_recorded')[0]!.data.pending_tool_call).toEqual(pending);
    expect(ofType(stopped.last, 'run.stopped')[0]!.data.packet.pending).toEqual(pending);
    expect(ofType(play([decided('r1', 'issue', advance)], started()).last, 'run.result_recorded')[0]!.data).not.toHaveProperty('pending_tool_call');
    expect(ofType(play([decided('r1', 'issue', advance, { pending_tool_call: null })], started()).last, 'run.result_recorded')[0]!.data).not.toHaveProperty(
      'pending_tool_call',
    );
  });

  it('a call left pending by a result that went on into a hold (a human gate, an advance with nowhere to go) rides on the hold and is handed on by continue or reroute, not approved; terminate drops it with the run', () => {
    const toReview = play([decided('r3', 'context', advance), decided('r4', 'architect', advance)], atContext()).events;
    const gated = play([decided('r5', 'reviewer', advance, { pending_tool_call: pending })], toReview);
    expect(gated.last.map((e) => e.type)).toEqual(['run.result_recorded', 'run.held', 'run.notice_emitted']);
    const held = ofType(gated.last, 'run.held')[0]!.data;
    expect(held).toMatchObject({ hold_kind: 'human_gate', pending_call: pending });
    expect(held.pending_call).not.toBe(pending);
    expectValidEvents(gated.last);
    expect(gated.state).toMatchObject({ status: 'held', hold: { pendingCall: pending } });

    const continued = play([holdAnswer('a1', 'continue')], gated.events);
    expect(ofType(continued.last, 'run.routed')[0]!.data).toMatchObject({ target: { agent: 'shipper', step: 'ship' }, pending_call: pending });
    expect(ofType(continued.last, 'run.routed')[0]!.data).not.toHaveProperty('approved_call');
    const rerouted = play([holdAnswer('a1', 'reroute', 'security reviewer')], gated.events);
    expect(ofType(rerouted.last, 'run.routed')[0]!.data).toMatchObject({ target: { agent: 'security' }, pending_call: pending });
    expect(play([holdAnswer('a1', 'terminate')], gated.events).state.status).toBe('terminated');

    // Without a pending call the hold carries none, and the continue hands nothing on.
    const plain = play([decided('r5', 'reviewer', advance)], toReview);
    expect(ofType(plain.last, 'run.held')[0]!.data).not.toHaveProperty('pending_call');
    expect(ofType(play([holdAnswer('a1', 'continue')], plain.events).last, 'run.routed')[0]!.data).not.toHaveProperty('pending_call');
    // The next hold of the run starts clean: the call was handed on once.
    expect(play([holdAnswer('a1', 'continue'), decided('r6', 'shipper', { dispatch: { status: 'hold' } })], gated.events).state).toMatchObject({
      status: 'held',
      hold: { pendingCall: null },
    });
  });

  it("a decision-less callee's return takes the call it left pending back to its caller (never dropped, not approved); a callee that decided keeps it to itself", () => {
    const called = play([decided('r1', 'issue', { function_call: { function: 'call_agent', agent_name: 'context' } })], started()).events;
    const back = play([resultCmd('r2', 'context', { body: 'my answer', pending_tool_call: pending })], called);
    const routed = ofType(back.last, 'run.routed')[0]!.data;
    expect(routed).toMatchObject({ target: { agent: 'issue' }, decision: { rule: 'no_action_default' }, pending_call: pending });
    expect(routed).not.toHaveProperty('approved_call');
    expectValidEvents(back.last);
    // A callee that advanced decided to go on: its call stays its own (kept on the result, not handed on).
    const decidedBack = play([decided('r2', 'context', advance, { pending_tool_call: pending })], called);
    expect(ofType(decidedBack.last, 'run.routed')[0]!.data).toMatchObject({ decision: { rule: 'callback' } });
    expect(ofType(decidedBack.last, 'run.routed')[0]!.data).not.toHaveProperty('pending_call');
  });

  it("a stop from outside freezes the call the run holds: a held run's pending call, or the one the working agent's handoff carries; a raise hands it back, and a stop that names its own call keeps that one", () => {
    const outside = (packetId: string, extra: Partial<StopRun['data']> = {}): StopRun => ({
      type: 'stop',
      data: { packet_id: packetId, why: 'budget', tried: ['hop 9'], cap: { name: 'hops', limit: 9, used: 9 }, ...extra },
      metadata: meta,
    });
    const toReview = play([decided('r3', 'context', advance), decided('r4', 'architect', advance)], atContext()).events;
    const gated = play([decided('r5', 'reviewer', advance, { pending_tool_call: pending })], toReview).events;

    // Held with the call: the packet freezes it (the hold's item closes, superseded by the stop).
    const heldStop = ofType(play([outside('wd-held', { why: 'guard_failed', cap: undefined })], gated).last, 'run.stopped')[0]!.data.packet;
    expect(heldStop).toMatchObject({ why: 'guard_failed', pending, pending_digest: pendingDigest(pending), next_form: { kind: 'approve_deny' } });

    // Handed on by the person's continue, then stopped while the next agent works: frozen again,
    // and the raise hands it back to that agent (not approved).
    const continued = play([holdAnswer('a1', 'continue')], gated).events;
    const working = play([outside('wd-working')], continued);
    const packet = ofType(working.last, 'run.stopped')[0]!.data.packet;
    expect(packet).toMatchObject({ why: 'budget', agent: 'shipper', pending, next_form: { kind: 'raise_cap' } });
    const raised = play(
      [
        {
          type: 'resume',
          data: {
            answer: {
              kind: 'stop_answer',
              answer: { packet_id: packet.packet_id, answer_id: 'a-raise', action: 'raise_cap', cap: 20, answered_by: 'olga', answered_at: NOW },
            },
            workflow,
            agents,
          },
          metadata: operatorMeta,
        },
      ],
      working.events,
    );
    expect(ofType(raised.last, 'run.routed')[0]!.data).toMatchObject({ target: { agent: 'shipper' }, raised_cap: 20, pending_call: pending });

    // A stop request naming its own call freezes that one; a run that carries none freezes none.
    const other = { name: 'wire', args: { usd: 9000 } };
    expect(ofType(play([outside('wd-own', { pending: other })], continued).last, 'run.stopped')[0]!.data.packet.pending).toEqual(other);
    expect(ofType(play([outside('wd-none')], started()).last, 'run.stopped')[0]!.data.packet.pending).toBeNull();
    // Once the agent's result moved the run on without a call, the next handoff carries none.
    const movedOn = play([holdAnswer('a1', 'continue'), decided('r6', 'shipper', { dispatch: { status: 'hold' } })], gated).events;
    expect(ofType(play([outside('wd-after')], movedOn).last, 'run.stopped')[0]!.data.packet.pending).toBeNull();
  });

  it('the handoff the running agent works on ended without a result (failed by its claimer, abandoned by a person): the run holds for a person, continue dispatches the same agent again; another handoff or a timeout of it changes nothing', () => {
    const ended = (handoffId: string, reason: 'ended' | 'timeout' = 'ended'): RunCommand => ({
      type: 'handoff_failed',
      data: { handoff_id: handoffId, code: 'handoff_failed', message: 'failed by issue: crashed', reason, workflow, agents },
      metadata: meta,
    });
    const { last, state } = play([ended(`ho-s-${RUN}`)], started());
    expect(last.map((e) => e.type)).toEqual(['run.held', 'run.notice_emitted']);
    expect(ofType(last, 'run.held')[0]!.data).toMatchObject({
      reason: `handoff ho-s-${RUN} of 'issue' ended without a result (handoff_failed): failed by issue: crashed`,
      pending_target: { agent: 'issue', step: 'triage' },
    });
    expect(state.status).toBe('held');
    const again = play([holdAnswer('a-1', 'continue')], play([ended(`ho-s-${RUN}`)], started()).events);
    expect(ofType(again.last, 'run.routed')[0]!.data).toMatchObject({ target: { agent: 'issue', step: 'triage' } });
    expect(ofType(again.last, 'run.routed')[0]!.data.handoff_id).not.toBe(`ho-s-${RUN}`);
    // Not the current handoff, or not an end without a result: nothing.
    expect(play([ended('ho-r-old')], started()).last).toEqual([]);
    expect(play([ended(`ho-s-${RUN}`, 'timeout')], started()).last).toEqual([]);
    // Applied once: the run is held now, a second delivery finds nothing to do.
    expect(play([ended(`ho-s-${RUN}`), ended(`ho-s-${RUN}`)], started()).last).toEqual([]);
  });

  it("the ledger refused to create the running agent's handoff (its agent left the roster after the run pinned its definition): the run holds for a person, never stays running with no handoff", () => {
    const refused = (handoffId: string): RunCommand => ({
      type: 'handoff_failed',
      data: { handoff_id: handoffId, code: 'addressee_not_in_roster', message: 'issue is not an agent of project acme (its definition)', workflow, agents },
      metadata: meta,
    });
    const { last, state } = play([refused(`ho-s-${RUN}`)], started());
    expect(last.map((e) => e.type)).toEqual(['run.held', 'run.notice_emitted']);
    expect(ofType(last, 'run.held')[0]!.data).toMatchObject({
      reason: `the ledger refused to create handoff ho-s-${RUN} to 'issue' (addressee_not_in_roster): issue is not an agent of project acme (its definition)`,
      pending_target: { agent: 'issue', step: 'triage' },
    });
    expect(state.status).toBe('held');
    // A person reroutes it to an agent that can take it.
    const rerouted = play([holdAnswer('a-1', 'reroute', 'reviewer')], play([refused(`ho-s-${RUN}`)], started()).events);
    expect(ofType(rerouted.last, 'run.routed')[0]!.data).toMatchObject({ target: { agent: 'reviewer' } });
    // Another handoff's refusal, or the same one delivered twice: nothing.
    expect(play([refused('ho-r-old')], started()).last).toEqual([]);
    expect(play([refused(`ho-s-${RUN}`), refused(`ho-s-${RUN}`)], started()).last).toEqual([]);
  });

  it('a budget stop reported by the agent keeps the cap it hit: only an operator lifts it, and only above that cap', () => {
    const cap = { name: 'tool_calls', limit: 20, used: 20 };
    const { last, events } = play([decided('r1', 'issue', advance, { stop: { why: 'budget', cap }, budget_used: { tool_calls: 20 } })], started());
    const packet = ofType(last, 'run.stopped')[0]!.data.packet;
    expect(packet).toMatchObject({ why: 'budget', cap, next_form: { kind: 'raise_cap' } });
    const raise = (answerId: string, value: number, metadata = operatorMeta): RunCommand => ({
      type: 'resume',
      data: {
        answer: {
          kind: 'stop_answer',
          answer: { packet_id: packet.packet_id, answer_id: answerId, action: 'raise_cap', cap: value, answered_by: 'olga', answered_at: NOW },
        },
        workflow,
        agents,
      },
      metadata,
    });
    given(runDecider, events)
      .when(raise('a-agent', 40, { ...operatorMeta, actorRole: 'agent' }))
      .thenFails('answer_forbidden');
    given(runDecider, events).when(raise('a-low', 20)).thenFails('cap_not_raised');
    const lifted = play([raise('a-ok', 40)], events);
    expect(ofType(lifted.last, 'run.routed')[0]!.data).toMatchObject({ target: { agent: 'issue' }, raised_cap: 40 });
    // No call was pending: none is handed back.
    expect(ofType(lifted.last, 'run.routed')[0]!.data).not.toHaveProperty('pending_call');
  });

  it('a budget stop with a frozen call: raising the cap hands the call back to the agent (never dropped), not as an approval', () => {
    const cap = { name: 'tokens', limit: 100, used: 100 };
    const call = { name: 'search', args: { q: 'refund policy' }, call_id: 'call-9' };
    const { last, events } = play([decided('r1', 'issue', advance, { stop: { why: 'budget', cap }, pending_tool_call: call })], started());
    const packet = ofType(last, 'run.stopped')[0]!.data.packet;
    expect(packet).toMatchObject({ why: 'budget', pending: call, next_form: { kind: 'raise_cap' } });
    // The form shows what the agent was about to call: the raise hands it on, not approved.
    expect(packet.next_form!.fields.find((f) => f.id === 'call')).toMatchObject({ kind: 'display', value: expect.stringContaining('refund policy') });
    const lifted = play(
      [
        {
          type: 'resume',
          data: {
            answer: {
              kind: 'stop_answer',
              answer: { packet_id: packet.packet_id, answer_id: 'a-raise', action: 'raise_cap', cap: 250, answered_by: 'olga', answered_at: NOW },
            },
            workflow,
            agents,
          },
          metadata: operatorMeta,
        },
      ],
      events,
    );
    const routed = ofType(lifted.last, 'run.routed')[0]!.data;
    expect(routed).toMatchObject({ target: { agent: 'issue' }, raised_cap: 250, pending_call: call });
    expect(routed).not.toHaveProperty('approved_call');
  });

  it("a target that names nothing is the router's unknown kind: an unknown_intent stop, resumed by a human-typed intent", () => {
    const { last, events } = play([decided('r1', 'issue', { task: 'poem' })], started());
    const packet = ofType(last, 'run.stopped')[0]!.data.packet;
    expect(packet).toMatchObject({ why: 'unknown_intent', next_form: { kind: 'type_intent' } });
    // The agent ran and named no tries of its own: the packet says it was tried (no shrug without a tried).
    expect(packet.tried).toEqual(['issue']);
    // The stop records the unresolved decision: what was asked, why it names nothing, and the engine's fallback.
    expect(ofType(last, 'run.stopped')[0]!.data.decision).toMatchObject({
      outcome: 'unresolved',
      requested: 'poem',
      dispatch: { status: 'hold', origin: 'engine_fallback', reason: expect.stringMatching(/^unresolved target: /) },
    });
    const resume: RunCommand = {
      type: 'resume',
      data: {
        answer: {
          kind: 'stop_answer',
          answer: { packet_id: packet.packet_id, answer_id: 'a1', action: 'intent', intent: 'reviewer', answered_by: 'olga', answered_at: NOW },
        },
        workflow,
        agents,
      },
      metadata: operatorMeta,
    };
    const resumed = play([resume], events);
    expect(ofType(resumed.last, 'run.routed')[0]!.data.decision).toMatchObject({
      rule: 'resume',
      target: { agent: 'reviewer' },
      dispatch: { origin: 'human' },
    });
  });

  it('an unknown_intent stop with a call pending shows the call on its form, and the intent reroute hands it on (never dropped, not approved); the stop links the trace its result came in', () => {
    const call = { name: 'refund', args: { order_id: 99, amount: 40 }, call_id: 'call-1' };
    const withTrace: RunCommand = { ...decided('r1', 'issue', { task: 'poem' }, { pending_tool_call: call }) };
    if (withTrace.type !== 'record_result') throw new Error('a result command');
    withTrace.data.trace_id = '4bf92f3577b34da6a3ce929d0e0e4736';
    const { last, events } = play([withTrace], started());
    const packet = ofType(last, 'run.stopped')[0]!.data.packet;
    expect(packet).toMatchObject({ why: 'unknown_intent', pending: call, trace_ids: ['4bf92f3577b34da6a3ce929d0e0e4736'] });
    expect(packet.next_form!.kind).toBe('type_intent');
    expect(packet.next_form!.fields.find((f) => f.id === 'call')).toMatchObject({ kind: 'display', value: expect.stringContaining('"order_id":99') });
    expect(packet.next_form!.prompt).toContain('refund');
    const resumed = play(
      [
        {
          type: 'resume',
          data: {
            answer: {
              kind: 'stop_answer',
              answer: { packet_id: packet.packet_id, answer_id: 'a-intent', action: 'intent', intent: 'reviewer', answered_by: 'olga', answered_at: NOW },
            },
            workflow,
            agents,
          },
          metadata: operatorMeta,
        },
      ],
      events,
    );
    const routed = ofType(resumed.last, 'run.routed')[0]!.data;
    expect(routed).toMatchObject({ target: { agent: 'reviewer' }, pending_call: call, decision: { dispatch: { origin: 'human' } } });
    expect(routed).not.toHaveProperty('approved_call');
    expectValidEvents(resumed.last);

    // Without a call pending: nothing shown, nothing handed on; without a trace: no link made up.
    const plain = play([decided('r1', 'issue', { task: 'poem' })], started());
    const bare = ofType(plain.last, 'run.stopped')[0]!.data.packet;
    expect(bare.trace_ids).toEqual([]);
    expect(bare.next_form!.fields.some((f) => f.id === 'call')).toBe(false);
  });

  it('answer ids are apart from result ids: an answer whose id is one of the run`s result ids is decided, and a refused answer does not swallow a later result of its id', () => {
    const { last, events } = play([decided('r1', 'issue', { task: 'poem' })], started());
    const packet = ofType(last, 'run.stopped')[0]!.data.packet;
    const answerAs = (answer_id: string, role: 'operator' | 'viewer'): RunCommand => ({
      type: 'resume',
      data: {
        answer: {
          kind: 'stop_answer',
          answer: { packet_id: packet.packet_id, answer_id, action: 'intent', intent: 'reviewer', answered_by: 'olga', answered_at: NOW },
        },
        workflow,
        agents,
      },
      metadata: { ...operatorMeta, actorRole: role },
    });
    // r1 is the result that stopped the run; an answer of that id was taken as already applied and dropped.
    const resumed = play([answerAs('r1', 'operator')], events);
    expect(ofType(resumed.last, 'run.resumed')[0]!.data).toMatchObject({ answer_id: 'r1' });
    // A viewer's answer r2 is refused by the decider, and the router records the refusal; the agent's next result r2 is still recorded.
    const verdict = runDecider.decide(answerAs('r2', 'viewer'), fold(runDecider, events));
    expect(verdict).toMatchObject({ ok: false, error: { code: 'answer_forbidden' } });
    const record: RunCommand = {
      type: 'reject_result',
      data: { result_id: 'r2', agent: 'operator', code: 'answer_forbidden', message: 'answer r2 by vic: viewers may not answer', refused: 'answer' },
      metadata: meta,
    };
    const refused = play([record], events);
    const answered = play([answerAs('a-ok', 'operator')], refused.events);
    const next = play([decided('r2', 'reviewer', { dispatch: { status: 'advance' } })], answered.events);
    expect(ofType(next.last, 'run.result_recorded')[0]!.data).toMatchObject({ result_id: 'r2', agent: 'reviewer' });
  });

  it("the watchdog's hop-budget stop landing after the run routed more hops says what the run used: cap.used and the raise's floor are the run's hops, the detail says so", () => {
    // Four hops routed; the watchdog's stop counted hop 3 of a cap of 2 (hop 4 was routed before it landed).
    const { events } = play([decided('r1', 'issue', advance), decided('r2', 'architect', advance), decided('r3', 'context', advance)], started());
    const stop: StopRun = {
      type: 'stop',
      data: {
        packet_id: 'wd-hops',
        why: 'budget',
        tried: ['hop 3'],
        detail: 'hop budget spent: hop 3 of 2 (architect → context)',
        cap: { name: 'hops', limit: 2, used: 3 },
      },
      metadata: meta,
    };
    const stopped = ofType(play([stop], events).last, 'run.stopped')[0]!.data.packet;
    expect(stopped.cap).toEqual({ name: 'hops', limit: 2, used: 4 });
    expect(stopped.detail).toBe('hop budget spent: hop 3 of 2 (architect → context); the run reached hop 4 before the stop landed');
    expect(stopped.next_form!.fields.find((f) => f.id === 'cap')).toMatchObject({ greater_than: 4, whole: true });
    // A stop that counted the run's last hop is recorded as sent.
    const exact = { ...stop, data: { ...stop.data, packet_id: 'wd-hops-2', cap: { name: 'hops', limit: 3, used: 4 } } };
    expect(ofType(play([exact], events).last, 'run.stopped')[0]!.data.packet.cap).toEqual({ name: 'hops', limit: 3, used: 4 });
  });

  it('a stop requested from outside (watchdog thrash) stops the run once; the same packet id again yields nothing', () => {
    const stop: StopRun = { type: 'stop', data: { packet_id: 'wd-1', why: 'thrash', tried: ['search', 'search'] }, metadata: meta };
    const { events, state } = play([stop], started());
    expect(state).toMatchObject({ status: 'stopped', openStop: { packet_id: 'wd-1', why: 'thrash', agent: 'issue', step: 'triage' } });
    given(runDecider, events).when(stop).then([]);
    given(runDecider, events)
      .when({ ...stop, data: { ...stop.data, packet_id: 'wd-2' } })
      .thenFails('run_already_stopped');
  });
});

describe('workflow run: every stop packet carries the run as its run_id (seed 003: "Same inbox. Same run_id.")', () => {
  it("an agent's own stop, the router's (unknown_intent) and one from outside all name the workflow run, not the agent's run id", () => {
    const packetOf = (events: RunEvent[]) => ofType(events, 'run.stopped')[0]!.data.packet;
    const own = play([decided('r1', 'issue', advance, { stop: { why: 'policy' } })], started());
    expect(packetOf(own.last)).toMatchObject({ run_id: RUN, workflow_run_id: RUN, why: 'policy' });
    const router = play([decided('r1', 'issue', { task: 'nobody' })], started());
    expect(packetOf(router.last)).toMatchObject({ run_id: RUN, why: 'unknown_intent' });
    const outside = play([{ type: 'stop', data: { packet_id: 'wd-1', why: 'circuit_open', tried: ['issue'] }, metadata: meta }], started());
    expect(packetOf(outside.last)).toMatchObject({ run_id: RUN, why: 'circuit_open' });
  });
});
