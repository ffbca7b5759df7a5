import { Principals, type LedgerReply } from '@baton/contracts';
import { LedgerClient, PoisonError, TransientError, type NatsHandle } from '@baton/eventstore';
import type { JsonLogger } from '@baton/platform';

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

/** Delay before a ledger call that failed inside the ledger (`internal`) is retried (the message is naked). */
export const LEDGER_RETRY_DELAY_MS = 1000;

/**
 * One ledger call of a router reactor, its failures turned into the transport's retry: no ledger
 * answered (a restart, an outage) or `unavailable` (timeout, no responders, the ledger's store
 * down) is retried until it passes — the event's work is owed whatever the outage's length, and an
 * event's letter cannot be redriven; `internal` (a ledger fault) a few times, after
 * {@link LEDGER_RETRY_DELAY_MS}. Refusals (`wrong_state`, `invalid`, `forbidden`, `rejected`) come
 * back as the reply, for {@link settleLedgerReply}.
 */
export async function callLedger(command: string, send: () => Promise<LedgerReply>): Promise<LedgerReply> {
  let reply: LedgerReply;
  try {
    reply = await send();
  } catch (error) {
    throw new TransientError(`ledger ${command} failed: ${String(error)}`, { cause: error, unbounded: true });
  }
  if (!reply.ok && reply.error.kind === 'unavailable') {
    throw new TransientError(`ledger ${command}: ${reply.error.code}: ${reply.error.message}`, { unbounded: true });
  }
  if (!reply.ok && reply.error.kind === 'internal') {
    throw new TransientError(`ledger ${command}: ${reply.error.code}: ${reply.error.message}`, { delayMs: LEDGER_RETRY_DELAY_MS });
  }
  return reply;
}

/** Applied now, or refused with a code in `done`: one that means it was done before. */
export function ledgerDone(reply: LedgerReply, done: ReadonlySet<string>): boolean {
  return reply.ok || done.has(reply.error.code);
}

/**
 * A reply's last word: applied (or applied before) and a refusal whose code is in `done` are
 * logged and the event is finished; any other refusal will not pass on a retry, so it is a
 * `PoisonError` (`ledger_refused`: the event's dead letter names the ledger's code).
 */
export function settleLedgerReply(command: string, reply: LedgerReply, done: ReadonlySet<string>, log: JsonLogger): void {
  if (reply.ok) {
    log.info(`ledger ${command} ${reply.events > 0 ? 'applied' : 'already applied'}`, { status: reply.handoff.status });
    return;
  }
  if (done.has(reply.error.code)) {
    log.info(`ledger ${command} already done`, { code: reply.error.code });
    return;
  }
  log.error(`ledger refused ${command}`, { code: reply.error.code, reason: reply.error.message });
  throw new PoisonError(`ledger refused ${command}: ${reply.error.code}: ${reply.error.message}`, 'ledger_refused');
}
