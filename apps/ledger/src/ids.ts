import { createHash } from 'node:crypto';
import { stableStringify } from '@baton/domain';

/** 32 hex digits of SHA-256 over the parts (separated so `a,bc` and `ab,c` differ): every id the ledger derives. */
export function digest(...parts: string[]): string {
  return createHash('sha256').update(parts.join('\u001f')).digest('hex').slice(0, 32);
}

/**
 * The ids the ledger generates. The handoff ids among them (`hb-`, `esc-`, and `d-` when a policy
 * names a consult) have the shape `LEDGER_DERIVED_HANDOFF_ID` (`@baton/domain`), which only the
 * ledger's policies may create: anyone can compute them, so a caller's `create` of one is refused
 * with `reserved_id`. All are deterministic, derived from what caused them (the
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
  /** The consult handoff an escalation would create when `agent`'s give-up of an offer (key `idempotencyKey`) passes the retry cap. */
  giveUpEscalationId: (handoffId: string, agent: string, idempotencyKey: string) =>
    `esc-${digest('escalation', handoffId, 'give_up_offer', agent, idempotencyKey)}`,
  /**
   * The command id for the events of one request (event ids are `<commandId>:<index>`): a digest
   * of the project, the aggregate (kind `handoff` and its id), the command, its idempotency key and
   * the caller (actor and actor kind), so two projects' handoffs with the same id never share an
   * event id, and a caller reusing another's key is never answered with that caller's stored events
   * (the store resumes a command whose ids are at the aggregate's tail). An outside caller's body
   * digest is in it too (below); the services' own commands keep the ids they always had.
   */
  commandId: (project: string, handoffId: string, command: string, idempotencyKey: string, actor: string, actorKind: string, bodyDigest?: string) =>
    bodyDigest === undefined
      ? `cmd-${digest('command', project, 'handoff', handoffId, command, idempotencyKey, actor, actorKind)}`
      : `cmd-${digest('command', project, 'handoff', handoffId, command, idempotencyKey, actor, actorKind, bodyDigest)}`,
  /**
   * The digest of an outside caller's command body (`command_digest`): SHA-256 over the parsed
   * body with keys sorted at every level, so the same body in another key order is the same. It is
   * part of the command id too: the same key with another body never meets the first body's events
   * as its own (at the aggregate's tail, or in the stream's duplicate window), and is decided —
   * and refused `idempotency_key_reused`.
   */
  commandDigest: (wire: unknown) => createHash('sha256').update(stableStringify(wire)).digest('hex').slice(0, 32),
  /** The command id for reaction `index` of the event `eventId`, applied to `target` (project, kind and id in the digest). */
  reactionId: (target: { project: string; kind: string; id: string }, eventId: string, index: number) =>
    `rx-${digest('reaction', target.project, target.kind, target.id, eventId, String(index))}`,
  /** `deriveId` for the domain policies: a valid Id from its parts. */
  derive: (...parts: string[]) => `d-${digest('policy', ...parts)}`,
} as const;
