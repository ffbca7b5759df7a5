import { handoffToolName, MeshDefinitionSchema, type MeshEvent } from '@baton/contracts';
import { fold, meshDecider, type MeshCommand } from '@baton/domain';
import type { SequencedEvent } from '../store';
import { inboxProjection } from './inbox';
import { stopsProjection } from './stops';

const NOW = '2025-01-01T00:00:00.000Z';

/** A real `mesh.stopped` (decided by the mesh decider at its cap), as a stored event. */
function meshStoppedEvent(): SequencedEvent {
  const mesh = MeshDefinitionSchema.parse({ name: 'support', entry: 'triage', handoffs: { triage: ['billing'], billing: ['triage'] }, max_iterations: 2 });
  const commands: MeshCommand[] = [
    { type: 'start_mesh', data: { mesh_run_id: 'm1', project: 'demo', mesh, agents: ['triage', 'billing'] }, metadata: { now: NOW, actor: 'sam' } },
    { type: 'record_turn', data: { result_id: 'r1', run_id: 'ar1', agent: 'triage', text: 'x', handoff_tool_calls: [{ tool: handoffToolName('billing') }] }, metadata: { now: NOW, actor: 'triage' } },
    { type: 'record_turn', data: { result_id: 'r2', run_id: 'ar2', agent: 'billing', text: 'y', handoff_tool_calls: [{ tool: handoffToolName('triage') }] }, metadata: { now: NOW, actor: 'billing' } },
  ];
  const events: MeshEvent[] = [];
  for (const command of commands) {
    const result = meshDecider.decide(command, fold(meshDecider, events));
    if (!result.ok) throw new Error(result.error.code);
    events.push(...result.events);
  }
  const stopped = events.find((e) => e.type === 'mesh.stopped');
  if (!stopped) throw new Error('no mesh.stopped');
  return {
    id: 'ev-stop',
    type: stopped.type,
    version: 1,
    aggregate: { kind: 'mesh', id: 'm1' },
    project: 'demo',
    occurredAt: NOW,
    actor: 'billing',
    origin: 'agent',
    causationId: 'r2',
    correlationId: 'm1',
    payload: stopped.data,
    seq: 9,
  };
}

describe('a stopped handoff mesh reaches the operator (seed 004: the cap ends a ping-pong as a stop packet)', () => {
  it('mesh.stopped opens a stop item in the operator inbox, like run.stopped', () => {
    const projection = inboxProjection();
    const event = meshStoppedEvent();
    expect(projection.handles(event.type)).toBe(true);
    const { ops } = projection.step(null, event);
    expect(ops).toEqual([
      expect.objectContaining({ op: 'item.upsert', item: expect.objectContaining({ id: 'stop:stop-m-r2', kind: 'stop', why: 'thrash', status: 'open', agent: 'billing', mesh_run_id: 'm1' }) }),
    ]);
  });

  it('mesh.stopped is stored in the stops projection with its packet', () => {
    const projection = stopsProjection();
    const event = meshStoppedEvent();
    expect(projection.handles(event.type)).toBe(true);
    const { ops } = projection.step(null, event);
    expect(ops[0]).toMatchObject({ op: 'item.upsert', item: { id: 'stop-m-r2', why: 'thrash', workflow_run_id: 'm1', packet: { why: 'thrash', goal_done: false } } });
  });
});
