import type { CreateHandoffCommandSchema, MeshEventSchemas, MeshHandedOff, MeshHandover } from '@baton/contracts';
import { clipText as clip, codePointLength, grantedTargets, handoffToolName } from '@baton/contracts';
import type { MeshRunState } from '@baton/domain';
import type { z } from 'zod';
import { ROUTER_ACTOR } from '../shared/ids';

export type MeshStarted = z.infer<(typeof MeshEventSchemas)['mesh.started']>;
export type { MeshHandedOff };
export type MeshTurnRecorded = z.infer<(typeof MeshEventSchemas)['mesh.turn_recorded']>;
type CreateHandoffBody = z.input<typeof CreateHandoffCommandSchema>;

/** The most recent turns a handoff's context carries (older ones: read the mesh's events). */
export const MESH_CONTEXT_TURNS = 20;
/** Longest turn text copied into a handoff's context. */
export const MESH_CONTEXT_TEXT_CHARS = 4_000;
/**
 * Most bytes (UTF-8 JSON) of the user's input a handoff's context carries: a start's input (up to
 * 128 Ki characters) goes whole when it fits, else its first part with `input_clipped` saying so.
 */
export const MESH_INPUT_BYTES = 96 * 1024;
/**
 * Most bytes (UTF-8 JSON) of a turn's `context.mesh`: the latest turns it carries are as many as
 * fit beside the input, the handover and the tools, so the create request and the offer stay well
 * within the 256 KiB a message may be (20 turns of 4 000 characters are up to 240 KB alone).
 */
export const MESH_CONTEXT_BYTES = 192 * 1024;

/** A text's size as it travels: its JSON string, UTF-8. */
function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value));
}

/** `text` whole when its JSON fits in `budget` bytes, else its longest beginning that does (with `…`). */
function clipToBytes(text: string, budget: number): { text: string; clipped: boolean } {
  if (jsonBytes(text) <= budget) return { text, clipped: false };
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (jsonBytes(`${text.slice(0, mid)}…`) <= budget) lo = mid;
    else hi = mid - 1;
  }
  // Never cut a surrogate pair in two.
  const end = lo > 0 && /[\ud800-\udbff]/.test(text[lo - 1]!) ? lo - 1 : lo;
  return { text: `${text.slice(0, end)}…`, clipped: true };
}

/** What a mesh turn's handoff is built from: the mesh as it stood, and who speaks next. */
export interface MeshTurnOffer {
  project: string;
  /** The mesh event's id: the ledger create's idempotency key. */
  eventId: string;
  state: MeshRunState;
  handoffId: string;
  to: string;
  from: string | null;
  turn: number;
  tool: string | null;
  /** What the agent handing off wrote for this one (the call's `reason` / `message`), when it wrote it. */
  handover?: MeshHandover;
  /** An operator's answer to an agent's own stop that made this turn, and what it hands on. */
  resume?: MeshHandedOff['resume'];
}

/**
 * The ledger `create` for a mesh turn (`mesh.started` → the entry agent, `mesh.handed_off` →
 * the target): a `task` handoff addressed to the next speaker, with the mesh run as its
 * `workflow_run_id`, and a context holding what the agent needs to take its turn: the mesh and
 * turn, what the agent handing off wrote for it (`handover`), the user's input, the latest turns of
 * the conversation, and the handoff tools it may call.
 * Idempotent by the event id (the handoff id is derived from the cause). Pure.
 */
export function meshHandoffRequest(offer: MeshTurnOffer): CreateHandoffBody {
  const { state } = offer;
  const input = state.input === null ? null : clipToBytes(state.input, MESH_INPUT_BYTES);
  const mesh = {
    name: state.mesh.name,
    mesh_run_id: state.mesh_run_id,
    turn: offer.turn,
    max_iterations: state.mesh.max_iterations,
    from: offer.from,
    tool: offer.tool,
    ...(offer.handover !== undefined ? { handover: offer.handover } : {}),
    input: input?.text ?? null,
    // The input was longer than a context carries: how long it was (the mesh view shows it whole).
    ...(input?.clipped ? { input_clipped: { chars: codePointLength(state.input!) } } : {}),
    handoff_tools: grantedTargets(state.mesh, offer.to).map((target) => ({ name: handoffToolName(target), target })),
    report_subject_kind: 'mesh_result',
  };
  // The latest turns, newest kept first, as many as fit beside the rest.
  let budget = MESH_CONTEXT_BYTES - jsonBytes(mesh);
  const transcript: Array<{ turn: number; agent: string; text: string }> = [];
  for (const t of state.transcript.slice(-MESH_CONTEXT_TURNS).reverse()) {
    const entry = { turn: t.turn, agent: t.agent, text: clip(t.text, MESH_CONTEXT_TEXT_CHARS) };
    budget -= jsonBytes(entry) + 1;
    if (budget < 0) break;
    transcript.unshift(entry);
  }
  const { handoff_tools, report_subject_kind, ...withoutTail } = mesh;
  return {
    handoff_id: offer.handoffId,
    project: offer.project,
    kind: 'task',
    from_agent: offer.from ?? ROUTER_ACTOR,
    to_agent: offer.to,
    summary: clip(
      `mesh '${state.mesh.name}' ${state.mesh_run_id}: turn ${offer.turn} for ${offer.to}${offer.resume !== undefined ? ` (an operator's answer: ${offer.resume.action})` : offer.from ? ` (handed off by ${offer.from} via ${offer.tool})` : ' (entry)'}`,
    ),
    context: {
      // Keys in the order they always had (a create retried across a router upgrade keeps its digest).
      mesh: {
        ...withoutTail,
        transcript,
        transcript_omitted: Math.max(0, state.transcript.length - transcript.length),
        handoff_tools,
        report_subject_kind,
      },
      // As a workflow run's handoff carries them (docs/stop-packets.md rule 9): the frozen call a
      // person approved, a raised cap, or the frozen call handed on, not approved.
      ...(offer.resume?.approved_call !== undefined ? { approved_call: offer.resume.approved_call } : {}),
      ...(offer.resume?.raised_cap !== undefined ? { raised_cap: offer.resume.raised_cap } : {}),
      ...(offer.resume?.pending_call !== undefined ? { pending_call: offer.resume.pending_call } : {}),
    },
    workflow_run_id: state.mesh_run_id,
    idempotency_key: offer.eventId,
  };
}
