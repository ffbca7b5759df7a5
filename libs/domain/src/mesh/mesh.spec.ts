import {
  handoffToolName,
  MeshDefinitionSchema,
  ProjectDefinitionSchema,
  StopPacketSchema,
  type HandoffToolCall,
  type MeshEvent,
  type MeshDefinitionInput,
} from '@baton/contracts';
import { fold } from '../decider';
import { ENGINE } from '../run/attribution';
import { given } from '../testing/given';
import { buildMesh, resolveHandoffCall } from './build';
import type { MeshCommand } from './commands';
import { meshEntryHandoffId, meshHandoffId } from './decide';
// Turns are sent under the current turn's claim unless a test says otherwise (withCurrentMeshClaim).
import { claimedMeshDecider as meshDecider } from './test-helpers';
import type { MeshRunState } from './state';

const NOW = '2025-01-01T00:00:00.000Z';
const AGENTS = ['triage', 'billing', 'tech'];
const support = (extra: Partial<MeshDefinitionInput> = {}) =>
  MeshDefinitionSchema.parse({
    name: 'support',
    entry: 'triage',
    handoffs: { triage: ['billing', 'tech'], billing: ['triage'], tech: ['triage'] },
    outputs: ['triage'],
    ...extra,
  });

const start = (mesh = support()): MeshCommand => ({
  type: 'start_mesh',
  data: { mesh_run_id: 'm1', project: 'demo', mesh, agents: AGENTS, input: 'my invoice is wrong', started_by: 'sam' },
  metadata: { now: NOW, actor: 'sam' },
});
const call = (target: string, call_id?: string): HandoffToolCall => ({ tool: handoffToolName(target), ...(call_id ? { call_id } : {}) });
const turn = (result_id: string, agent: string, calls: HandoffToolCall[] = [], text = `${agent} says hi`, handoff_id?: string): MeshCommand => ({
  type: 'record_turn',
  data: { result_id, run_id: `ar-${result_id}`, agent, text, handoff_tool_calls: calls, ...(handoff_id ? { handoff_id } : {}) },
  metadata: { now: NOW, actor: agent },
});

/** Run commands one after another through the decider, returning every event (a live run). */
function play(commands: MeshCommand[], history: MeshEvent[] = []): MeshEvent[] {
  const events = [...history];
  for (const command of commands) {
    const result = meshDecider.decide(command, fold(meshDecider, events));
    if (!result.ok) throw new Error(`${result.error.code}: ${result.error.message}`);
    events.push(...result.events);
  }
  return events;
}

describe('mesh builder validation (seed 004: validation is done when the mesh is built)', () => {
  it('a mesh whose agents, targets and entry exist builds, with each agent given a handoff_to_<target> tool per granted target', () => {
    const built = buildMesh(support(), AGENTS);
    expect(built.ok).toBe(true);
    if (built.ok) expect(built.mesh.tools['triage']).toEqual({ handoff_to_billing: 'billing', handoff_to_tech: 'tech' });
  });

  it('unknown agents, unknown targets, an unknown entry agent and unknown output agents are rejected', () => {
    const built = buildMesh(support({ entry: 'ghost', handoffs: { phantom: ['triage'], triage: ['nobody'] }, outputs: ['nemo'] }), AGENTS);
    expect(built.ok).toBe(false);
    if (!built.ok) {
      expect(built.diagnostics.map((d) => d.code).sort()).toEqual([
        'MESH_UNKNOWN_AGENT',
        'MESH_UNKNOWN_ENTRY',
        'MESH_UNKNOWN_OUTPUT_AGENT',
        'MESH_UNKNOWN_TARGET',
      ]);
    }
  });

  it('a self-handoff (A may hand off to A) is rejected with a clear error', () => {
    const built = buildMesh(support({ handoffs: { triage: ['triage', 'billing'] } }), AGENTS);
    expect(built.ok).toBe(false);
    if (!built.ok) {
      expect(built.diagnostics).toEqual([expect.objectContaining({ code: 'MESH_SELF_HANDOFF', path: ['handoffs', 'triage', 0] })]);
      expect(built.diagnostics[0]!.message).toMatch(/'triage' may not hand off to itself/);
    }
  });

  it('colliding sanitized tool names are rejected: Billing-Team and billing_team both become handoff_to_billing_team', () => {
    const agents = ['triage', 'Billing-Team', 'billing_team'];
    const built = buildMesh(support({ handoffs: { triage: ['Billing-Team', 'billing_team'] }, outputs: [] }), agents);
    expect(built.ok).toBe(false);
    if (!built.ok) {
      expect(built.diagnostics.map((d) => d.code)).toEqual(['MESH_TOOL_NAME_COLLISION']);
      expect(built.diagnostics[0]!.message).toContain('handoff_to_billing_team');
    }
    // The same two names on different agents do not collide: each agent has its own tool table.
    expect(buildMesh(support({ handoffs: { triage: ['Billing-Team'], 'Billing-Team': ['billing_team'] }, outputs: [] }), agents).ok).toBe(true);
  });

  it('an agent named like an Object.prototype member with no handoffs entry gets no tools (and its handoff calls are refused, not a crash)', () => {
    const agents = ['triage', 'toString'];
    const mesh = support({ entry: 'triage', handoffs: { triage: ['toString'] }, outputs: [] });
    const built = buildMesh(mesh, agents);
    expect(built.ok).toBe(true);
    if (built.ok) expect(built.mesh.tools).toEqual({ triage: { handoff_to_tostring: 'toString' }, toString: {} });
    expect(resolveHandoffCall(MeshDefinitionSchema.parse(mesh), 'toString', 'handoff_to_triage')).toEqual({
      kind: 'ignored',
      reason: 'not_granted',
      target: 'triage',
    });
  });

  it('the project definition refuses a mesh that does not build, and needs no meshes, and defaults max_iterations to 40', () => {
    const project = { project: 'demo', agents: AGENTS.map((name) => ({ name })) };
    expect(ProjectDefinitionSchema.parse(project).meshes ?? []).toEqual([]);
    const ok = ProjectDefinitionSchema.parse({ ...project, meshes: [{ name: 'support', entry: 'triage', handoffs: { triage: ['billing'] } }] });
    expect(ok.meshes?.[0]?.max_iterations).toBe(40);
    const bad = ProjectDefinitionSchema.safeParse({ ...project, meshes: [{ name: 'support', entry: 'triage', handoffs: { triage: ['triage'] } }] });
    expect(bad.success).toBe(false);
    expect(JSON.stringify(bad.error?.issues)).toContain('MESH_SELF_HANDOFF');
  });

  it("a start with a mesh that does not build is refused with the check's own code (MESH_SELF_HANDOFF), never started", () => {
    given(meshDecider)
      .when(start(support({ handoffs: { triage: ['triage'] } })))
      .thenFails('MESH_SELF_HANDOFF');
  });
});

describe('mesh runs (seed 004 routing rules)', () => {
  const started = play([start()]);

  it('a mesh starts with the entry agent, pinning the mesh definition; starting it again decides nothing', () => {
    expect(started).toEqual([expect.objectContaining({ type: 'mesh.started', data: expect.objectContaining({ handoff_id: meshEntryHandoffId('m1') }) })]);
    given(meshDecider, started).when(start()).then([]);
  });

  it('a start under a taken mesh run id for another mesh, input or starter is refused mesh_already_started (it was silently taken for the first)', () => {
    const other = (over: Partial<Extract<MeshCommand, { type: 'start_mesh' }>['data']>): MeshCommand => {
      const base = start() as Extract<MeshCommand, { type: 'start_mesh' }>;
      return { ...base, data: { ...base.data, ...over } };
    };
    given(meshDecider, started)
      .when(other({ mesh: { ...support(), name: 'free' } }))
      .thenFails('mesh_already_started');
    given(meshDecider, started)
      .when(other({ started_by: 'bob' }))
      .thenFails('mesh_already_started');
    given(meshDecider, started)
      .when(other({ input: 'something else' }))
      .thenFails('mesh_already_started');
  });

  it('routing on a handoff call: triage calling handoff_to_billing hands the conversation to billing', () => {
    given(meshDecider, started)
      .when(turn('r1', 'triage', [call('billing', 'c1')]))
      .thenMatch([
        { type: 'mesh.turn_recorded', data: expect.objectContaining({ agent: 'triage', turn: 1, handoff_id: meshEntryHandoffId('m1') }) },
        {
          type: 'mesh.handed_off',
          data: expect.objectContaining({
            from: 'triage',
            to: 'billing',
            tool: 'handoff_to_billing',
            call_id: 'c1',
            turn: 2,
            handoff_id: meshHandoffId('m1', 'r1'),
          }),
        },
      ]);
  });

  it('hand-back (A→B→A): billing hands back to triage, and triage speaks next', () => {
    const history = play([turn('r1', 'triage', [call('billing')])], started);
    const state = given(meshDecider, history)
      .when(turn('r2', 'billing', [call('triage')]))
      .stateAfter() as MeshRunState;
    expect(state.speaker).toBe('triage');
    expect(state.path).toEqual(['triage→billing', 'billing→triage']);
  });

  it('no-handoff termination: a turn with no handoff call ends the mesh with its output', () => {
    const history = play([turn('r1', 'triage', [call('billing')]), turn('r2', 'billing', [call('triage')], 'refund issued')], started);
    given(meshDecider, history)
      .when(turn('r3', 'triage', [], 'Your refund is on its way.'))
      .thenMatch([
        { type: 'mesh.turn_recorded' },
        {
          type: 'mesh.completed',
          data: {
            result_id: 'r3',
            agent: 'triage',
            turns: 3,
            output: { agent: 'triage', turn: 3, result_id: 'r3', text: 'Your refund is on its way.' },
            completed_at: NOW,
          },
        },
      ]);
  });

  it("the output is the final turn of an output agent: a non-output agent ending the mesh leaves the last output agent's turn", () => {
    const history = play([turn('r1', 'triage', [call('billing')], 'let me get billing')], started);
    const [, completed] = given(meshDecider, history)
      .when(turn('r2', 'billing', [], 'billing text'))
      .thenMatch([{ type: 'mesh.turn_recorded' }, { type: 'mesh.completed' }]);
    expect(completed).toMatchObject({ data: { agent: 'billing', output: { agent: 'triage', text: 'let me get billing' } } });
  });

  it('last-of-multiple wins: routing follows the last handoff call in the turn', () => {
    given(meshDecider, started)
      .when(turn('r1', 'triage', [call('billing', 'c1'), call('tech', 'c2')]))
      .thenMatch([{ type: 'mesh.turn_recorded' }, { type: 'mesh.handed_off', data: expect.objectContaining({ to: 'tech', call_id: 'c2' }) }]);
  });

  it("the winning call's reason and message reach the next agent (handover on mesh.handed_off); non-text or blank ones are the turn's record only", () => {
    const withArgs = (target: string, args: Record<string, unknown>): HandoffToolCall => ({ tool: handoffToolName(target), arguments: args });
    const [recorded, handedOff] = given(meshDecider, started)
      .when(
        turn('r1', 'triage', [
          withArgs('tech', { reason: 'ignored: not the last call' }),
          withArgs('billing', { reason: 'refund over 40', message: 'order 99', extra: 1 }),
        ]),
      )
      .thenMatch([{ type: 'mesh.turn_recorded' }, { type: 'mesh.handed_off', data: expect.objectContaining({ to: 'billing' }) }]);
    expect(handedOff).toMatchObject({ data: { handover: { reason: 'refund over 40', message: 'order 99' } } });
    // The turn keeps the calls whole, every argument included.
    expect(recorded).toMatchObject({ data: { handoff_tool_calls: [{ arguments: { reason: 'ignored: not the last call' } }, { arguments: { extra: 1 } }] } });
    // Text only, not blank, clipped to short text; none at all: no handover.
    const only = (args: Record<string, unknown>) =>
      given(meshDecider, started)
        .when(turn('r1', 'triage', [withArgs('billing', args)]))
        .thenMatch([{ type: 'mesh.turn_recorded' }, { type: 'mesh.handed_off' }])[1]!.data as { handover?: unknown };
    expect(only({ reason: 42, message: '  ' }).handover).toBeUndefined();
    expect(only({ message: 'm' }).handover).toEqual({ message: 'm' });
    const long = only({ reason: 'x'.repeat(5_000) }).handover as { reason: string };
    expect(long.reason).toHaveLength(4_000);
    expect(long.reason.endsWith('…')).toBe(true);
    expect(only({}).handover).toBeUndefined();
    expect(Object.prototype.hasOwnProperty.call(only({}), 'handover')).toBe(false);
  });

  it('unknown ignored: a call to an unknown tool is ignored and recorded with the reason; the valid call still routes', () => {
    given(meshDecider, started)
      .when(turn('r1', 'triage', [call('billing'), { tool: 'handoff_to_ghost', call_id: 'c9' }]))
      .thenMatch([
        { type: 'mesh.turn_recorded' },
        { type: 'mesh.handoff_ignored', data: expect.objectContaining({ tool: 'handoff_to_ghost', call_id: 'c9', target: null, reason: 'unknown_tool' }) },
        { type: 'mesh.handed_off', data: expect.objectContaining({ to: 'billing' }) },
      ]);
  });

  it('a call to a target the agent was not granted is ignored, enforced per agent (billing may not reach tech even though triage may)', () => {
    const history = play([turn('r1', 'triage', [call('billing')])], started);
    given(meshDecider, history)
      .when(turn('r2', 'billing', [call('tech')], 'done here'))
      .thenMatch([
        { type: 'mesh.turn_recorded' },
        { type: 'mesh.handoff_ignored', data: expect.objectContaining({ agent: 'billing', tool: 'handoff_to_tech', target: 'tech', reason: 'not_granted' }) },
        { type: 'mesh.completed', data: expect.objectContaining({ agent: 'billing' }) },
      ]);
  });

  it('a self-handoff call is ignored as not granted', () => {
    given(meshDecider, started)
      .when(turn('r1', 'triage', [call('triage')]))
      .thenMatch([
        { type: 'mesh.turn_recorded' },
        { type: 'mesh.handoff_ignored', data: expect.objectContaining({ reason: 'not_granted', target: 'triage' }) },
        { type: 'mesh.completed' },
      ]);
  });

  it('the cap stops a ping-pong: the turn that reaches max_iterations and still hands off stops the mesh with a thrash stop packet, not an error', () => {
    const events = play(
      [turn('p1', 'triage', [call('billing')]), turn('p2', 'billing', [call('triage')]), turn('p3', 'triage', [call('billing')])],
      play([start(support({ max_iterations: 4 }))]),
    );
    const [recorded, stopped, notice] = given(meshDecider, events)
      .when(turn('p4', 'billing', [call('triage')]))
      .thenMatch([{ type: 'mesh.turn_recorded' }, { type: 'mesh.stopped' }, { type: 'mesh.notice_emitted' }]);
    if (stopped?.type !== 'mesh.stopped') throw new Error('expected mesh.stopped');
    // The cap is Baton's rule: the stop and its notice speak for the router (engine_fallback); the turn stays the agent's.
    expect([recorded?.by, stopped.by, notice?.by]).toEqual([undefined, ENGINE, ENGINE]);
    expect(stopped.data).toMatchObject({ turns: 4, max_iterations: 4, refused: { from: 'billing', to: 'triage' } });
    expect(stopped.data.packet).toMatchObject({ stop: 'handoff', why: 'thrash', workflow_run_id: 'm1', agent: 'billing', goal_done: false, status: 'open' });
    expect(stopped.data.packet.tried).toEqual(['triage→billing', 'billing→triage', 'triage→billing', 'billing→triage (refused: cap)']);
    expect(StopPacketSchema.safeParse(stopped.data.packet).success).toBe(true);
    // triage spoke before (the entry): "again"; the count in words.
    expect(stopped.data.packet.detail).toBe("mesh 'support' reached its cap of 4 turns; billing asked to hand off to triage again");
    // A stopped mesh takes no more turns; a late turn is recorded as rejected.
    const after = play([turn('p4', 'billing', [call('triage')])], events);
    given(meshDecider, after)
      .when(turn('p5', 'triage', []))
      .thenMatch([{ type: 'mesh.turn_rejected', data: expect.objectContaining({ code: 'mesh_not_running' }) }]);
  });

  it('a cap of 1 turn refuses the first handoff to an agent that never spoke: no "again", and "1 turn"', () => {
    const events = play([start(support({ max_iterations: 1 }))]);
    const [, stopped] = given(meshDecider, events)
      .when(turn('p1', 'triage', [call('billing')]))
      .thenMatch([{ type: 'mesh.turn_recorded' }, { type: 'mesh.stopped' }, { type: 'mesh.notice_emitted' }]);
    if (stopped?.type !== 'mesh.stopped') throw new Error('expected mesh.stopped');
    expect(stopped.data.packet.detail).toBe("mesh 'support' reached its cap of 1 turn; triage asked to hand off to billing");
    expect(stopped.data.packet.next_form?.title).toBe("Mesh 'support' reached its cap of 1 turn — raise the cap or stop");
  });

  it('at the cap, a turn without a handoff call still completes the mesh', () => {
    const events = play([turn('p1', 'triage', [call('billing')])], play([start(support({ max_iterations: 2 }))]));
    given(meshDecider, events)
      .when(turn('p2', 'billing', []))
      .thenMatch([{ type: 'mesh.turn_recorded' }, { type: 'mesh.completed' }]);
  });

  it('idempotent per turn: a redelivered result id decides nothing', () => {
    const history = play([turn('r1', 'triage', [call('billing')])], started);
    given(meshDecider, history)
      .when(turn('r1', 'triage', [call('billing')]))
      .then([]);
  });

  it('a turn from an agent whose turn it is not, or for a stale handoff, is recorded as rejected and routes nothing', () => {
    given(meshDecider, started)
      .when(turn('x1', 'billing', [call('triage')]))
      .thenMatch([{ type: 'mesh.turn_rejected', data: expect.objectContaining({ code: 'unexpected_agent' }) }]);
    given(meshDecider, started)
      .when(turn('x2', 'triage', [], 'hi', 'ho-old'))
      .thenMatch([{ type: 'mesh.turn_rejected', data: expect.objectContaining({ code: 'stale_handoff' }) }]);
  });

  it('a turn for a mesh that does not exist is refused (mesh_not_found)', () => {
    given(meshDecider).when(turn('r1', 'triage')).thenFails('mesh_not_found');
  });

  it('restore after restart: the state rebuilt from the events equals the live state, and a new turn continues correctly', () => {
    // Live: fold step by step as the decisions are made.
    let live = meshDecider.initialState();
    const log: MeshEvent[] = [];
    for (const command of [start(), turn('r1', 'triage', [call('billing')]), turn('r2', 'billing', [call('triage')])]) {
      const result = meshDecider.decide(command, live);
      if (!result.ok) throw new Error(result.error.code);
      for (const event of result.events) live = meshDecider.evolve(live, event);
      log.push(...result.events);
    }
    // Restart: only the log survives (round-tripped through JSON like the stream).
    const restored = fold(meshDecider, JSON.parse(JSON.stringify(log)) as MeshEvent[]);
    expect(restored).toEqual(live);
    given(meshDecider, JSON.parse(JSON.stringify(log)) as MeshEvent[])
      .when(turn('r3', 'triage', [call('tech')]))
      .thenMatch([
        { type: 'mesh.turn_recorded', data: expect.objectContaining({ turn: 3, handoff_id: meshHandoffId('m1', 'r2') }) },
        { type: 'mesh.handed_off', data: expect.objectContaining({ from: 'triage', to: 'tech', turn: 4 }) },
      ]);
    // The redelivered pre-restart turn is still a no-op.
    given(meshDecider, log)
      .when(turn('r2', 'billing', [call('triage')]))
      .then([]);
  });
});
