import { Principals, type LedgerReply } from '@baton/contracts';
import { LedgerClient, type NatsHandle } from '@baton/eventstore';

export type { LedgerReply };

/** Injection token of the router's {@link RouterLedger}. */
export const LEDGER = Symbol('ROUTER_LEDGER');

/** The ledger commands the router issues (structurally a subset of `LedgerClient`). */
export type RouterLedger = Pick<LedgerClient, 'create' | 'completeFromResult' | 'completeThenCreate' | 'abandon'>;

/**
 * The router's ledger client: core NATS request/reply on `<prefix>.cmd.ledger.<project>.svc.router.*`
 * (the ledger records the router as `baton-router`, kind `system`; `complete_from_result` is the
 * router's alone). Short timeouts and two attempts per call: the dispatch reactor has its own,
 * longer, redelivery backoff on top.
 */
export function createRouterLedger(nats: NatsHandle, prefix: string): RouterLedger {
  return new LedgerClient(nats, prefix, { as: Principals.service('router'), timeoutMs: 3000, attempts: 2, backoffMs: 100 });
}
