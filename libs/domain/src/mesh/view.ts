import type { MeshEvent, MeshHandedOff, MeshHandover, MeshIgnoreReason, MeshOutput, MeshStatus, NoticeRecipient, StopWhy } from '@baton/contracts';
import { evolveMesh, initialMeshState, type MeshState } from './state';

/**
 * What an operator reads about a mesh run (issue 14): its turns, the handoffs taken, the calls
 * ignored and why, the cap, and the outcome. A pure fold of the mesh aggregate's events (the
 * notifier and `baton mesh` read them from the events stream; no projection holds meshes).
 */
export interface MeshView {
  mesh_run_id: string;
  project: string;
  /** The mesh as pinned at start, with the cap in force now. */
  mesh: { name: string; entry: string; outputs: string[]; handoffs: Record<string, string[]> };
  status: MeshStatus;
  /** The agent whose turn comes next (the last to speak once the mesh ended). */
  speaker: string;
  /** The handoff the next speaker is offered with. */
  handoff_id: string;
  input: string | null;
  started_by: string | null;
  /** Who a stop notifies. */
  notify: NoticeRecipient | null;
  started_at: string;
  /** Every turn recorded, oldest first, with the handoff calls it made. */
  turns: MeshViewTurn[];
  /** Each handoff taken, oldest first. */
  handoffs: MeshViewHandoff[];
  /** Each handoff call ignored, with why (`unknown_tool`: it names no agent of the mesh; `not_granted`: an agent this speaker may not reach). */
  ignored: MeshViewIgnored[];
  /** Turns (and operator answers) the mesh refused, with the code. */
  rejected: MeshViewRejected[];
  /** The iteration cap: the limit now, the turns used, and each raise an operator answered. */
  cap: { max_iterations: number; initial: number; used: number; raised: MeshViewCapRaise[] };
  /** The latest stop (the cap refusing a handoff), open or answered; null when it never stopped. */
  stop: MeshViewStop | null;
  /** How it ended, or `running`. */
  outcome: MeshViewOutcome;
  /** Human action notices emitted (one per stop). */
  notices: number;
  /** Time and stream sequence of the last event folded. */
  updated_at: string;
  last_seq: number;
}

export interface MeshViewTurn {
  turn: number;
  agent: string;
  result_id: string;
  /** What the agent said (its turn's text). */
  text: string;
  /** The handoff tools it called, in call order. */
  calls: string[];
  /** The handoff the turn answered. */
  handoff_id: string | null;
  /** Set when the turn stopped the mesh itself (its agent's own stop): its calls were not followed. */
  stopped?: { why: StopWhy; packet_id: string };
  at: string;
}

export interface MeshViewHandoff {
  /** The turn the target speaks at. */
  turn: number;
  from: string;
  to: string;
  tool: string;
  /** The handoff the target is offered with. */
  handoff_id: string;
  /** The turn (result id) that asked for it, or the operator answer (answer id) that let it through after the cap refused it. */
  cause: string;
  /** True when an operator's raise of the cap made it (the handoff the cap had refused). */
  after_cap_raise: boolean;
  /** What the agent handing off wrote for the target (the call's `reason` / `message`), when it wrote it. */
  handover?: MeshHandover;
  /** Set when an operator's answer to an agent's own stop made it: the answer and what it hands on. */
  resume?: MeshHandedOff['resume'];
  at: string;
}

export interface MeshViewIgnored {
  /** The turn that made the call (null when unknown). */
  turn: number | null;
  agent: string;
  tool: string;
  /** The mesh agent the tool names, when it names one. */
  target: string | null;
  reason: MeshIgnoreReason;
  detail: string;
  at: string;
}

export interface MeshViewRejected {
  result_id: string;
  agent: string;
  code: string;
  message: string;
  at: string;
}

export interface MeshViewCapRaise {
  from: number;
  to: number;
  by: string;
  answer_id: string;
  at: string;
}

export interface MeshViewStop {
  packet_id: string;
  why: StopWhy;
  detail: string | null;
  /** `open` until an operator answers it. */
  status: string;
  /** The handoff the cap refused. */
  refused: { from: string; to: string; tool: string } | null;
  stopped_at: string;
  answer: { action: string; by: string; at: string; effect: string } | null;
}

export type MeshViewOutcome =
  | { status: 'running' }
  | { status: 'completed'; by: string; turns: number; output: MeshOutput | null; at: string }
  /** `why` the stop packet's; `at_cap` when the cap refused a handoff (else the speaking agent's own stop, or one from outside). */
  | { status: 'stopped'; packet_id: string; why: StopWhy; at_cap: boolean; at: string }
  | { status: 'terminated'; reason: string; answer_id: string; at: string };

/** One event of the mesh aggregate as the view folds it: the domain event and where it is in the stream. */
export interface MeshViewEvent {
  seq: number;
  occurredAt: string;
  type: string;
  payload: unknown;
}

/**
 * Fold a mesh's events (in stream order) into its view; null before `mesh.started`. Throws only
 * on an event the mesh fold cannot take (a corrupt stream), as `evolveMesh` does.
 */
export function meshViewOf(events: readonly MeshViewEvent[]): MeshView | null {
  let state: MeshState = initialMeshState();
  let view: MeshView | null = null;
  const turnOf = new Map<string, number>();
  /** The answer that raised the cap, until the handoff it let through follows. */
  let raisedBy: string | null = null;
  for (const stored of events) {
    const event = { type: stored.type, data: stored.payload } as MeshEvent;
    state = evolveMesh(state, event);
    if (state.status === 'none') continue;
    if (event.type === 'mesh.started') {
      const d = event.data;
      view = {
        mesh_run_id: d.mesh_run_id,
        project: d.project,
        mesh: {
          name: d.mesh.name,
          entry: d.mesh.entry,
          outputs: [...d.mesh.outputs],
          handoffs: Object.fromEntries(Object.entries(d.mesh.handoffs).map(([from, to]) => [from, [...to]])),
        },
        status: state.status,
        speaker: state.speaker,
        handoff_id: state.handoff_id,
        input: d.input,
        started_by: d.started_by,
        notify: d.notify ?? null,
        started_at: d.started_at,
        turns: [],
        handoffs: [],
        ignored: [],
        rejected: [],
        cap: { max_iterations: d.mesh.max_iterations, initial: d.mesh.max_iterations, used: 0, raised: [] },
        stop: null,
        outcome: { status: 'running' },
        notices: 0,
        updated_at: stored.occurredAt,
        last_seq: stored.seq,
      };
      continue;
    }
    if (view === null) continue;
    switch (event.type) {
      case 'mesh.turn_recorded': {
        const d = event.data;
        turnOf.set(d.result_id, d.turn);
        view.turns.push({
          turn: d.turn,
          agent: d.agent,
          result_id: d.result_id,
          text: d.text,
          calls: d.handoff_tool_calls.map((c) => c.tool),
          handoff_id: d.handoff_id,
          at: d.recorded_at,
        });
        break;
      }
      case 'mesh.handoff_ignored': {
        const d = event.data;
        view.ignored.push({
          turn: turnOf.get(d.result_id) ?? null,
          agent: d.agent,
          tool: d.tool,
          target: d.target,
          reason: d.reason,
          detail: d.detail,
          at: d.ignored_at,
        });
        break;
      }
      case 'mesh.handed_off': {
        const d = event.data;
        view.handoffs.push({
          turn: d.turn,
          from: d.from,
          to: d.to,
          tool: d.tool,
          handoff_id: d.handoff_id,
          cause: d.resume?.answer_id ?? raisedBy ?? d.result_id,
          after_cap_raise: raisedBy !== null,
          ...(d.handover !== undefined ? { handover: { ...d.handover } } : {}),
          ...(d.resume !== undefined ? { resume: structuredClone(d.resume) } : {}),
          at: d.handed_off_at,
        });
        raisedBy = null;
        break;
      }
      case 'mesh.completed': {
        const d = event.data;
        view.outcome = { status: 'completed', by: d.agent, turns: d.turns, output: d.output, at: d.completed_at };
        break;
      }
      case 'mesh.stopped': {
        const d = event.data;
        if (d.refused === undefined) {
          const turn = [...view.turns].reverse().find((t) => t.result_id === d.result_id);
          if (turn !== undefined) turn.stopped = { why: d.packet.why, packet_id: d.packet.packet_id };
        }
        view.stop = {
          packet_id: d.packet.packet_id,
          why: d.packet.why,
          detail: d.packet.detail ?? null,
          status: d.packet.status,
          refused: d.refused !== undefined ? { from: d.refused.from, to: d.refused.to, tool: d.refused.tool } : null,
          stopped_at: d.stopped_at,
          answer: null,
        };
        view.outcome = { status: 'stopped', packet_id: d.packet.packet_id, why: d.packet.why, at_cap: d.refused !== undefined, at: d.stopped_at };
        break;
      }
      case 'mesh.stop_answered': {
        const d = event.data;
        const before = view.cap.max_iterations;
        // The mesh's own cap is raised only on a packet the cap opened; a raise answering an agent's
        // own budget stop hands that agent its cap (on the handoff) and leaves the mesh's alone.
        const capStop = view.stop !== null && view.stop.packet_id === d.packet_id && view.stop.refused !== null;
        if (d.effect.kind === 'raise_cap' && capStop) {
          raisedBy = d.answer_id;
          view.cap.raised.push({ from: before, to: d.max_iterations, by: d.answered_by, answer_id: d.answer_id, at: d.answered_at });
        }
        if (d.effect.kind !== 'stop') view.outcome = { status: 'running' };
        if (view.stop !== null && view.stop.packet_id === d.packet_id) {
          view.stop = { ...view.stop, status: 'answered', answer: { action: d.answer.action, by: d.answered_by, at: d.answered_at, effect: d.effect.kind } };
        }
        break;
      }
      case 'mesh.terminated': {
        const d = event.data;
        view.outcome = { status: 'terminated', reason: d.reason, answer_id: d.answer_id, at: d.terminated_at };
        break;
      }
      case 'mesh.turn_rejected': {
        const d = event.data;
        view.rejected.push({ result_id: d.result_id, agent: d.agent, code: d.code, message: d.message, at: d.rejected_at });
        break;
      }
      case 'mesh.notice_emitted':
        break;
      default:
        break;
    }
    view.status = state.status;
    view.speaker = state.speaker;
    view.handoff_id = state.handoff_id;
    view.cap.max_iterations = state.mesh.max_iterations;
    view.cap.used = state.turns;
    view.notices = state.notices;
    view.updated_at = stored.occurredAt;
    view.last_seq = stored.seq;
  }
  return view;
}

/** One sentence per mesh event, for the mesh's timeline. */
export function summarizeMeshEvent(event: MeshEvent): string {
  switch (event.type) {
    case 'mesh.started':
      return `started mesh ${event.data.mesh.name} (entry ${event.data.mesh.entry}, cap ${event.data.mesh.max_iterations} turns)${event.data.started_by ? ` by @${event.data.started_by}` : ''}`;
    case 'mesh.turn_recorded':
      return `turn ${event.data.turn}: ${event.data.agent}${event.data.handoff_tool_calls.length > 0 ? ` called ${event.data.handoff_tool_calls.map((c) => c.tool).join(', ')}` : ' made no handoff call'}`;
    case 'mesh.handoff_ignored':
      return `ignored ${event.data.agent}'s call ${event.data.tool} (${event.data.reason}): ${event.data.detail}`;
    case 'mesh.handed_off':
      return event.data.resume !== undefined
        ? `${event.data.from === event.data.to ? `handed back to ${event.data.to}` : `handed off ${event.data.from} → ${event.data.to}`} on answer ${event.data.resume.answer_id} (${event.data.resume.action})${event.data.resume.approved_call ? `: ${event.data.resume.approved_call.name} approved` : ''}${event.data.resume.raised_cap !== undefined ? `: cap raised to ${event.data.resume.raised_cap}` : ''}; turn ${event.data.turn} on handoff ${event.data.handoff_id}`
        : `handed off ${event.data.from} → ${event.data.to} (${event.data.tool}); turn ${event.data.turn} on handoff ${event.data.handoff_id}`;
    case 'mesh.completed':
      return `completed after ${turnCount(event.data.turns)} by ${event.data.agent}${event.data.output ? `; output from ${event.data.output.agent} (turn ${event.data.output.turn})` : '; no output agent spoke'}`;
    case 'mesh.stopped':
      return event.data.refused !== undefined
        ? `stopped (${event.data.packet.why}) at its cap of ${turnCount(event.data.max_iterations)}: ${event.data.refused.from} → ${event.data.refused.to} refused; packet ${event.data.packet.packet_id}`
        : `stopped (${event.data.packet.why}) by ${event.data.packet.agent}'s turn ${event.data.turns}${event.data.packet.detail ? `: ${event.data.packet.detail}` : ''}; packet ${event.data.packet.packet_id}${
            event.data.on_behalf_of !== undefined ? `; asked by the admin for ${event.data.on_behalf_of}` : ''
          }`;
    case 'mesh.turn_rejected':
      return `turn ${event.data.result_id} from ${event.data.agent} rejected (${event.data.code}): ${event.data.message}`;
    case 'mesh.notice_emitted':
      return `notice ${event.data.notice.notice_id} (${event.data.notice.reason}) to @${event.data.notice.recipient.handle}`;
    case 'mesh.stop_answered':
      return `packet ${event.data.packet_id} answered by ${event.data.answered_by}: ${event.data.answer.action} (${event.data.effect.kind}); cap ${event.data.max_iterations}`;
    case 'mesh.terminated':
      return `terminated (${event.data.origin}): ${event.data.reason}`;
    default: {
      const never: never = event;
      return `event ${(never as { type: string }).type}`;
    }
  }
}

/** "1 turn", "3 turns": a mesh's turn count in a sentence. */
export function turnCount(turns: number): string {
  return `${turns} turn${turns === 1 ? '' : 's'}`;
}

/** A handover in one line, for a table: `reason: …; message: …` (empty when there is none). */
export function handoverText(handover: MeshHandover | undefined): string {
  if (handover === undefined) return '';
  return [handover.reason !== undefined ? `reason: ${handover.reason}` : null, handover.message !== undefined ? `message: ${handover.message}` : null]
    .filter((part): part is string => part !== null)
    .join('; ');
}
