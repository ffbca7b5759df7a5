import { createHash } from 'node:crypto';

/** 32 hex digits of SHA-256 over the parts (separated so `a,bc` and `ab,c` differ). */
function digest(...parts: string[]): string {
  return createHash('sha256').update(parts.join('\u001f')).digest('hex').slice(0, 32);
}

/**
 * The ids the ledger generates. All are deterministic, derived from what caused them (the
 * request's idempotency key, the claim, the event), so a retried request or a redelivered event
 * produces the same ids and the event store's `Nats-Msg-Id` de-duplication catches the repeat.
 */
export const LedgerIds = {
  /** The claim a `claim` request creates. */
  claimId: (handoffId: string, idempotencyKey: string) => `claim-${digest('claim', handoffId, idempotencyKey)}`,
  /** The completion handback a `return` request will create. */
  handbackId: (handoffId: string, idempotencyKey: string) => `hb-${digest('handback', handoffId, idempotencyKey)}`,
  /** The consult handoff an escalation on expiry of `claimId` would create. */
  escalationId: (handoffId: string, claimId: string) => `esc-${digest('escalation', handoffId, claimId)}`,
  /** The command id for the events of one request (event ids are `<commandId>:<index>`). */
  commandId: (project: string, handoffId: string, command: string, idempotencyKey: string) =>
    `cmd-${digest('command', project, handoffId, command, idempotencyKey)}`,
  /** The command id for reaction `index` of the event `eventId`. */
  reactionId: (eventId: string, index: number) => `rx-${digest('reaction', eventId, String(index))}`,
  /** `deriveId` for the domain policies: a valid Id from its parts. */
  derive: (...parts: string[]) => `d-${digest('policy', ...parts)}`,
} as const;
