import type { MeshDefinition, MeshEvent, MeshHandover, MeshOutput, NoticeRecipient, StopPacket } from '@baton/contracts';
import { markAnswered } from '../stop/resume';
import { assertNever } from '../decider';

export type { MeshEvent } from '@baton/contracts';

/** One recorded turn of the shared conversation. */
export interface MeshTurn {
  turn: number;
  agent: string;
  result_id: string;
  text: string;
}

/** A mesh run that has started: what `decide` needs to route the next turn. */
export interface MeshRunState {
  status: 'running' | 'completed' | 'stopped' | 'terminated';
  mesh_run_id: string;
  project: string;
  /** The mesh as pinned by `mesh.started`. */
  mesh: MeshDefinition;
  input: string | null;
  started_by: string | null;
  variables: Record<string, unknown>;
  /** The agent whose turn is expected next (the last one to speak once the mesh ended). */
  speaker: string;
  /** The handoff the expected speaker was offered. */
  handoff_id: string;
  /** Turns recorded so far. */
  turns: number;
  /** The conversation, oldest first. */
  transcript: MeshTurn[];
  /** Each handoff taken, as `from→to`, oldest first (the stop packet's `tried`). */
  path: string[];
  /** Handoff calls ignored so far (unknown or not granted). */
  ignored: number;
  /** Turn result ids applied (recorded or rejected), for idempotency. */
  applied: string[];
  /** Operator answer ids applied (answered or refused), for idempotency: a key space of their own. */
  answered: string[];
  /** The latest turn of an output agent. */
  output: MeshOutput | null;
  /** The stop packet, once stopped. */
  packet_id: string | null;
  /** Who a stop notifies (null on meshes started before notices existed). */
  notify: NoticeRecipient | null;
  /** The latest stop packet (open while stopped; answered once an operator answered it). */
  stop: StopPacket | null;
  /** The handoff the iteration cap refused, and the turn that asked for it (while stopped by the cap). */
  refused: { result_id: string; from: string; to: string; tool: string; handover?: MeshHandover } | null;
  /** The turn whose agent stopped the mesh itself (its `stop` signal), while stopped that way. */
  stopped_by: { result_id: string; agent: string } | null;
  /** Human action notices emitted so far. */
  notices: number;
}

export type MeshState = { status: 'none' } | MeshRunState;

export function initialMeshState(): MeshState {
  return { status: 'none' };
}

/** Did a `mesh.turn_rejected` refuse an operator's answer (not an agent's turn)? Older events say so only by their agent and message. */
export function isAnswerRefusal(d: { result_id: string; agent: string; message: string; of?: 'turn' | 'answer' }): boolean {
  if (d.of !== undefined) return d.of === 'answer';
  return d.agent === 'operator' && d.message.startsWith(`answer ${d.result_id} by `);
}

/** Is `agent` an output agent of `mesh` (no outputs listed = every participant)? */
export function isOutputAgent(mesh: Pick<MeshDefinition, 'outputs'>, agent: string): boolean {
  return mesh.outputs.length === 0 || mesh.outputs.includes(agent);
}

/**
 * Fold one mesh event. Pure; events are applied as recorded (the decider already validated
 * them), so a state rebuilt from the log after a restart equals the live one.
 */
export function evolveMesh(state: MeshState, event: MeshEvent): MeshState {
  if (event.type === 'mesh.started') {
    const d = event.data;
    return {
      status: 'running',
      mesh_run_id: d.mesh_run_id,
      project: d.project,
      mesh: d.mesh,
      input: d.input,
      started_by: d.started_by,
      variables: d.variables,
      speaker: d.mesh.entry,
      handoff_id: d.handoff_id,
      turns: 0,
      transcript: [],
      path: [],
      ignored: 0,
      applied: [],
      answered: [],
      output: null,
      packet_id: null,
      notify: d.notify ?? null,
      stop: null,
      refused: null,
      stopped_by: null,
      notices: 0,
    };
  }
  if (state.status === 'none') return state;
  switch (event.type) {
    case 'mesh.turn_recorded': {
      const d = event.data;
      const turn: MeshTurn = { turn: d.turn, agent: d.agent, result_id: d.result_id, text: d.text };
      return {
        ...state,
        turns: d.turn,
        transcript: [...state.transcript, turn],
        applied: [...state.applied, d.result_id],
        output: isOutputAgent(state.mesh, d.agent) ? { agent: d.agent, turn: d.turn, result_id: d.result_id, text: d.text } : state.output,
      };
    }
    case 'mesh.handoff_ignored':
      return { ...state, ignored: state.ignored + 1 };
    case 'mesh.handed_off':
      // A handoff an operator's answer made is marked as such in the path (a cap packet's `tried`).
      return {
        ...state,
        speaker: event.data.to,
        handoff_id: event.data.handoff_id,
        path: [...state.path, `${event.data.from}→${event.data.to}${event.data.resume !== undefined ? ` (answer: ${event.data.resume.action})` : ''}`],
      };
    case 'mesh.completed':
      return { ...state, status: 'completed' };
    case 'mesh.stopped':
      return {
        ...state,
        status: 'stopped',
        packet_id: event.data.packet.packet_id,
        stop: event.data.packet,
        refused: event.data.refused !== undefined ? { result_id: event.data.result_id, ...event.data.refused } : null,
        stopped_by: event.data.refused === undefined ? { result_id: event.data.result_id, agent: event.data.packet.agent } : null,
      };
    case 'mesh.notice_emitted':
      return { ...state, notices: state.notices + 1 };
    case 'mesh.stop_answered': {
      const d = event.data;
      const stop = state.stop !== null && state.stop.packet_id === d.packet_id ? markAnswered(state.stop, d.answer) : state.stop;
      // Every answer but a stop (deny, acknowledge) hands the mesh on: the cap raised, or the
      // agent that stopped it resumed (approved, its cap raised) or another named (intent).
      const resumes = d.effect.kind !== 'stop';
      return {
        ...state,
        status: resumes ? 'running' : state.status,
        mesh: { ...state.mesh, max_iterations: d.max_iterations },
        stop,
        refused: resumes ? null : state.refused,
        stopped_by: resumes ? null : state.stopped_by,
        answered: [...state.answered, d.answer_id],
      };
    }
    case 'mesh.terminated':
      return { ...state, status: 'terminated' };
    case 'mesh.turn_rejected':
      return isAnswerRefusal(event.data)
        ? { ...state, answered: [...state.answered, event.data.result_id] }
        : { ...state, applied: [...state.applied, event.data.result_id] };
    default:
      return assertNever(event, 'mesh event');
  }
}
