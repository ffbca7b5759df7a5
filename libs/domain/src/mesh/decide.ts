import { validateMesh, type MeshEvent } from '@baton/contracts';
import { accept, assertNever, Decider, DecisionResult, reject } from '../decider';
import { deriveId } from '../run/ids';
import { buildStop } from '../stop';
import { resolveHandoffCall } from './build';
import type { MeshCommand, RecordMeshTurn, StartMesh } from './commands';
import { evolveMesh, initialMeshState, isOutputAgent, type MeshRunState, type MeshState } from './state';

/** Stable codes of the mesh decider's refusals (and of recorded `mesh.turn_rejected` events). */
export const MeshErrorCode = {
  meshNotFound: 'mesh_not_found',
  meshInvalid: 'mesh_invalid',
  meshAlreadyStarted: 'mesh_already_started',
  meshNotRunning: 'mesh_not_running',
  unexpectedAgent: 'unexpected_agent',
  staleHandoff: 'stale_handoff',
} as const;
export type MeshErrorCode = (typeof MeshErrorCode)[keyof typeof MeshErrorCode];

/** The handoff the entry agent's first turn is offered with (`mh-s-<mesh_run_id>`). */
export const meshEntryHandoffId = (meshRunId: string): string => deriveId('mh-s', meshRunId);
/** The handoff a turn's handoff call opens for the next speaker (`mh-r-<result_id>`). */
export const meshHandoffId = (resultId: string): string => deriveId('mh-r', resultId);
/** The stop packet a turn opens when the iteration cap refuses its handoff (`stop-m-<result_id>`). */
export const meshStopId = (resultId: string): string => deriveId('stop-m', resultId);

/**
 * Decide a mesh command. The router is the aggregate's only writer. Never throws for a business
 * reason.
 *
 * - `start_mesh`: the mesh must build against the project's agents (`mesh_invalid` with the
 *   diagnostics otherwise); `mesh.started` pins the definition and names the entry handoff.
 *   Starting the same mesh run again decides nothing.
 * - `record_turn` (idempotent per `result_id`): a turn from an agent other than the expected
 *   speaker, for a stale handoff, or after the mesh ended is recorded as `mesh.turn_rejected`.
 *   Otherwise `mesh.turn_recorded`, then one `mesh.handoff_ignored` per call that names an
 *   unknown tool or a target this agent was not granted, then exactly one of: `mesh.handed_off`
 *   to the target of the LAST valid handoff call; `mesh.stopped` (why `thrash`, a stop packet)
 *   when that handoff would exceed `max_iterations` turns; `mesh.completed` with the output when
 *   the turn made no valid handoff call.
 */
export function decideMesh(command: MeshCommand, state: MeshState): DecisionResult<MeshEvent> {
  switch (command.type) {
    case 'start_mesh':
      return startMesh(command, state);
    case 'record_turn':
      return recordTurn(command, state);
    default:
      return assertNever(command, 'mesh command');
  }
}

function startMesh(command: StartMesh, state: MeshState): DecisionResult<MeshEvent> {
  const d = command.data;
  if (state.status !== 'none') {
    return state.mesh_run_id === d.mesh_run_id
      ? accept()
      : reject('wrong_state', MeshErrorCode.meshAlreadyStarted, `mesh run ${state.mesh_run_id} already exists`);
  }
  const diagnostics = validateMesh(d.mesh, d.agents);
  if (diagnostics.length > 0) {
    return reject('invalid', MeshErrorCode.meshInvalid, diagnostics.map((x) => `${x.code}: ${x.message}`).join('; '), { diagnostics });
  }
  return accept({
    type: 'mesh.started',
    data: {
      mesh_run_id: d.mesh_run_id,
      project: d.project,
      mesh: d.mesh,
      input: d.input ?? null,
      started_by: d.started_by ?? null,
      variables: d.variables ?? {},
      handoff_id: meshEntryHandoffId(d.mesh_run_id),
      started_at: command.metadata.now,
    },
  });
}

function recordTurn(command: RecordMeshTurn, state: MeshState): DecisionResult<MeshEvent> {
  const d = command.data;
  const now = command.metadata.now;
  if (state.status === 'none') return reject('not_found', MeshErrorCode.meshNotFound, 'no such mesh run');
  if (state.applied.includes(d.result_id)) return accept();
  const refuse = (code: MeshErrorCode, message: string): DecisionResult<MeshEvent> =>
    accept({ type: 'mesh.turn_rejected', data: { result_id: d.result_id, agent: d.agent, code, message, rejected_at: now } });
  if (state.status !== 'running') return refuse(MeshErrorCode.meshNotRunning, `mesh run ${state.mesh_run_id} is ${state.status}`);
  if (d.agent !== state.speaker) return refuse(MeshErrorCode.unexpectedAgent, `it is ${state.speaker}'s turn, not ${d.agent}'s`);
  if (d.handoff_id !== undefined && d.handoff_id !== state.handoff_id) {
    return refuse(MeshErrorCode.staleHandoff, `the current turn is handoff ${state.handoff_id}, not ${d.handoff_id}`);
  }

  const turn = state.turns + 1;
  const events: MeshEvent[] = [
    {
      type: 'mesh.turn_recorded',
      data: {
        result_id: d.result_id,
        run_id: d.run_id,
        agent: d.agent,
        turn,
        text: d.text,
        handoff_tool_calls: [...d.handoff_tool_calls],
        handoff_id: state.handoff_id,
        recorded_at: now,
      },
    },
  ];
  let chosen: { target: string; tool: string; call_id?: string } | null = null;
  for (const call of d.handoff_tool_calls) {
    const resolved = resolveHandoffCall(state.mesh, d.agent, call.tool);
    if (resolved.kind === 'handoff') {
      chosen = { target: resolved.target, tool: call.tool, ...(call.call_id !== undefined ? { call_id: call.call_id } : {}) };
      continue;
    }
    events.push({
      type: 'mesh.handoff_ignored',
      data: {
        result_id: d.result_id,
        agent: d.agent,
        tool: call.tool,
        ...(call.call_id !== undefined ? { call_id: call.call_id } : {}),
        target: resolved.target,
        reason: resolved.reason,
        detail:
          resolved.reason === 'unknown_tool'
            ? `${call.tool} names no agent of mesh '${state.mesh.name}'`
            : `${d.agent} may not hand off to ${resolved.target} in mesh '${state.mesh.name}'`,
        ignored_at: now,
      },
    });
  }

  if (chosen === null) {
    const output = isOutputAgent(state.mesh, d.agent) ? { agent: d.agent, turn, result_id: d.result_id, text: d.text } : state.output;
    events.push({ type: 'mesh.completed', data: { result_id: d.result_id, agent: d.agent, turns: turn, output, completed_at: now } });
    return accept(...events);
  }
  if (turn >= state.mesh.max_iterations) {
    events.push(stopped(state, command, turn, chosen));
    return accept(...events);
  }
  events.push({
    type: 'mesh.handed_off',
    data: {
      result_id: d.result_id,
      from: d.agent,
      to: chosen.target,
      tool: chosen.tool,
      ...(chosen.call_id !== undefined ? { call_id: chosen.call_id } : {}),
      handoff_id: meshHandoffId(d.result_id),
      turn: turn + 1,
      handed_off_at: now,
    },
  });
  return accept(...events);
}

function stopped(state: MeshRunState, command: RecordMeshTurn, turn: number, chosen: { target: string; tool: string }): MeshEvent {
  const d = command.data;
  const { packet } = buildStop({
    packet_id: meshStopId(d.result_id),
    now: command.metadata.now,
    why: 'thrash',
    tried: [...state.path, `${d.agent}→${chosen.target} (refused: cap)`],
    pending: null,
    run_id: d.run_id,
    workflow_run_id: state.mesh_run_id,
    project: state.project,
    agent: d.agent,
    step: state.mesh.name,
    detail: `mesh '${state.mesh.name}' reached its cap of ${state.mesh.max_iterations} turns; ${d.agent} asked to hand off to ${chosen.target} again`,
  });
  return {
    type: 'mesh.stopped',
    data: {
      packet,
      result_id: d.result_id,
      turns: turn,
      max_iterations: state.mesh.max_iterations,
      refused: { from: d.agent, to: chosen.target, tool: chosen.tool },
      stopped_at: command.metadata.now,
    },
  };
}

/** The mesh aggregate as a decider (id = mesh_run_id; kind `mesh`). */
export const meshDecider: Decider<MeshCommand, MeshEvent, MeshState> = {
  decide: decideMesh,
  evolve: evolveMesh,
  initialState: initialMeshState,
};
