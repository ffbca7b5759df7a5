import { createHash } from 'node:crypto';
import type { RequeueExpiredCommand } from '@baton/contracts';
import type { HopTrace } from '@baton/eventstore';

/**
 * What the ledger answers to `requeue_expired` (only what the watchdog reads of it; a
 * `LedgerReply` fits). `kind: 'unavailable'` means there was no answer (timeout, no ledger
 * listening, store down): the requeue is retried later.
 */
export type RequeueReply = { ok: true } | { ok: false; error: { code: string; kind?: string; message?: string } };

/**
 * The one ledger command the watchdog sends. Implemented over `LedgerClient` (see
 * watchdog.module.ts); an interface so the loop can be unit-tested without a ledger.
 * Implementations resolve with the ledger's answer (refusals included); no answer at all is either
 * a reply of kind `unavailable` or a thrown error, and both are retried.
 */
export interface RequeueLedger {
  requeueExpired(project: string, command: RequeueExpiredCommand, call?: RequeueCall): Promise<RequeueReply>;
}

/** How a request is sent: in the trace of the event that started the lease (or deadline), when it had one. */
export interface RequeueCall {
  trace?: HopTrace;
}

/** Injection token for the {@link RequeueLedger}. */
export const REQUEUE_LEDGER = Symbol('REQUEUE_LEDGER');

const MAX_KEY_LENGTH = 200;

/**
 * The idempotency key of the requeue of one claim: `requeue:<handoff>:<claim_id>`. The same for
 * every watchdog instance and every retry, so a requeue the ledger already applied is answered
 * with no new event. Ids are at most 128 characters each, so a key that would pass the 200-character
 * limit is shortened to `requeue:<sha256 of both>`.
 */
export function requeueKey(handoffId: string, claimId: string): string {
  const key = `requeue:${handoffId}:${claimId}`;
  if (key.length <= MAX_KEY_LENGTH) return key;
  return `requeue:${createHash('sha256').update(handoffId).update('\u0000').update(claimId).digest('hex')}`;
}

/**
 * Refusals that are expected when two watchdogs race, a heartbeat lands just in time, or the
 * requeue already happened: the lease was extended, the handoff is no longer claimed (requeued,
 * returned, released...), the claim changed, or (clocks a little apart) the ledger's lease has not
 * run out yet. Logged at debug.
 */
export const ExpectedRefusals: ReadonlySet<string> = new Set(['lease_not_expired', 'handoff_not_claimed', 'stale_claim', 'not_found']);
