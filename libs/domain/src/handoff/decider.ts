import type { HandoffEvent } from '@baton/contracts';
import type { Decider } from '../decider';
import type { HandoffCommand } from './commands';
import { decideHandoff } from './decide';
import { evolveHandoff, HandoffState, initialHandoffState } from './state';

/**
 * The handoff aggregate (seed 002): create, optimistic claim with a lease, heartbeat, return with
 * the evidence floor, handback accept / rework, release, abandon, fail, archive, lease-expiry
 * requeue and retry-cap escalation. Pure; the ledger service is its only writer.
 */
export const handoffDecider: Decider<HandoffCommand, HandoffEvent, HandoffState> = {
  decide: decideHandoff,
  evolve: evolveHandoff,
  initialState: initialHandoffState,
};
