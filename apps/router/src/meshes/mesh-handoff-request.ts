import type { CreateHandoffCommandSchema, MeshEventSchemas, MeshHandover } from '@baton/contracts';
import { grantedTargets, handoffToolName, Limits } from '@baton/contracts';
import type { MeshRunState } from '@baton/domain';
import type { z } from 'zod';
import { ROUTER_ACTOR } from '../shared/ids';

export type MeshStarted = z.infer<(typeof MeshEventSchemas)['mesh.started']>;
export type MeshHandedOff = z.infer<(typeof MeshEventSchemas)['mesh.handed_off']>;
export type MeshTurnRecorded = z.infer<(typeof MeshEventSchemas)['mesh.turn_recorded']>;
type CreateHandoffBody = z.input<typeof CreateHandoffCommandSchema>;

/** The most recent turns a handoff's context carries (older ones: read the mesh's events). */
export const MESH_CONTEXT_TURNS = 20;
/** Longest turn text copied into a handoff's context. */
export const MESH_CONTEXT_TEXT_CHARS = 4_000;

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
  const transcript = state.transcript.slice(-MESH_CONTEXT_TURNS).map((t) => ({ turn: t.turn, agent: t.agent, text: clip(t.text, MESH_CONTEXT_TEXT_CHARS) }));
  return {
    handoff_id: offer.handoffId,
    project: offer.project,
    kind: 'task',
    from_agent: offer.from ?? ROUTER_ACTOR,
    to_agent: offer.to,
    summary: clip(
      `mesh '${state.mesh.name}' ${state.mesh_run_id}: turn ${offer.turn} for ${offer.to}${offer.from ? ` (handed off by ${offer.from} via ${offer.tool})` : ' (entry)'}`,
    ),
    context: {
      mesh: {
        name: state.mesh.name,
        mesh_run_id: state.mesh_run_id,
        turn: offer.turn,
        max_iterations: state.mesh.max_iterations,
        from: offer.from,
        tool: offer.tool,
        ...(offer.handover !== undefined ? { handover: offer.handover } : {}),
        input: state.input === null ? null : clip(state.input, Limits.maxShortText),
        transcript,
        transcript_omitted: Math.max(0, state.transcript.length - transcript.length),
        handoff_tools: grantedTargets(state.mesh, offer.to).map((target) => ({ name: handoffToolName(target), target })),
        report_subject_kind: 'mesh_result',
      },
    },
    workflow_run_id: state.mesh_run_id,
    idempotency_key: offer.eventId,
  };
}

function clip(text: string, max: number = Limits.maxShortText): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
