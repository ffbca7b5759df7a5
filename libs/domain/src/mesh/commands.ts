import type { AgentResult, Evidence, HandoffToolCall, MeshDefinition, OperatorAnswer, StopCap, StopWhy } from '@baton/contracts';
import type { HandoffClaimView } from '../claims';
import type { ResumeActorRole } from '../stop';

/** Time and actor of a mesh command (read at the edge, never in the domain). */
export interface MeshCommandMetadata {
  now: string;
  actor: string;
}

/**
 * Start a mesh run. `mesh` is the mesh as the project's current definition holds it and `agents`
 * the project's agent names (the build checks run again here, so a mesh that does not build never
 * starts).
 */
export interface StartMesh {
  type: 'start_mesh';
  data: {
    mesh_run_id: string;
    project: string;
    mesh: MeshDefinition;
    agents: readonly string[];
    input?: string;
    started_by?: string;
    /**
     * The project's lead when it is a person (not an agent): who a stop notifies when the mesh has
     * no `started_by`. A mesh with neither is refused (`no_notice_recipient`).
     */
    lead?: string;
    variables?: Record<string, unknown>;
  };
  metadata: MeshCommandMetadata;
}

/** Record one agent turn: its text and the handoff tool calls it made, in call order. */
export interface RecordMeshTurn {
  type: 'record_turn';
  data: {
    result_id: string;
    run_id: string;
    agent: string;
    text: string;
    handoff_tool_calls: readonly HandoffToolCall[];
    /** The result's evidence: kept on the turn, it decides the ledger's evidence floor when the turn closes its handoff. */
    evidence?: Evidence;
    /** The handoff the agent worked on (required: every mesh turn is offered as a handoff). */
    handoff_id?: string;
    /** The claim on that handoff the agent holds. */
    claim_id?: string;
    /** What the router read of that handoff just before deciding (null or absent: nothing read). */
    handoff?: HandoffClaimView | null;
    /** When the inbox stored the result (ISO): rule 4b accepts it under a claim that lapsed after that. */
    stored_at?: string;
    /**
     * This turn's `mesh.turn_recorded`, under the same claim, is stored already and the command is
     * being completed (a retry of an append cut short): the claim rule is not judged again (set only
     * by `meshDecider.resuming`).
     */
    claim_recorded?: true;
    /** The agent's stop signal (seed 003): the turn stops the mesh for a person with a packet, whatever calls it made. */
    stop?: AgentResult['stop'];
    /** What the agent tried (the packet's `tried`; the agent itself when it names nothing). */
    tried?: AgentResult['tried'];
    /** The call it had pending: frozen in the packet, never dropped. */
    pending_tool_call?: AgentResult['pending_tool_call'];
    /** The trace the turn travelled in: the packet links it. */
    trace_id?: string;
  };
  metadata: MeshCommandMetadata;
}

/**
 * An operator's answer to the mesh's stop packet. `actorRole` is set by the edge after it
 * authenticated the person (only `operator` / `admin` may resume a stop).
 */
export interface AnswerMeshStop {
  type: 'answer_stop';
  data: { answer: OperatorAnswer };
  metadata: MeshCommandMetadata & { actorRole: ResumeActorRole };
}

/**
 * A stop asked from outside the mesh: the watchdog's, when a turn's handoff escalated with nobody
 * to escalate to (a run's stop request whose id names a mesh run). Idempotent on `packet_id`; a
 * mesh that is no longer running is left as it is.
 */
export interface StopMesh {
  type: 'stop_mesh';
  data: {
    packet_id: string;
    why: StopWhy;
    tried?: readonly string[];
    trace_ids?: readonly string[];
    detail?: string;
    cap?: StopCap;
    /** The agent the stop is about when it is not the speaker: a circuit stop names the agent whose circuit opened. */
    agent?: string;
    /** The person the admin connection acts for (recorded on `mesh.stopped` beside the actor `admin`). */
    on_behalf_of?: string;
  };
  metadata: MeshCommandMetadata;
}

export type MeshCommand = StartMesh | RecordMeshTurn | AnswerMeshStop | StopMesh;
