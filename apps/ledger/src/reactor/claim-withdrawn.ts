import { AgentNameSchema, ClaimWithdrawingEventTypes, type ClaimWithdrawn, type HandoffEventType } from '@baton/contracts';
import type { HandoffState } from '@baton/domain';

const WITHDRAWING: ReadonlySet<string> = new Set(ClaimWithdrawingEventTypes);

/**
 * The claim a stored handoff event took away from its agent, as the hint the agent's processes
 * get (`claim-withdrawn.json`), or null: the event is one of {@link ClaimWithdrawingEventTypes},
 * the handoff was claimed before it and is no longer under that claim after it, and the event is
 * not the claimer's own doing (an agent failing its own work knows). A claim whose holder is no
 * agent name has no inbox to say it to.
 */
export function withdrawnClaim(
  event: { type: HandoffEventType; actor: string; seq: number; occurredAt: string; project: string },
  before: HandoffState,
  after: HandoffState,
): ClaimWithdrawn | null {
  if (!WITHDRAWING.has(event.type) || before.status !== 'claimed') return null;
  const claim = before.claim;
  if (after.status === 'claimed' && after.claim.claim_id === claim.claim_id) return null;
  if (event.actor === claim.claimed_by || !AgentNameSchema.safeParse(claim.claimed_by).success) return null;
  return {
    project: event.project,
    handoff_id: before.id,
    claim_id: claim.claim_id,
    agent: claim.claimed_by,
    event_type: event.type as ClaimWithdrawn['event_type'],
    seq: event.seq,
    at: event.occurredAt,
  };
}
