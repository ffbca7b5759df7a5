import type { NatsHandle } from '@baton/eventstore';
import { LedgerClient, type LedgerReply } from '@baton/platform';
import { ROUTER_ACTOR } from '../shared/ids';

export type { LedgerReply };

/** Injection token of the router's {@link RouterLedger}. */
export const LEDGER = Symbol('ROUTER_LEDGER');

/** The two ledger commands the router issues (structurally a subset of `LedgerClient`). */
export type RouterLedger = Pick<LedgerClient, 'create' | 'completeFromResult'>;

/**
 * The router's ledger client: core NATS request/reply, as the system actor `baton-router`
 * (`complete_from_result` is refused for any other actor kind). Short timeouts and two attempts
 * per call: the dispatch reactor has its own, longer, redelivery backoff on top.
 */
export function createRouterLedger(nats: NatsHandle, prefix: string): RouterLedger {
  return new LedgerClient(nats, prefix, { as: { actor: ROUTER_ACTOR, actor_kind: 'system' }, timeoutMs: 3000, attempts: 2, backoffMs: 100 });
}
