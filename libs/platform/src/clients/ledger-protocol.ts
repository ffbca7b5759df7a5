import { z } from 'zod';
import {
  ActorNameSchema,
  HandoffActorKindSchema,
  HandoffCommandSchemas,
  HandoffRecordSchema,
  isSubjectToken,
  type HandoffActorKind,
  type HandoffCommandName,
  type HandoffRecord,
} from '@baton/contracts';

/*
 * The ledger's request/reply protocol, shared by the ledger service and {@link LedgerClient}.
 *
 * Request: core NATS request on `<prefix>.cmd.ledger.<project>.<command>` (see `Subjects.ledgerCommand`),
 * JSON body = the wire command (`HandoffCommandSchemas[command]`) plus `actor` and `actor_kind`.
 * Reply: {@link LedgerReply}, always JSON, for domain refusals and rejected input alike.
 */

/** Every command the ledger serves, in subject-token form. */
export const LedgerCommandNames = Object.keys(HandoffCommandSchemas) as HandoffCommandName[];

/** True when `token` names a ledger command. */
export function isLedgerCommandName(token: string): token is HandoffCommandName {
  return Object.prototype.hasOwnProperty.call(HandoffCommandSchemas, token);
}

/** Who issues a command. Attached by the calling service (the SDK, the operator API, the watchdog...). */
export const LedgerActorSchema = z.strictObject({
  actor: ActorNameSchema,
  actor_kind: HandoffActorKindSchema,
});
export interface LedgerActor {
  actor: string;
  actor_kind: HandoffActorKind;
}

/** The broad kind of a ledger error: the decider's kinds, plus the ledger's own. */
export const LedgerErrorKind = {
  /** The handoff is not in a status that allows the command (e.g. `handoff_not_pending`). */
  wrongState: 'wrong_state',
  invalid: 'invalid',
  forbidden: 'forbidden',
  notFound: 'not_found',
  /** The request itself was refused before deciding (malformed JSON, schema, size, unknown command). Recorded as a dead letter. */
  rejected: 'rejected',
  /** The ledger could not decide or store right now (store down, contention): retry with the same idempotency key. */
  unavailable: 'unavailable',
  internal: 'internal',
} as const;
export type LedgerErrorKind = (typeof LedgerErrorKind)[keyof typeof LedgerErrorKind];
export const LedgerErrorKindSchema = z.enum(['wrong_state', 'invalid', 'forbidden', 'not_found', 'rejected', 'unavailable', 'internal']);

/**
 * Codes the ledger (not the decider) answers with. Domain codes are `HandoffErrorCode` (from
 * `@baton/domain`); rejections use `RejectionCode` (`malformed_json`, `schema_violation`, ...).
 */
export const LedgerErrorCode = {
  unknownCommand: 'unknown_command',
  projectMismatch: 'project_mismatch',
  /** Contention outlasted the store's retries. Retryable. */
  conflict: 'conflict',
  /** The event store could not be reached or did not answer. Retryable. */
  unavailable: 'unavailable',
  /** Client side: no ledger answered within the timeout, after every attempt. */
  timeout: 'timeout',
  /** Client side: no ledger instance is subscribed. */
  noResponders: 'no_responders',
  /** Client side: the reply was not a ledger reply. */
  badReply: 'bad_reply',
  internal: 'internal_error',
} as const;

export const LedgerErrorSchema = z.object({
  code: z.string().min(1),
  kind: LedgerErrorKindSchema,
  message: z.string(),
  details: z.record(z.string(), z.unknown()).optional(),
});
export type LedgerError = z.infer<typeof LedgerErrorSchema>;

/**
 * What every ledger command answers. `events` counts the events this command stored: a retry of
 * the handoff's latest command reports them again (the store recognises its event ids); a key
 * applied before some later command answers 0. Either way nothing new is appended.
 */
export type LedgerReply = { ok: true; handoff: HandoffRecord; events: number } | { ok: false; error: LedgerError };

export const LedgerReplySchema = z.union([
  z.object({ ok: z.literal(true), handoff: HandoffRecordSchema, events: z.number().int().min(0) }),
  z.object({ ok: z.literal(false), error: LedgerErrorSchema }),
]);

/** Error codes a client may retry with the same idempotency key. */
export const RetryableLedgerCodes: readonly string[] = [LedgerErrorCode.conflict, LedgerErrorCode.unavailable];

/**
 * The JetStream subject a handoff offer is published on: `<prefix>.in.<project>.offer.<agent>`
 * (stream `<PREFIX>_INBOX`). The message body is the {@link HandoffRecord} JSON, its `Nats-Msg-Id`
 * is `offer:<handoff id>:<event seq>`. Agents whose name is not a subject token get no offer.
 */
export function handoffOfferSubject(prefix: string, project: string, agent: string): string | null {
  if (!isSubjectToken(project) || !isSubjectToken(agent)) return null;
  return `${prefix}.in.${project}.offer.${agent}`;
}

/** Every offer for one agent across projects (`*` for any agent). */
export function handoffOffersFor(prefix: string, agent = '*', project = '*'): string {
  return `${prefix}.in.${project}.offer.${agent}`;
}

/** Headers an offer carries besides its body. */
export const OfferHeader = {
  handoffId: 'Baton-Handoff-Id',
  eventSeq: 'Baton-Event-Seq',
  eventType: 'Baton-Event-Type',
} as const;
