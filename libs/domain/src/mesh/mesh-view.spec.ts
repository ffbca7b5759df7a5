import { handoffToolName, MeshDefinitionSchema, type HandoffToolCall, type MeshEvent } from '@baton/contracts';
import { fold } from '../decider';
import type { MeshCommand } from './commands';
import { meshResumeHandoffId, meshStopId } from './decide';
import { claimedMeshDecider as meshDecider } from './test-helpers';
import { meshViewOf, summarizeMeshEvent, turnCount, type MeshViewEvent } from './view';

/*
 * The mesh run view (issue 14): turns, handoffs taken, calls ignored and why, the cap (and its
 * raises), and the outcome, folded from the mesh aggregate's events.
 */

const NOW = '2025-01-01T00:00:00.000Z';
const LATER = '2025-01-01T01:00:00.000Z';
const mesh = MeshDefinitionSchema.parse({
  name: 'support',
  entry: 'triage',
  handoffs: { triage: ['billing'], billing: ['triage'] },
  outputs: ['triage'],
  max_iterations: 3,
});
const start: MeshCommand = {
  type: 'start_mesh',
  data: { mesh_run_id: 'm1', project: 'demo', mesh, agents: ['triage', 'billing'], input: 'charged twice', started_by: 'sam' },
  metadata: { now: NOW, actor: 'sam' },
};
const call = (target: string): HandoffToolCall => ({ tool: handoffToolName(target) });
const turn = (result_id: string, agent: string, calls: HandoffToolCall[] = [], text = `${agent} speaks`, now = NOW): MeshCommand => ({
  type: 'record_turn',
  data: { result_id, run_id: `ar-${result_id}`, agent, text, handoff_tool_calls: calls },
  metadata: { now, actor: agent },
});

/** Decide `commands` in turn and give the events as the stream holds them (seq from 1). */
function stream(commands: MeshCommand[]): MeshViewEvent[] {
  const events: MeshEvent[] = [];
  const at: string[] = [];
  for (const command of commands) {
    const result = meshDecider.decide(command, fold(meshDecider, events));
    if (!result.ok) throw new Error(`${result.error.code}: ${result.error.message}`);
    events.push(...result.events);
    at.push(...result.events.map(() => command.metadata.now));
  }
  return events.map((e, i) => ({ seq: i + 1, occurredAt: at[i]!, type: e.type, payload: e.data }));
}

describe('the mesh run view', () => {
  it('turns, handoffs taken, calls ignored and why (unknown tool, not granted), the cap used, the outcome with its output', () => {
    const view = meshViewOf(
      stream([
        start,
        turn('t1', 'triage', [{ tool: 'handoff_to_nobody' }, call('triage'), call('billing')], 'over to billing'),
        turn('t2', 'billing', [call('triage')], 'refunded; back to triage'),
        turn('t3', 'triage', [], 'All sorted: the refund is on its way.'),
      ]),
    )!;
    expect(view).toMatchObject({
      mesh_run_id: 'm1',
      project: 'demo',
      status: 'completed',
      speaker: 'triage',
      input: 'charged twice',
      started_by: 'sam',
      notices: 0,
    });
    expect(view.mesh).toEqual({ name: 'support', entry: 'triage', outputs: ['triage'], handoffs: { triage: ['billing'], billing: ['triage'] } });
    expect(view.turns.map((t) => [t.turn, t.agent, t.text, t.calls])).toEqual([
      [1, 'triage', 'over to billing', ['handoff_to_nobody', 'handoff_to_triage', 'handoff_to_billing']],
      [2, 'billing', 'refunded; back to triage', ['handoff_to_triage']],
      [3, 'triage', 'All sorted: the refund is on its way.', []],
    ]);
    expect(view.handoffs.map((h) => [h.turn, h.from, h.to, h.tool, h.cause, h.after_cap_raise])).toEqual([
      [2, 'triage', 'billing', 'handoff_to_billing', 't1', false],
      [3, 'billing', 'triage', 'handoff_to_triage', 't2', false],
    ]);
    expect(view.ignored.map((i) => [i.turn, i.agent, i.tool, i.target, i.reason])).toEqual([
      [1, 'triage', 'handoff_to_nobody', null, 'unknown_tool'],
      [1, 'triage', 'handoff_to_triage', 'triage', 'not_granted'],
    ]);
    for (const ignored of view.ignored) expect(ignored.detail).toEqual(expect.any(String));
    expect(view.cap).toEqual({ max_iterations: 3, initial: 3, used: 3, raised: [] });
    expect(view.stop).toBeNull();
    expect(view.outcome).toEqual({
      status: 'completed',
      by: 'triage',
      turns: 3,
      output: { agent: 'triage', turn: 3, result_id: 't3', text: 'All sorted: the refund is on its way.' },
      at: NOW,
    });
    // started; t1: recorded, 2 ignored, handed off; t2: recorded, handed off; t3: recorded, completed.
    expect(view.last_seq).toBe(9);
  });

  it('the cap: a ping-pong stops at it (the refused handoff, the open packet); a raise continues the mesh and is listed; a turn from the wrong agent is rejected with its code', () => {
    const stopped = stream([start, turn('t1', 'triage', [call('billing')]), turn('t2', 'billing', [call('triage')]), turn('t3', 'triage', [call('billing')])]);
    const atStop = meshViewOf(stopped)!;
    expect(atStop.status).toBe('stopped');
    expect(atStop.stop).toMatchObject({
      packet_id: meshStopId('m1', 't3'),
      why: 'thrash',
      status: 'open',
      refused: { from: 'triage', to: 'billing', tool: 'handoff_to_billing' },
      answer: null,
    });
    expect(atStop.outcome).toEqual({ status: 'stopped', packet_id: meshStopId('m1', 't3'), why: 'thrash', at_cap: true, at: NOW });
    expect(atStop.cap).toMatchObject({ max_iterations: 3, used: 3, raised: [] });
    expect(atStop.notices).toBe(1);

    const raise: MeshCommand = {
      type: 'answer_stop',
      data: { answer: { packet_id: meshStopId('m1', 't3'), answer_id: 'a1', action: 'raise_cap', cap: 6, answered_by: 'olga', answered_at: LATER } },
      metadata: { now: LATER, actor: 'olga', actorRole: 'operator' },
    };
    const raised = meshViewOf(
      stream([
        start,
        turn('t1', 'triage', [call('billing')]),
        turn('t2', 'billing', [call('triage')]),
        turn('t3', 'triage', [call('billing')]),
        raise,
        turn('t4', 'triage', [], 'wrong speaker', LATER),
      ]),
    )!;
    expect(raised.status).toBe('running');
    expect(raised.speaker).toBe('billing');
    expect(raised.cap).toEqual({ max_iterations: 6, initial: 3, used: 3, raised: [{ from: 3, to: 6, by: 'olga', answer_id: 'a1', at: LATER }] });
    expect(raised.stop).toMatchObject({ status: 'answered', answer: { action: 'raise_cap', by: 'olga', effect: 'raise_cap' } });
    expect(raised.handoffs.at(-1)).toMatchObject({
      turn: 4,
      from: 'triage',
      to: 'billing',
      handoff_id: meshResumeHandoffId('m1', 'a1'),
      cause: 'a1',
      after_cap_raise: true,
    });
    expect(raised.outcome).toEqual({ status: 'running' });
    expect(raised.rejected).toEqual([expect.objectContaining({ result_id: 't4', agent: 'triage', code: 'unexpected_agent' })]);
  });

  it('a denied stop ends the mesh: outcome terminated with the reason; every event has a one-line summary', () => {
    const deny: MeshCommand = {
      type: 'answer_stop',
      data: { answer: { packet_id: meshStopId('m1', 't3'), answer_id: 'a2', action: 'deny', answered_by: 'olga', answered_at: LATER, note: 'looping' } },
      metadata: { now: LATER, actor: 'olga', actorRole: 'operator' },
    };
    const events = stream([
      start,
      turn('t1', 'triage', [call('billing')]),
      turn('t2', 'billing', [call('triage')]),
      turn('t3', 'triage', [call('billing')]),
      deny,
    ]);
    const view = meshViewOf(events)!;
    expect(view.status).toBe('terminated');
    expect(view.outcome).toMatchObject({ status: 'terminated', answer_id: 'a2', at: LATER });
    expect(view.stop).toMatchObject({ status: 'answered', answer: { action: 'deny', effect: 'stop' } });
    for (const e of events) expect(summarizeMeshEvent({ type: e.type, data: e.payload } as MeshEvent)).toMatch(/\S/);
    expect(meshViewOf([])).toBeNull();
  });

  it('a turn count reads as English: 1 turn, 2 turns (timeline line, CLI and page)', () => {
    expect([0, 1, 2].map(turnCount)).toEqual(['0 turns', '1 turn', '2 turns']);
    const completed = {
      type: 'mesh.completed',
      data: { result_id: 'r1', agent: 'triage', turns: 1, output: null, completed_at: '2025-01-01T00:00:00.000Z' },
    } as MeshEvent;
    expect(summarizeMeshEvent(completed)).toBe('completed after 1 turn by triage; no output agent spoke');
  });
});
