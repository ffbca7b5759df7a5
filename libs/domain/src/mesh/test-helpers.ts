import type { Decider, DecisionResult } from '../decider';
import type { MeshCommand } from './commands';
import { decideMesh, meshDecider } from './decide';
import type { MeshEvent, MeshState } from './state';

/** Test helpers for the mesh aggregate (not exported from the library). */

/** The claim id tests give the speaker that holds handoff `handoffId`. */
export const meshClaimIdFor = (handoffId: string): string => `claim-${handoffId}`;

/**
 * A turn as the router sends it when the speaker claimed the current turn's handoff: the parts
 * the test left out (`handoff_id`, `claim_id`, the router's read of the handoff) are filled from
 * `state`, with the handoff claimed by the turn's agent. For tests about meshes, not about claims.
 */
export function withCurrentMeshClaim(command: MeshCommand, state: MeshState): MeshCommand {
  if (command.type !== 'record_turn' || state.status === 'none') return command;
  const d = command.data;
  const handoff_id = d.handoff_id ?? state.handoff_id;
  const claim_id = d.claim_id ?? meshClaimIdFor(handoff_id);
  const handoff =
    d.handoff !== undefined
      ? d.handoff
      : { handoff_id: state.handoff_id, status: 'claimed' as const, claim: { claim_id: meshClaimIdFor(state.handoff_id), claimed_by: d.agent } };
  return { ...command, data: { ...d, handoff_id, claim_id, handoff } };
}

/** The mesh decider with every turn sent under the current claim (see {@link withCurrentMeshClaim}). */
export const claimedMeshDecider: Decider<MeshCommand, MeshEvent, MeshState> = {
  ...meshDecider,
  decide: (command: MeshCommand, state: MeshState): DecisionResult<MeshEvent> => decideMesh(withCurrentMeshClaim(command, state), state),
};
