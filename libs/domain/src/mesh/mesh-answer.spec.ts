import { handoffToolName, MeshDefinitionSchema, StopPacketSchema, type HandoffToolCall, type MeshEvent, type OperatorAnswer } from '@baton/contracts';
import { fold } from '../decider';
import { given } from '../testing/given';
import type { MeshCommand } from './commands';
import { meshNoticeId, meshResumeHandoffId, meshStopId } from './decide';
import { meshViewOf, summarizeMeshEvent } from './view';
import { decideResume } from '../stop';
import { noticeIdFor, stopIdFor } from '../run/ids';
// Turns are sent under the current turn's claim unless a test says otherwise (withCurrentMeshClaim).
import { claimedMeshDecider as meshDecider } from './test-helpers';
import type { MeshRunState } from './state';

const NOW = '2025-01-01T00:00:00.000Z';
const LATER = '2025-01-01T01:00:00.000Z';
const AGENTS = ['triage', 'billing'];
const mesh = MeshDefinitionSchema.parse({
  name: 'support',
  entry: 'triage',
  handoffs: { triage: ['billing'], billing: ['triage'] },
  outputs: ['triage'],
  max_iterations: 2,
});

const start = (people: { started_by?: string; lead?: string } = { started_by: 'sam' }): MeshCommand => ({
  type: 'start_mesh',
  data: { mesh_run_id: 'm1', project: 'demo', mesh, agents: AGENTS, input: 'charged twice', ...people },
  metadata: { now: NOW, actor: 'sam' },
});
const call = (target: string): HandoffToolCall => ({ tool: handoffToolName(target) });
const turn = (result_id: string, agent: string, calls: HandoffToolCall[] = [], text = `${agent} speaks`): MeshCommand => ({
  type: 'record_turn',
  data: { result_id, run_id: `ar-${result_id}`, agent, text, handoff_tool_calls: calls },
  metadata: { now: NOW, actor: agent },
});
const answer = (fields: Partial<OperatorAnswer> & Pick<OperatorAnswer, 'action'>, role: 'operator' | 'viewer' = 'operator'): MeshCommand => ({
  type: 'answer_stop',
  data: { answer: { packet_id: meshStopId('m1', 'p2'), answer_id: 'a1', answered_by: 'olga', answered_at: LATER, ...fields } },
  metadata: { now: LATER, actor: fields.answered_by ?? 'olga', actorRole: role },
});

function play(commands: MeshCommand[], history: MeshEvent[] = []): MeshEvent[] {
  const events = [...history];
  for (const command of commands) {
    const result = meshDecider.decide(command, fold(meshDecider, events));
    if (!result.ok) throw new Error(`${result.error.code}: ${result.error.message}`);
    events.push(...result.events);
  }
  return events;
}

/** triage → billing → (billing asks for triage again at the cap of 2) → stopped. */
const stoppedHistory = (people?: { started_by?: string; lead?: string }) =>
  play([start(people), turn('p1', 'triage', [call('billing')]), turn('p2', 'billing', [call('triage')])]);

describe('a mesh stop notifies exactly one person (seed 000 §5: engine-owned notification)', () => {
  it('the turn that hits the cap emits exactly one human action notice, to started_by, naming the stop packet', () => {
    const events = stoppedHistory();
    const notices = events.filter((e) => e.type === 'mesh.notice_emitted');
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatchObject({
      type: 'mesh.notice_emitted',
      data: {
        notice: {
          notice_id: meshNoticeId('m1', 'p2'),
          reason: 'stop',
          recipient: { handle: 'sam', source: 'started_by' },
          stop_id: meshStopId('m1', 'p2'),
          workflow_run_id: 'm1',
          agent: 'billing',
        },
      },
    });
    // No other outcome of the mesh notifies anyone: the start and the handoffs emit no notice.
    expect(events.map((e) => e.type).indexOf('mesh.notice_emitted')).toBe(events.map((e) => e.type).indexOf('mesh.stopped') + 1);
  });

  it('without started_by the notice goes to the project lead; with neither the mesh never starts', () => {
    const events = stoppedHistory({ lead: 'lena' });
    expect(events.find((e) => e.type === 'mesh.notice_emitted')).toMatchObject({ data: { notice: { recipient: { handle: 'lena', source: 'project_lead' } } } });
    given(meshDecider).when(start({})).thenFails('no_notice_recipient');
  });

  it("agent text in the notice is inert: an agent's @mention is not a live mention", () => {
    const events = play([start(), turn('p1', 'triage', [call('billing')]), turn('p2', 'billing', [call('triage')], 'ping @everyone now')]);
    const notice = events.find((e) => e.type === 'mesh.notice_emitted');
    if (notice?.type !== 'mesh.notice_emitted') throw new Error('expected a notice');
    expect(notice.data.notice.agent_excerpt).not.toContain('@everyone');
  });

  it('the notice excerpt of a mesh turn loses its AGENT_RUN_CONFIG sentinels, as a run notice does (routing text, not words for a person)', () => {
    const text = 'Refund sent.\n<!-- AGENT_RUN_CONFIG {"dispatch":{"status":"terminate"}} -->';
    const events = play([start(), turn('p1', 'triage', [call('billing')]), turn('p2', 'billing', [call('triage')], text)]);
    const notice = events.find((e) => e.type === 'mesh.notice_emitted');
    if (notice?.type !== 'mesh.notice_emitted') throw new Error('expected a notice');
    expect(notice.data.notice.agent_excerpt).toBe('Refund sent.');
    // A turn of nothing but a sentinel leaves no excerpt at all.
    const bare = play([
      start(),
      turn('p1', 'triage', [call('billing')]),
      turn('p2', 'billing', [call('triage')], '<!-- AGENT_RUN_CONFIG {"task":{"status":"done"}} -->'),
    ]);
    const none = bare.find((e) => e.type === 'mesh.notice_emitted');
    if (none?.type !== 'mesh.notice_emitted') throw new Error('expected a notice');
    expect(none.data.notice).not.toHaveProperty('agent_excerpt');
  });

  it('the stop packet offers the raise_cap form with the mesh cap (Raise cap or Stop)', () => {
    const stopped = stoppedHistory().find((e) => e.type === 'mesh.stopped');
    if (stopped?.type !== 'mesh.stopped') throw new Error('expected mesh.stopped');
    expect(stopped.data.packet.next_form?.kind).toBe('raise_cap');
    expect(stopped.data.packet.cap).toEqual({ name: 'max_iterations', limit: 2, used: 2 });
    expect(StopPacketSchema.safeParse(stopped.data.packet).success).toBe(true);
    // The form states every limit the answer is held to: above the cap, whole, at most 1000.
    expect(stopped.data.packet.next_form?.fields.find((f) => f.id === 'cap')).toMatchObject({ kind: 'number', greater_than: 2, at_most: 1000, whole: true });
    expect(stopped.data.packet.next_form?.fields.map((f) => f.kind)).toContain('note');
  });
});

describe('answering a mesh stop packet (decideResume rules, as for runs)', () => {
  const history = stoppedHistory();

  it("the handoff the cap refused keeps its call's handover: a raise hands it to the target with it", () => {
    const refusedCall: HandoffToolCall = { tool: handoffToolName('triage'), arguments: { reason: 'billing done', message: 'refund sent' } };
    const stopped = play([start(), turn('p1', 'triage', [call('billing')]), turn('p2', 'billing', [refusedCall])]);
    expect(stopped.find((e) => e.type === 'mesh.stopped')).toMatchObject({
      data: { refused: { to: 'triage', handover: { reason: 'billing done', message: 'refund sent' } } },
    });
    const [, handedOff] = given(meshDecider, stopped)
      .when(answer({ action: 'raise_cap', cap: 5 }))
      .thenMatch([{ type: 'mesh.stop_answered' }, { type: 'mesh.handed_off' }]);
    expect(handedOff).toMatchObject({ data: { to: 'triage', handover: { reason: 'billing done', message: 'refund sent' } } });
  });

  it('raise_cap continues the mesh with the higher cap: the agent the refused handoff named speaks next', () => {
    const events = given(meshDecider, history)
      .when(answer({ action: 'raise_cap', cap: 5 }))
      .thenMatch([
        {
          type: 'mesh.stop_answered',
          data: expect.objectContaining({ answer_id: 'a1', packet_id: meshStopId('m1', 'p2'), effect: { kind: 'raise_cap', cap: 5 }, max_iterations: 5 }),
        },
        { type: 'mesh.handed_off', data: expect.objectContaining({ from: 'billing', to: 'triage', turn: 3, handoff_id: meshResumeHandoffId('m1', 'a1') }) },
      ]);
    const state = fold(meshDecider, [...history, ...events]) as MeshRunState;
    expect(state).toMatchObject({ status: 'running', speaker: 'triage', handoff_id: meshResumeHandoffId('m1', 'a1') });
    expect(state.mesh.max_iterations).toBe(5);
    expect(state.stop?.status).toBe('answered');
    // The mesh carries on: triage's turn is recorded and a turn without a handoff completes it.
    given(meshDecider, [...history, ...events])
      .when(turn('p3', 'triage', [], 'Refund sent.'))
      .thenMatch([{ type: 'mesh.turn_recorded' }, { type: 'mesh.completed', data: expect.objectContaining({ turns: 3 }) }]);
  });

  it('turn ids and answer ids are idempotency keys of their own kinds: an answer whose id is a turn`s result id is decided, and a turn whose id is a refused answer`s is recorded', () => {
    // p1 is the result id of triage's first turn; an answer of that id was dropped as already applied.
    given(meshDecider, history)
      .when(answer({ action: 'raise_cap', cap: 5, answer_id: 'p1' }))
      .thenMatch([
        { type: 'mesh.stop_answered', data: expect.objectContaining({ answer_id: 'p1', effect: { kind: 'raise_cap', cap: 5 } }) },
        { type: 'mesh.handed_off', data: expect.objectContaining({ to: 'triage' }) },
      ]);
    // A viewer's answer q9 is refused (recorded as a refused answer, `of: answer`); then the cap is raised.
    const refused = given(meshDecider, history)
      .when(answer({ action: 'raise_cap', cap: 5, answer_id: 'q9' }, 'viewer'))
      .thenMatch([{ type: 'mesh.turn_rejected', data: expect.objectContaining({ result_id: 'q9', agent: 'operator', of: 'answer' }) }]);
    const raised = play([answer({ action: 'raise_cap', cap: 5, answer_id: 'a2' })], [...history, ...refused]);
    // triage's next turn happens to use q9 as its result id: it is a turn, recorded, not swallowed.
    given(meshDecider, raised)
      .when(turn('q9', 'triage', [], 'Refund sent.'))
      .thenMatch([{ type: 'mesh.turn_recorded', data: expect.objectContaining({ result_id: 'q9' }) }, { type: 'mesh.completed' }]);
  });

  it('a refusal stored before refusals named their kind is still told apart: agent operator and a message naming the answer', () => {
    const legacy: MeshEvent = {
      type: 'mesh.turn_rejected',
      data: { result_id: 'q8', agent: 'operator', code: 'answer_forbidden', message: 'answer q8 by vic: viewers may not answer', rejected_at: LATER },
    };
    const state = fold(meshDecider, [...history, legacy]) as MeshRunState;
    expect(state.answered).toContain('q8');
    expect(state.applied).not.toContain('q8');
  });

  it('deny ends the mesh (mesh.terminated); a late turn is rejected', () => {
    const events = given(meshDecider, history)
      .when(answer({ action: 'deny', note: 'stop looping' }))
      .thenMatch([
        { type: 'mesh.stop_answered', data: expect.objectContaining({ effect: expect.objectContaining({ kind: 'stop' }) }) },
        { type: 'mesh.terminated', data: expect.objectContaining({ origin: 'operator', answer_id: 'a1' }) },
      ]);
    const after = [...history, ...events];
    expect((fold(meshDecider, after) as MeshRunState).status).toBe('terminated');
    given(meshDecider, after)
      .when(turn('p3', 'triage'))
      .thenMatch([{ type: 'mesh.turn_rejected', data: expect.objectContaining({ code: 'mesh_not_running' }) }]);
  });

  it('acknowledge on a packet with the acknowledge form (meshes stopped before raise_cap) ends the mesh', () => {
    const legacy = history.map(
      (e): MeshEvent => (e.type === 'mesh.stopped' ? { ...e, data: { ...e.data, packet: { ...e.data.packet, next_form: null } } } : e),
    );
    given(meshDecider, legacy)
      .when(answer({ action: 'acknowledge' }))
      .thenMatch([{ type: 'mesh.stop_answered' }, { type: 'mesh.terminated' }]);
  });

  it('idempotent per answer id: the same answer again decides nothing', () => {
    const after = play([answer({ action: 'raise_cap', cap: 5 })], history);
    given(meshDecider, after)
      .when(answer({ action: 'raise_cap', cap: 5 }))
      .then([]);
  });

  it('an already answered packet refuses a second answer (stop_already_answered), recorded as mesh.turn_rejected', () => {
    const after = play([answer({ action: 'deny' })], history);
    given(meshDecider, after)
      .when(answer({ action: 'raise_cap', cap: 9, answer_id: 'a2' }))
      .thenMatch([{ type: 'mesh.turn_rejected', data: expect.objectContaining({ result_id: 'a2', agent: 'operator', code: 'stop_already_answered' }) }]);
  });

  it('only an operator raises a cap: a viewer is refused (answer_forbidden)', () => {
    given(meshDecider, history)
      .when(answer({ action: 'raise_cap', cap: 5 }, 'viewer'))
      .thenMatch([{ type: 'mesh.turn_rejected', data: expect.objectContaining({ code: 'answer_forbidden' }) }]);
  });

  it('a cap that does not exceed the current one is refused (cap_not_raised); an answer for another packet is refused', () => {
    given(meshDecider, history)
      .when(answer({ action: 'raise_cap', cap: 2 }))
      .thenMatch([{ type: 'mesh.turn_rejected', data: expect.objectContaining({ code: 'cap_not_raised' }) }]);
    given(meshDecider, history)
      .when(answer({ action: 'deny', packet_id: 'stop-other' }))
      .thenMatch([{ type: 'mesh.turn_rejected', data: expect.objectContaining({ code: 'answer_packet_mismatch' }) }]);
  });

  it('the limits the form states are the ones decideResume holds the answer to (so the operator API refuses them before publishing): a cap not whole or over 1000 is answer_incomplete', () => {
    const stopped = history.find((e) => e.type === 'mesh.stopped');
    if (stopped?.type !== 'mesh.stopped') throw new Error('expected mesh.stopped');
    const answerWith = (cap: number): OperatorAnswer => ({
      packet_id: meshStopId('m1', 'p2'),
      answer_id: `a-${cap}`,
      action: 'raise_cap',
      cap,
      answered_by: 'olga',
      answered_at: LATER,
    });
    // The message names the rule the value breaks (1001 is whole, only over the most).
    for (const [cap, message] of [
      [3.5, 'the new cap 3.5 is not a whole number'],
      [1001, 'the new cap 1001 is over the most, 1000'],
      [1000.5, 'the new cap 1000.5 is not a whole number and is over the most, 1000'],
    ] as const) {
      expect({ cap, verdict: decideResume(stopped.data.packet, answerWith(cap), { now: LATER, actorRole: 'operator' }) }).toMatchObject({
        cap,
        verdict: { ok: false, error: { code: 'answer_incomplete', message } },
      });
    }
    expect(decideResume(stopped.data.packet, answerWith(1000), { now: LATER, actorRole: 'operator' })).toMatchObject({ ok: true });
  });

  it('an answer to a mesh that is not stopped is refused (mesh_not_stopped); an unknown mesh is not_found', () => {
    const running = play([start()]);
    given(meshDecider, running)
      .when(answer({ action: 'deny' }))
      .thenMatch([{ type: 'mesh.turn_rejected', data: expect.objectContaining({ code: 'mesh_not_stopped' }) }]);
    given(meshDecider)
      .when(answer({ action: 'deny' }))
      .thenFails('mesh_not_found');
  });
});

describe('mesh stop and notice ids never meet a run’s in the same project', () => {
  it("a mesh turn's result id equal to a customer message's id, in a mesh run and a workflow run of one id, gives different stop and notice ids (stop-mt- / nt-mt- against stop-m- / nt-m-)", () => {
    const cause = { kind: 'message' as const, id: 'same-1' };
    expect(meshStopId('m1', 'same-1')).toBe('stop-mt-m1:same-1');
    expect(meshNoticeId('m1', 'same-1')).toBe('nt-mt-m1:same-1');
    expect(stopIdFor('m1', cause)).toBe('stop-m-m1:same-1');
    expect(noticeIdFor('m1', cause)).toBe('nt-m-m1:same-1');
  });
});

describe("an agent's own stop in a mesh (seed 003: a stop with a packet, whatever agent asks for it)", () => {
  const refund = { name: 'refund', args: { order_id: 99, amount: 40 }, call_id: 'call-1' };
  const stopTurn = (
    result_id: string,
    agent: string,
    stop: NonNullable<Extract<MeshCommand, { type: 'record_turn' }>['data']['stop']>,
    extra: Partial<Extract<MeshCommand, { type: 'record_turn' }>['data']> = {},
  ): MeshCommand => ({
    type: 'record_turn',
    data: { result_id, run_id: `ar-${result_id}`, agent, text: `${agent} needs a person`, handoff_tool_calls: [call('triage')], stop, ...extra },
    metadata: { now: NOW, actor: agent },
  });
  const answerTo = (result_id: string, fields: Partial<OperatorAnswer> & Pick<OperatorAnswer, 'action'>, answer_id = 'a-stop'): MeshCommand => ({
    type: 'answer_stop',
    data: { answer: { packet_id: meshStopId('m1', result_id), answer_id, answered_by: 'olga', answered_at: LATER, ...fields } },
    metadata: { now: LATER, actor: 'olga', actorRole: 'operator' },
  });
  /** triage → billing, and billing stops (policy, a refund pending) while also calling handoff_to_triage. */
  const policyStop = () =>
    play([
      start(),
      turn('p1', 'triage', [call('billing')]),
      stopTurn('p2', 'billing', { why: 'policy', detail: 'refund over 30' }, { pending_tool_call: refund, trace_id: 'tr-p2' }),
    ]);

  it('the turn is recorded, its calls are not followed, and the mesh stops with the agent’s packet and one notice', () => {
    const events = policyStop();
    const tail = events.slice(-3);
    expect(tail.map((e) => e.type)).toEqual(['mesh.turn_recorded', 'mesh.stopped', 'mesh.notice_emitted']);
    expect(events.some((e) => e.type === 'mesh.handed_off' && e.data.from === 'billing')).toBe(false);
    const stopped = tail[1]!;
    if (stopped.type !== 'mesh.stopped') throw new Error('expected mesh.stopped');
    expect(stopped.data).not.toHaveProperty('refused');
    // The form is worded for a mesh: approve hands the call back to the agent, deny ends the mesh.
    expect(stopped.data.packet.next_form!.prompt).toBe(
      'The mesh stopped before billing called refund. Approve hands the turn back to billing with exactly this call to make, once; deny ends the mesh.',
    );
    const view = meshViewOf(events.map((event, i) => ({ seq: i + 1, occurredAt: NOW, type: event.type, payload: event.data })))!;
    expect(view.turns.at(-1)).toMatchObject({ agent: 'billing', calls: ['handoff_to_triage'], stopped: { why: 'policy' } });
    // Its outcome says the agent's stop, not the cap (the cap was never reached).
    expect(view.outcome).toMatchObject({ status: 'stopped', why: 'policy', at_cap: false });
    expect(stopped.data.packet).toMatchObject({
      why: 'policy',
      agent: 'billing',
      detail: 'refund over 30',
      tried: ['billing'],
      trace_ids: ['tr-p2'],
      pending: refund,
      next_form: { kind: 'approve_deny' },
      workflow_run_id: 'm1',
    });
    expect(StopPacketSchema.safeParse(stopped.data.packet).success).toBe(true);
    const state = fold(meshDecider, events) as MeshRunState;
    expect(state).toMatchObject({ status: 'stopped', stopped_by: { result_id: 'p2', agent: 'billing' }, refused: null });
    // Stopped: a further turn is recorded as rejected.
    given(meshDecider, events)
      .when(turn('p3', 'billing', []))
      .thenMatch([{ type: 'mesh.turn_rejected', data: expect.objectContaining({ code: 'mesh_not_running' }) }]);
  });

  it('approve hands the turn back to the agent with exactly the frozen call; its next turn goes on as usual', () => {
    const events = policyStop();
    const packet = (events.find((e) => e.type === 'mesh.stopped') as Extract<MeshEvent, { type: 'mesh.stopped' }>).data.packet;
    const answered = play([answerTo('p2', { action: 'approve', pending_digest: packet.pending_digest! })], events);
    const handed = answered.at(-1)!;
    expect(handed).toMatchObject({
      type: 'mesh.handed_off',
      data: {
        from: 'billing',
        to: 'billing',
        tool: 'operator_answer',
        handoff_id: meshResumeHandoffId('m1', 'a-stop'),
        turn: 3,
        resume: { answer_id: 'a-stop', action: 'approve', approved_call: refund },
      },
    });
    const state = fold(meshDecider, answered) as MeshRunState;
    expect(state).toMatchObject({ status: 'running', speaker: 'billing', stopped_by: null, mesh: { max_iterations: 2 } });
    expect(state.path.at(-1)).toBe('billing→billing (answer: approve)');
    // The view and timeline say what happened: the agent's stop (no refused handoff), the answer's handoff back.
    const view = meshViewOf(answered.map((event, i) => ({ seq: i + 1, occurredAt: NOW, type: event.type, payload: event.data })))!;
    expect(view.stop).toMatchObject({ why: 'policy', refused: null, status: 'answered', answer: { action: 'approve', effect: 'run_pending_call' } });
    expect(view.handoffs.at(-1)).toMatchObject({ from: 'billing', to: 'billing', cause: 'a-stop', after_cap_raise: false, resume: { approved_call: refund } });
    expect(view.cap.raised).toEqual([]);
    expect(summarizeMeshEvent(events.find((e) => e.type === 'mesh.stopped')!)).toMatch(/^stopped \(policy\) by billing's turn 2: refund over 30; packet /);
    expect(summarizeMeshEvent(handed)).toMatch(/^handed back to billing on answer a-stop \(approve\): refund approved; turn 3 on handoff /);
    given(meshDecider, answered)
      .when(turn('p3', 'billing', []))
      .thenMatch([{ type: 'mesh.turn_recorded' }, { type: 'mesh.completed' }]);
  });

  it('an unknown intent offers the mesh’s agents; the named one takes the turn with the frozen call handed on (not approved); one the form does not offer is refused', () => {
    const events = play([
      start(),
      turn('p1', 'triage', [call('billing')]),
      stopTurn('p2', 'billing', { why: 'unknown_intent' }, { pending_tool_call: refund, tried: [{ name: 'lookup_order' }] }),
    ]);
    const packet = (events.find((e) => e.type === 'mesh.stopped') as Extract<MeshEvent, { type: 'mesh.stopped' }>).data.packet;
    expect(packet.tried).toEqual(['lookup_order']);
    expect(packet.next_form?.fields.find((f) => f.id === 'intent')).toMatchObject({
      kind: 'select',
      label: 'Mesh agent to take the turn',
      options: ['triage', 'billing'],
    });
    expect(packet.next_form?.prompt).toMatch(/Pick the mesh agent that takes the turn .*refund.*Close ends the mesh\.$/);
    given(meshDecider, events)
      .when(answerTo('p2', { action: 'intent', intent: 'legal' }, 'a-bad'))
      .thenMatch([{ type: 'mesh.turn_rejected', data: expect.objectContaining({ code: 'intent_not_offered', of: 'answer' }) }]);
    const routed = play([answerTo('p2', { action: 'intent', intent: 'triage' })], events).at(-1)!;
    expect(routed).toMatchObject({ type: 'mesh.handed_off', data: { from: 'billing', to: 'triage', resume: { action: 'intent', pending_call: refund } } });
    expect((routed as Extract<MeshEvent, { type: 'mesh.handed_off' }>).data.resume).not.toHaveProperty('approved_call');
  });

  it("raise_cap on the agent's own budget hands it its new cap and leaves the mesh's cap alone; deny ends the mesh", () => {
    const budget = play([
      start(),
      turn('p1', 'triage', [call('billing')]),
      stopTurn('p2', 'billing', { why: 'budget', cap: { name: 'tool_calls', limit: 5, used: 5 } }),
    ]);
    const raised = play([answerTo('p2', { action: 'raise_cap', cap: 12 })], budget);
    expect(raised.at(-2)).toMatchObject({ type: 'mesh.stop_answered', data: { max_iterations: 2, effect: { kind: 'raise_cap', cap: 12 } } });
    expect(raised.at(-1)).toMatchObject({ type: 'mesh.handed_off', data: { to: 'billing', resume: { action: 'raise_cap', raised_cap: 12 } } });
    expect((fold(meshDecider, raised) as MeshRunState).mesh.max_iterations).toBe(2);
    given(meshDecider, budget)
      .when(answerTo('p2', { action: 'raise_cap', cap: 5 }, 'a-low'))
      .thenMatch([{ type: 'mesh.turn_rejected', data: expect.objectContaining({ code: 'cap_not_raised' }) }]);
    const denied = play([answerTo('p2', { action: 'deny' }, 'a-deny')], budget);
    expect(denied.at(-1)).toMatchObject({ type: 'mesh.terminated', data: { origin: 'operator', answer_id: 'a-deny' } });
  });
});

describe('a stop asked from outside a mesh (the watchdog: a turn escalated with nobody to take it)', () => {
  const stopFromOutside = (packet_id = 'wd-esc:m1'): MeshCommand => ({
    type: 'stop_mesh',
    data: { packet_id, why: 'guard_failed', tried: ['retry cap 3 reached'], detail: 'nobody to escalate to (guard_failed)' },
    metadata: { now: LATER, actor: 'baton-watchdog' },
  });

  it('stops the running mesh on the agent whose turn it is, with one notice; applied once; acknowledged, the mesh ends', () => {
    const running = play([start(), turn('p1', 'triage', [call('billing')])]);
    const stopped = play([stopFromOutside()], running);
    const added = stopped.slice(running.length);
    expect(added.map((e) => e.type)).toEqual(['mesh.stopped', 'mesh.notice_emitted']);
    const event = added[0] as Extract<MeshEvent, { type: 'mesh.stopped' }>;
    expect(event.data).not.toHaveProperty('refused');
    expect(event.data).toMatchObject({ result_id: 'wd-esc:m1', turns: 1 });
    expect(event.data.packet).toMatchObject({ why: 'guard_failed', agent: 'billing', tried: ['retry cap 3 reached'], next_form: { kind: 'acknowledge' } });
    expect(event.data.packet.next_form!.prompt).toContain('the mesh ends there');
    expect(StopPacketSchema.safeParse(event.data.packet).success).toBe(true);
    expect(added[1]).toMatchObject({ data: { notice: { reason: 'stop', stop_id: 'wd-esc:m1', recipient: { handle: 'sam' } } } });
    // The same request again, or one for a mesh no longer running, changes nothing.
    given(meshDecider, stopped).when(stopFromOutside()).thenMatch([]);
    given(meshDecider, play([turn('p2', 'billing', [])], running))
      .when(stopFromOutside('wd-esc:late'))
      .thenMatch([]);
    const acknowledged = play(
      [
        {
          type: 'answer_stop',
          data: { answer: { packet_id: 'wd-esc:m1', answer_id: 'a-ack', answered_by: 'olga', answered_at: LATER, action: 'acknowledge' } },
          metadata: { now: LATER, actor: 'olga', actorRole: 'operator' },
        },
      ],
      stopped,
    );
    expect(acknowledged.at(-1)).toMatchObject({ type: 'mesh.terminated', data: { answer_id: 'a-ack' } });
  });

  it('before the entry agent spoke (its first handoff escalated): turns 0, the entry agent named', () => {
    const stopped = play([start(), stopFromOutside()]);
    expect(stopped.find((e) => e.type === 'mesh.stopped')).toMatchObject({ data: { turns: 0, packet: { agent: 'triage' } } });
  });
});

describe('every packet of a mesh carries the mesh run as its run_id (seed 003: "Same inbox. Same run_id.")', () => {
  const stoppedBy = (events: MeshEvent[]) =>
    (events.filter((e) => e.type === 'mesh.stopped').at(-1) as Extract<MeshEvent, { type: 'mesh.stopped' }>).data.packet;

  it("the cap stop, an agent's own stop and a stop from outside: run_id is the mesh run, never the turn's agent run id", () => {
    // The cap (thrash): the turn that hit it was `ar-p2`.
    expect(stoppedBy(stoppedHistory())).toMatchObject({ run_id: 'm1', workflow_run_id: 'm1' });
    // An agent's own stop (its turn's run id `stop-2`, as an agent may name it).
    const own = play([
      start(),
      {
        type: 'record_turn',
        data: { result_id: 't4-6dd5d7', run_id: 'stop-2', agent: 'triage', text: 'needs a person', handoff_tool_calls: [], stop: { why: 'policy' } },
        metadata: { now: NOW, actor: 'triage' },
      },
    ]);
    expect(stoppedBy(own)).toMatchObject({ run_id: 'm1', workflow_run_id: 'm1', why: 'policy' });
    // The watchdog's stop from outside.
    const outside = play([
      start(),
      turn('p1', 'triage', [call('billing')]),
      { type: 'stop_mesh', data: { packet_id: 'wd-1', why: 'guard_failed', tried: [] }, metadata: { now: LATER, actor: 'baton-watchdog' } },
    ]);
    expect(stoppedBy(outside)).toMatchObject({ run_id: 'm1', workflow_run_id: 'm1' });
  });
});
