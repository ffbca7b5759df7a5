import { handoffToolName, MeshDefinitionSchema, type MeshEvent } from '@baton/contracts';
import { fold, meshDecider, meshEntryHandoffId, meshHandoffId, type MeshCommand } from '@baton/domain';
import type { SequencedEvent } from '../store';
import { inboxProjection } from './inbox';
import { noticesProjection } from './notices';
import { stopsProjection } from './stops';

const NOW = '2025-01-01T00:00:00.000Z';

/** A turn's claim on its handoff (the claim rule): `agent` holds it, as the router would have read it. */
const claimOf = (handoffId: string, agent: string) => ({
  handoff_id: handoffId,
  claim_id: `c-${handoffId}`,
  handoff: { handoff_id: handoffId, status: 'claimed' as const, claim: { claim_id: `c-${handoffId}`, claimed_by: agent } },
});

/** A real `mesh.stopped` (decided by the mesh decider at its cap), as a stored event. */
function meshStoppedEvent(): SequencedEvent {
  return meshEvent('mesh.stopped');
}

/** A mesh event decided by the real decider: a ping-pong to the cap of 2, then (optionally) a deny. */
function meshEvent(type: MeshEvent['type']): SequencedEvent {
  const mesh = MeshDefinitionSchema.parse({ name: 'support', entry: 'triage', handoffs: { triage: ['billing'], billing: ['triage'] }, max_iterations: 2 });
  const commands: MeshCommand[] = [
    {
      type: 'start_mesh',
      data: { mesh_run_id: 'm1', project: 'demo', mesh, agents: ['triage', 'billing'], started_by: 'sam' },
      metadata: { now: NOW, actor: 'sam' },
    },
    {
      type: 'record_turn',
      data: {
        result_id: 'r1',
        run_id: 'ar1',
        agent: 'triage',
        text: 'x',
        handoff_tool_calls: [{ tool: handoffToolName('billing') }],
        ...claimOf(meshEntryHandoffId('m1'), 'triage'),
      },
      metadata: { now: NOW, actor: 'triage' },
    },
    {
      type: 'record_turn',
      data: {
        result_id: 'r2',
        run_id: 'ar2',
        agent: 'billing',
        text: 'y',
        handoff_tool_calls: [{ tool: handoffToolName('triage') }],
        ...claimOf(meshHandoffId('m1', 'r1'), 'billing'),
      },
      metadata: { now: NOW, actor: 'billing' },
    },
  ];
  commands.push({
    type: 'answer_stop',
    data: { answer: { packet_id: 'stop-mt-m1:r2', answer_id: 'a1', action: 'deny', answered_by: 'olga', answered_at: NOW } },
    metadata: { now: NOW, actor: 'olga', actorRole: 'operator' },
  });
  const events: MeshEvent[] = [];
  for (const command of commands) {
    const result = meshDecider.decide(command, fold(meshDecider, events));
    if (!result.ok) throw new Error(result.error.code);
    events.push(...result.events);
  }
  const stopped = events.find((e) => e.type === type);
  if (!stopped) throw new Error(`no ${type}`);
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
      expect.objectContaining({
        op: 'item.upsert',
        item: expect.objectContaining({ id: 'stop:demo:stop-mt-m1:r2', kind: 'stop', why: 'thrash', status: 'open', agent: 'billing', mesh_run_id: 'm1' }),
      }),
    ]);
  });

  it('mesh.stopped is stored in the stops projection with its packet', () => {
    const projection = stopsProjection();
    const event = meshStoppedEvent();
    expect(projection.handles(event.type)).toBe(true);
    const { ops } = projection.step(null, event);
    expect(ops[0]).toMatchObject({
      op: 'item.upsert',
      item: { id: 'demo:stop-mt-m1:r2', why: 'thrash', workflow_run_id: 'm1', packet: { why: 'thrash', goal_done: false } },
    });
  });

  it('an answered mesh stop closes its inbox item and marks the stops item answered (mesh.stop_answered); stop items name their mesh', () => {
    const answered = meshEvent('mesh.stop_answered');
    expect(inboxProjection().step(null, answered).ops).toEqual([
      expect.objectContaining({
        op: 'item.patch',
        id: 'stop:demo:stop-mt-m1:r2',
        set: expect.objectContaining({ status: 'answered', resolution: 'answered:deny', closed_by: 'olga' }),
      }),
    ]);
    expect(stopsProjection().step(null, answered).ops).toEqual([
      expect.objectContaining({
        op: 'item.patch',
        id: 'demo:stop-mt-m1:r2',
        set: expect.objectContaining({ status: 'answered', effect: expect.objectContaining({ kind: 'stop' }) }),
      }),
    ]);
    expect(stopsProjection().step(null, meshStoppedEvent()).ops[0]).toMatchObject({ item: { mesh_run_id: 'm1' } });
  });

  it("a mesh stop's human action notice is stored in the notices projection like a run's (the notifier's publish guard)", () => {
    const projection = noticesProjection();
    const event = meshEvent('mesh.notice_emitted');
    expect(projection.handles(event.type)).toBe(true);
    expect(projection.step(null, event).ops).toEqual([
      expect.objectContaining({
        op: 'item.upsert',
        item: expect.objectContaining({ id: 'demo:nt-mt-m1:r2', kind: 'stop', recipient: 'sam', workflow_run_id: 'm1' }),
      }),
    ]);
  });
});
