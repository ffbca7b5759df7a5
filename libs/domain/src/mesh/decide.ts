import {
  Limits,
  MESH_CAP_MAX,
  meshParticipants,
  validateMesh,
  type MeshEvent,
  type MeshHandedOff,
  type MeshHandover,
  type NoticeRecipient,
  type StopCap,
  type StopPacket,
} from '@baton/contracts';
import { checkResultClaim, recordsSameClaim, ResultClaimCode } from '../claims';
import { accept, assertNever, Decider, DecisionResult, reject } from '../decider';
import { ENGINE } from '../run/attribution';
import { deriveId, deriveScopedId, MeshHandoffPrefix } from '../run/ids';
import { buildHumanActionNotice } from '../notices';
import { buildStop, clip, decideResume, raiseCapForm } from '../stop';
import { deepFreeze } from '../stop/freeze';
import { resolveHandoffCall } from './build';
import { turnCount } from './view';
import type { AnswerMeshStop, MeshCommand, RecordMeshTurn, StartMesh, StopMesh } from './commands';
import { evolveMesh, initialMeshState, isOutputAgent, type MeshRunState, type MeshState } from './state';

/** Stable codes of the mesh decider's refusals (and of recorded `mesh.turn_rejected` events). */
export const MeshErrorCode = {
  meshNotFound: 'mesh_not_found',
  meshInvalid: 'mesh_invalid',
  meshAlreadyStarted: 'mesh_already_started',
  meshNotRunning: 'mesh_not_running',
  unexpectedAgent: 'unexpected_agent',
  staleHandoff: ResultClaimCode.staleHandoff,
  /** A turn that names no handoff_id or no claim_id (every turn is offered as a claimed handoff). */
  claimRequired: ResultClaimCode.claimRequired,
  /** The turn's handoff is not claimed now. */
  handoffNotClaimed: ResultClaimCode.handoffNotClaimed,
  /** The handoff's current claim is another one, or another agent's. */
  claimMismatch: ResultClaimCode.claimMismatch,
  noNoticeRecipient: 'no_notice_recipient',
  meshNotStopped: 'mesh_not_stopped',
  /** An intent answer to an agent's stop names no agent of the mesh. */
  resumeTargetUnknown: 'resume_target_unknown',
} as const;
export type MeshErrorCode = (typeof MeshErrorCode)[keyof typeof MeshErrorCode];

/** The handoff the entry agent's first turn is offered with (`mh-s-<mesh_run_id>`). */
export const meshEntryHandoffId = (meshRunId: string): string => deriveId(MeshHandoffPrefix.entry, meshRunId);
/**
 * The handoff a turn's handoff call opens for the next speaker (`mh-r-<mesh_run_id>:<result_id>`):
 * a turn's result id need be unique only within its mesh run.
 */
export const meshHandoffId = (meshRunId: string, resultId: string): string => deriveScopedId(MeshHandoffPrefix.turn, meshRunId, resultId);
/**
 * The stop packet a turn opens when the iteration cap refuses its handoff
 * (`stop-mt-<mesh_run_id>:<result_id>`). Not `stop-m-`: a workflow run's stop caused by a customer
 * message is `stop-m-…` (`stopIdFor`), and the two would be one packet in the projections when a
 * mesh run and a workflow run of one project share an id (meshes stopped before keep their ids).
 */
export const meshStopId = (meshRunId: string, resultId: string): string => deriveScopedId('stop-mt', meshRunId, resultId);
/** The one human action notice of the stop a turn opened (`nt-mt-<mesh_run_id>:<result_id>`; `nt-m-` is a run's message-caused notice). */
export const meshNoticeId = (meshRunId: string, resultId: string): string => deriveScopedId('nt-mt', meshRunId, resultId);
/** The handoff a `raise_cap` answer offers the next speaker with (`mh-a-<mesh_run_id>:<answer_id>`). */
export const meshResumeHandoffId = (meshRunId: string, answerId: string): string => deriveScopedId(MeshHandoffPrefix.answer, meshRunId, answerId);
/** The agent name refused operator answers are recorded under (`mesh.turn_rejected`). */
export const MESH_ANSWER_AGENT = 'operator';
/** The `tool` of a handoff an operator's answer to an agent's own stop made (`mesh.handed_off.resume`). */
export const OPERATOR_ANSWER_TOOL = 'operator_answer';

/**
 * Who a mesh's stops notify (seed 000 §5): the person who started it, else the project's lead
 * when the lead is a person; null when neither is known (such a mesh is refused).
 */
export function meshNoticeRecipient(startedBy: string | undefined, lead: string | undefined): NoticeRecipient | null {
  if (startedBy !== undefined) return { handle: startedBy, source: 'started_by' };
  if (lead !== undefined) return { handle: lead, source: 'project_lead' };
  return null;
}

/**
 * Decide a mesh command. The router is the aggregate's only writer. Never throws for a business
 * reason.
 *
 * - `start_mesh`: the mesh must build against the project's agents (`mesh_invalid` with the
 *   diagnostics otherwise); `mesh.started` pins the definition and names the entry handoff.
 *   Starting the same mesh run again decides nothing.
 * - `record_turn` (idempotent per `result_id`): a turn from an agent other than the expected
 *   speaker, one that breaks the claim rule (`checkResultClaim`: it must name the current turn's
 *   handoff and the claim the speaker holds on it), or after the mesh ended is recorded as
 *   `mesh.turn_rejected`.
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
    case 'answer_stop':
      return answerStop(command, state);
    case 'stop_mesh':
      return stopMesh(command, state);
    default:
      return assertNever(command, 'mesh command');
  }
}

function startMesh(command: StartMesh, state: MeshState): DecisionResult<MeshEvent> {
  const d = command.data;
  if (state.status !== 'none') {
    // The same start again changes nothing; another mesh, input or starter under a taken id is
    // another mesh run, refused rather than silently taken for this one.
    const same =
      state.mesh_run_id === d.mesh_run_id &&
      state.mesh.name === d.mesh.name &&
      state.input === (d.input ?? null) &&
      state.started_by === (d.started_by ?? null);
    return same
      ? accept()
      : reject(
          'wrong_state',
          MeshErrorCode.meshAlreadyStarted,
          `mesh run ${d.mesh_run_id} already exists (mesh '${state.mesh.name}'); a new mesh run needs a new mesh_run_id`,
          {
            mesh: state.mesh.name,
          },
        );
  }
  const diagnostics = validateMesh(d.mesh, d.agents);
  if (diagnostics.length > 0) {
    // The error's code is the first check that failed (MESH_SELF_HANDOFF, MESH_TOOL_NAME_COLLISION…):
    // a client reads it without parsing the message; every diagnostic is in the details.
    const first = diagnostics[0]!;
    return reject('invalid', first.code, diagnostics.map((x) => `${x.code}: ${x.message}`).join('; '), { diagnostics, category: MeshErrorCode.meshInvalid });
  }
  const notify = meshNoticeRecipient(d.started_by, d.lead);
  if (notify === null) {
    return reject('invalid', MeshErrorCode.noNoticeRecipient, 'a mesh needs started_by or a project lead who is a person: its stop notifies one of them');
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
      notify,
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
    accept({ type: 'mesh.turn_rejected', data: { result_id: d.result_id, agent: d.agent, code, message, rejected_at: now, of: 'turn' } });
  if (state.status !== 'running') return refuse(MeshErrorCode.meshNotRunning, `mesh run ${state.mesh_run_id} is ${state.status}`);
  if (d.agent !== state.speaker) return refuse(MeshErrorCode.unexpectedAgent, `it is ${state.speaker}'s turn, not ${d.agent}'s`);
  const claim = d.claim_recorded === true ? null : checkResultClaim(state.handoff_id, d, d.handoff);
  if (claim !== null) return refuse(claim.code, claim.message);

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
        ...(state.handoff_id !== null && d.claim_id !== undefined ? { claim_id: d.claim_id } : {}),
        ...(d.evidence !== undefined ? { evidence: d.evidence } : {}),
        recorded_at: now,
      },
    },
  ];
  let chosen: Chosen | null = null;
  for (const call of d.handoff_tool_calls) {
    const resolved = resolveHandoffCall(state.mesh, d.agent, call.tool);
    if (resolved.kind === 'handoff') {
      const handover = handoverOf(call.arguments);
      chosen = {
        target: resolved.target,
        tool: call.tool,
        ...(call.call_id !== undefined ? { call_id: call.call_id } : {}),
        ...(handover !== undefined ? { handover } : {}),
      };
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

  if (d.stop !== undefined) {
    // The agent stops for a person (seed 003): the turn is recorded, its calls are not followed,
    // and the mesh waits for an operator's answer with the agent's packet.
    const stop = agentStopped(state, command, turn);
    events.push(stop);
    const notice = stopNotice(state, stop, d.text, now);
    if (notice !== null) events.push(notice);
    return accept(...events);
  }
  if (chosen === null) {
    const output = isOutputAgent(state.mesh, d.agent) ? { agent: d.agent, turn, result_id: d.result_id, text: d.text } : state.output;
    events.push({ type: 'mesh.completed', data: { result_id: d.result_id, agent: d.agent, turns: turn, output, completed_at: now } });
    return accept(...events);
  }
  if (turn >= state.mesh.max_iterations) {
    // The cap is Baton's rule, not the agent's choice: the stop and its notice speak for the router
    // (origin `engine_fallback`), as a run's engine decisions do; the turn stays the agent's.
    const stop: MeshEvent = { ...stopped(state, command, turn, chosen), by: ENGINE };
    events.push(stop);
    const notice = stopNotice(state, stop, d.text, now);
    if (notice !== null) events.push({ ...notice, by: ENGINE });
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
      handoff_id: meshHandoffId(state.mesh_run_id, d.result_id),
      turn: turn + 1,
      ...(chosen.handover !== undefined ? { handover: chosen.handover } : {}),
      handed_off_at: now,
    },
  });
  return accept(...events);
}

/** The handoff call a turn's result chose: the last valid one. */
interface Chosen {
  target: string;
  tool: string;
  call_id?: string;
  handover?: MeshHandover;
}

/**
 * What a handoff call wrote for the next agent: its `reason` and `message` arguments when they are
 * non-blank text (clipped to short text); anything else in the arguments is the turn's record only.
 */
function handoverOf(args: Readonly<Record<string, unknown>> | undefined): MeshHandover | undefined {
  if (args === undefined) return undefined;
  const text = (name: 'reason' | 'message'): string | undefined => {
    const value = Object.prototype.hasOwnProperty.call(args, name) ? args[name] : undefined;
    return typeof value === 'string' && value.trim() !== '' ? clip(value, Limits.maxShortText) : undefined;
  };
  const reason = text('reason');
  const message = text('message');
  if (reason === undefined && message === undefined) return undefined;
  return { ...(reason !== undefined ? { reason } : {}), ...(message !== undefined ? { message } : {}) };
}

/** Whether `agent` has had a turn of this mesh (the entry, or a target of a handoff taken). */
const spokeBefore = (state: MeshRunState, agent: string): boolean =>
  agent === state.mesh.entry || state.path.some((step) => step.split(' ')[0]!.endsWith(`→${agent}`));

/**
 * The stop an agent's own turn asks for (its result's `stop`): a packet with the agent's why,
 * detail and cap, what it tried (itself when it names nothing), the call it had pending frozen, and
 * the trace its turn came in; the form of its why (`buildStop`), an unknown intent offering the
 * mesh's agents. No handoff was refused, so `refused` is absent.
 */
function agentStopped(state: MeshRunState, command: RecordMeshTurn, turn: number): MeshEvent {
  const d = command.data;
  const signal = d.stop!;
  const { packet } = buildStop({
    packet_id: meshStopId(state.mesh_run_id, d.result_id),
    now: command.metadata.now,
    why: signal.why,
    tried: d.tried !== undefined && d.tried.length > 0 ? d.tried : [d.agent],
    ...(d.trace_id !== undefined ? { trace_ids: [d.trace_id] } : {}),
    pending: d.pending_tool_call ?? null,
    ...(signal.detail !== undefined ? { detail: signal.detail } : {}),
    ...(signal.cap !== undefined ? { cap: { ...signal.cap } } : {}),
    ...(signal.why === 'unknown_intent' ? { intents: meshParticipants(state.mesh) } : {}),
    run_id: state.mesh_run_id,
    workflow_run_id: state.mesh_run_id,
    project: state.project,
    agent: d.agent,
    step: state.mesh.name,
  });
  return {
    type: 'mesh.stopped',
    data: { packet: inMesh(packet), result_id: d.result_id, turns: turn, max_iterations: state.mesh.max_iterations, stopped_at: command.metadata.now },
  };
}

/**
 * A stop asked from outside (the watchdog: a turn's handoff escalated with nobody to take it): the
 * mesh stops with a packet on the agent whose turn it is, and one notice — the person must learn
 * that the mesh will not go on by itself. Applied once per packet; a mesh no longer running is left
 * as it is (its end, or the stop it is in, says what happened).
 */
function stopMesh(command: StopMesh, state: MeshState): DecisionResult<MeshEvent> {
  const d = command.data;
  const now = command.metadata.now;
  if (state.status === 'none') return reject('not_found', MeshErrorCode.meshNotFound, 'no such mesh run');
  if (state.stop?.packet_id === d.packet_id || state.status !== 'running') return accept();
  const { packet } = buildStop({
    packet_id: d.packet_id,
    now,
    why: d.why,
    tried: d.tried ?? [],
    pending: null,
    ...(d.trace_ids !== undefined ? { trace_ids: d.trace_ids } : {}),
    ...(d.detail !== undefined ? { detail: d.detail } : {}),
    ...(d.cap !== undefined ? { cap: { ...d.cap } } : {}),
    run_id: state.mesh_run_id,
    workflow_run_id: state.mesh_run_id,
    project: state.project,
    agent: d.agent ?? state.speaker,
    step: state.mesh.name,
  });
  const stopped: MeshEvent = {
    type: 'mesh.stopped',
    data: {
      packet: inMesh(packet),
      result_id: d.packet_id,
      turns: state.turns,
      max_iterations: state.mesh.max_iterations,
      stopped_at: now,
      ...(d.on_behalf_of !== undefined ? { on_behalf_of: d.on_behalf_of } : {}),
    },
  };
  const notice = stopNotice(state, stopped, null, now, `${state.speaker}'s turn cannot go on`);
  return notice === null ? accept(stopped) : accept(stopped, notice);
}

/**
 * The packet of an agent's own stop with its form worded for a mesh: the buttons are the same, but
 * what they do is the mesh's — approve hands the agent its call to make, an intent names the mesh
 * agent that takes the turn, and the ending buttons end the mesh, not a run.
 */
function inMesh(packet: StopPacket): StopPacket {
  const form = packet.next_form;
  if (!form) return packet;
  const agent = packet.agent;
  const callName = packet.pending ? clip(packet.pending.name, 200) : null;
  let prompt = form.prompt;
  let fields = form.fields;
  switch (form.kind) {
    case 'approve_deny':
      prompt = `The mesh stopped before ${agent} called ${callName ?? 'its tool'}. Approve hands the turn back to ${agent} with exactly this call to make, once; deny ends the mesh.`;
      break;
    case 'type_intent':
      prompt = `${agent} could not tell which agent should take this. Pick the mesh agent that takes the turn and press Route${callName ? ` (the call it was about to make, ${callName}, goes with it, not approved)` : ''}; Close ends the mesh.`;
      fields = fields.map((f) => (f.id === 'intent' ? { ...f, label: 'Mesh agent to take the turn' } : f));
      break;
    case 'raise_cap':
      prompt = `Only an operator raises a cap. Set a higher cap and the turn goes back to ${agent} with it${callName ? ` and the call it was making (${callName}, not approved)` : ''}; Stop ends the mesh.`;
      break;
    case 'acknowledge':
      prompt = 'Open the trace to see what happened, then acknowledge; the mesh ends there: a person has taken the work.';
      break;
    default:
      return packet;
  }
  return deepFreeze({ ...packet, next_form: { ...form, prompt: clip(prompt, Limits.maxShortText), fields } });
}

function stopped(state: MeshRunState, command: RecordMeshTurn, turn: number, chosen: Chosen): MeshEvent {
  const d = command.data;
  const { packet } = buildStop({
    packet_id: meshStopId(state.mesh_run_id, d.result_id),
    now: command.metadata.now,
    why: 'thrash',
    tried: [...state.path, `${d.agent}→${chosen.target} (refused: cap)`],
    pending: null,
    run_id: state.mesh_run_id,
    workflow_run_id: state.mesh_run_id,
    project: state.project,
    agent: d.agent,
    step: state.mesh.name,
    detail: `mesh '${state.mesh.name}' reached its cap of ${turnCount(state.mesh.max_iterations)}; ${d.agent} asked to hand off to ${chosen.target}${spokeBefore(state, chosen.target) ? ' again' : ''}`,
  });
  // The cap is the operator's to raise: the packet carries the cap and the raise_cap form
  // (Raise cap continues the mesh; Stop ends it) instead of buildStop's acknowledge-only form.
  const cap: StopCap = { name: 'max_iterations', limit: state.mesh.max_iterations, used: turn };
  const capped: StopPacket = deepFreeze({
    ...packet,
    cap,
    next_form: {
      ...raiseCapForm(cap, packet.detail, { atMost: MESH_CAP_MAX, whole: true }),
      title: `Mesh '${state.mesh.name}' reached its cap of ${turnCount(cap.limit)} — raise the cap or stop`,
    },
  });
  return {
    type: 'mesh.stopped',
    data: {
      packet: capped,
      result_id: d.result_id,
      turns: turn,
      max_iterations: state.mesh.max_iterations,
      refused: { from: d.agent, to: chosen.target, tool: chosen.tool, ...(chosen.handover !== undefined ? { handover: chosen.handover } : {}) },
      stopped_at: command.metadata.now,
    },
  };
}

/**
 * The one human action notice of a mesh stop (reason `stop`, the packet's id), to the person the
 * mesh recorded at its start. Null only for a mesh started before notices existed with no
 * `started_by` (nobody to mention).
 */
function stopNotice(state: MeshRunState, stop: MeshEvent, agentText: string | null, now: string, fallback?: string): MeshEvent | null {
  if (stop.type !== 'mesh.stopped') return null;
  const recipient = state.notify ?? (state.started_by !== null ? { handle: state.started_by, source: 'started_by' as const } : null);
  if (recipient === null) return null;
  const packet = stop.data.packet;
  const why = packet.detail ?? fallback ?? (stop.data.refused !== undefined ? 'the iteration cap was reached' : `${packet.agent} stopped for a person`);
  return {
    type: 'mesh.notice_emitted',
    data: {
      notice: buildHumanActionNotice({
        // The stop's cause: the turn that stopped it, or the packet of a stop from outside.
        noticeId: meshNoticeId(state.mesh_run_id, stop.data.result_id),
        project: state.project,
        workflowRunId: state.mesh_run_id,
        reason: 'stop',
        recipient,
        headline: `mesh '${state.mesh.name}' stopped (${packet.why}): ${why}`,
        agentText,
        step: state.mesh.name,
        agent: packet.agent,
        stopId: packet.packet_id,
        now,
      }),
    },
  };
}

/**
 * Apply an operator's answer to the mesh's stop packet. The stale / already-answered / role /
 * form checks are `decideResume`'s, exactly as for runs. Idempotent per `answer_id`. A refused
 * answer is recorded as `mesh.turn_rejected` (`result_id` = answer id, agent `operator`).
 *
 * - `raise_cap` (a whole number above the old cap, at most 1,000) → `mesh.stop_answered` with the
 *   new cap, then `mesh.handed_off` to the agent the refused handoff named (a new handoff
 *   `mh-a-<answer_id>`): the mesh carries on where the cap stopped it.
 * - `deny` / `acknowledge` (effect `stop`) → `mesh.stop_answered`, then `mesh.terminated`.
 */
function answerStop(command: AnswerMeshStop, state: MeshState): DecisionResult<MeshEvent> {
  const answer = command.data.answer;
  const now = command.metadata.now;
  if (state.status === 'none') return reject('not_found', MeshErrorCode.meshNotFound, 'no such mesh run');
  if (state.answered.includes(answer.answer_id)) return accept();
  const refuse = (code: string, message: string): DecisionResult<MeshEvent> =>
    accept({
      type: 'mesh.turn_rejected',
      data: {
        result_id: answer.answer_id,
        agent: MESH_ANSWER_AGENT,
        code,
        message: `answer ${answer.answer_id} by ${answer.answered_by}: ${message}`.slice(0, 500),
        rejected_at: now,
        of: 'answer',
      },
    });
  if (state.stop === null) return refuse(MeshErrorCode.meshNotStopped, `mesh run ${state.mesh_run_id} is ${state.status}; it has no stop packet`);
  const decided = decideResume(state.stop, answer, { now, actorRole: command.metadata.actorRole });
  if (!decided.ok) return refuse(decided.error.code, decided.error.message);
  const effect = decided.effect;
  const answered = (maxIterations: number): MeshEvent => ({
    type: 'mesh.stop_answered',
    data: {
      answer_id: answer.answer_id,
      answered_by: answer.answered_by,
      packet_id: state.stop!.packet_id,
      answer,
      effect,
      max_iterations: maxIterations,
      answered_at: now,
    },
  });
  // An agent's own stop: the answer hands the mesh on to that agent (approved, its cap raised) or to
  // the agent a person named (intent), or ends it (deny, acknowledge).
  if (state.stopped_by !== null && effect.kind !== 'stop') {
    const by = state.stopped_by;
    const frozen = state.stop!.pending;
    const resumeTo = (to: string, resume: NonNullable<MeshHandedOff['resume']>): DecisionResult<MeshEvent> =>
      accept(answered(state.mesh.max_iterations), {
        type: 'mesh.handed_off',
        data: {
          result_id: by.result_id,
          from: by.agent,
          to,
          tool: OPERATOR_ANSWER_TOOL,
          handoff_id: meshResumeHandoffId(state.mesh_run_id, answer.answer_id),
          turn: state.turns + 1,
          resume,
          handed_off_at: now,
        },
      });
    const base = { answer_id: answer.answer_id, action: answer.action };
    switch (effect.kind) {
      case 'run_pending_call':
        return resumeTo(by.agent, { ...base, approved_call: effect.call });
      case 'raise_cap':
        return resumeTo(by.agent, { ...base, raised_cap: effect.cap, ...(frozen !== null ? { pending_call: frozen } : {}) });
      case 'reroute': {
        if (!meshParticipants(state.mesh).includes(effect.intent)) {
          return refuse(
            MeshErrorCode.resumeTargetUnknown,
            `${effect.intent} is no agent of mesh '${state.mesh.name}' (its agents: ${meshParticipants(state.mesh).join(', ')})`,
          );
        }
        return resumeTo(effect.intent, { ...base, ...(frozen !== null ? { pending_call: frozen } : {}) });
      }
      case 'continue':
        return refuse('answer_not_allowed', `an agent's stop in a mesh is not answered with ${answer.action}`);
      default:
        return assertNever(effect, 'resume effect');
    }
  }
  switch (effect.kind) {
    case 'raise_cap': {
      const refused = state.refused;
      if (!Number.isInteger(effect.cap) || effect.cap > MESH_CAP_MAX)
        return refuse('answer_incomplete', `a mesh's cap is a whole number of turns, at most ${MESH_CAP_MAX}`);
      if (state.status !== 'stopped' || refused === null) return refuse(MeshErrorCode.meshNotStopped, `mesh run ${state.mesh_run_id} is ${state.status}`);
      return accept(answered(effect.cap), {
        type: 'mesh.handed_off',
        data: {
          result_id: refused.result_id,
          from: refused.from,
          to: refused.to,
          tool: refused.tool,
          handoff_id: meshResumeHandoffId(state.mesh_run_id, answer.answer_id),
          turn: state.turns + 1,
          ...(refused.handover !== undefined ? { handover: refused.handover } : {}),
          handed_off_at: now,
        },
      });
    }
    case 'stop':
      return accept(answered(state.mesh.max_iterations), {
        type: 'mesh.terminated',
        data: { reason: effect.reason, origin: 'operator', answer_id: answer.answer_id, terminated_at: now },
      });
    case 'continue':
    case 'reroute':
    case 'run_pending_call':
      return refuse('answer_not_allowed', `a mesh stop is answered with raise_cap, deny or acknowledge, not ${answer.action}`);
    default:
      return assertNever(effect, 'resume effect');
  }
}

/** The mesh aggregate as a decider (id = mesh_run_id; kind `mesh`). */
export const meshDecider: Decider<MeshCommand, MeshEvent, MeshState> = {
  decide: decideMesh,
  evolve: evolveMesh,
  initialState: initialMeshState,
  passive: (type) => PASSIVE_MESH_EVENTS.has(type),
  resuming: (command, stored) => {
    const first = stored[0];
    if (command.type !== 'record_turn' || first?.type !== 'mesh.turn_recorded' || !recordsSameClaim(first.data, command.data)) return command;
    return { ...command, data: { ...command.data, claim_recorded: true } };
  },
};

/**
 * What the mesh records without deciding anything for later commands: a refused turn or answer
 * (its id kept so it is not decided again) and a notice. A turn cut short between its appends
 * (`mesh.turn_recorded` stored, `mesh.handed_off` not) and retried after such a record is still
 * completed.
 */
const PASSIVE_MESH_EVENTS: ReadonlySet<string> = new Set<MeshEvent['type']>(['mesh.turn_rejected', 'mesh.notice_emitted']);
