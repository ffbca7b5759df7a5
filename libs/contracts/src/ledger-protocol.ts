import { z } from 'zod';
import { HandoffCommandSchemas, HandoffRecordSchema, type HandoffCommandName, type HandoffRecord } from './handoff';
import { IdSchema } from './common';
import { LedgerAccessErrorCode } from './ledger-access';
import { EventHeader } from './envelope';
import { RejectionCode } from './rejection';
import { Subjects, isSubjectToken } from './subjects';

/*
 * The ledger's request/reply protocol, shared by the ledger service and the `LedgerClient`
 * (`@baton/eventstore`): what goes on the wire and what comes back, nothing that does I/O.
 *
 * Request: core NATS request on `<prefix>.cmd.ledger.<project>.<kind>.<name>.<command>` (see
 * `ledgerCommandSubject`): the subject names the caller (`agent.<agent>`, `svc.<service>`,
 * `op.notifier`, `op.admin`) and the NATS server lets each principal publish only its own. JSON
 * body = the wire command (`LedgerCommandSchemas[command]`); operator relays add the person they
 * speak for (`actor`, and `actor_role` for the notifier). The ledger derives the actor from the
 * subject (`resolveLedgerCaller`) and checks `LedgerCommandAccess` before deciding.
 * Reply: {@link LedgerReply}, always JSON, for domain refusals and rejected input alike.
 */

/** Every handoff command the ledger serves, in subject-token form (besides pause, resume, open_offers). */
export const LedgerCommandNames = Object.keys(HandoffCommandSchemas) as HandoffCommandName[];

/** True when `token` names a handoff command. */
export function isLedgerCommandName(token: string): token is HandoffCommandName {
  return Object.prototype.hasOwnProperty.call(HandoffCommandSchemas, token);
}

/** The broad kind of a ledger error: the decider's kinds, plus the ledger's own. */
export const LedgerErrorKind = {
  /** The handoff is not in a status that allows the command (e.g. `handoff_not_pending`). */
  wrongState: 'wrong_state',
  invalid: 'invalid',
  forbidden: 'forbidden',
  notFound: 'not_found',
  /** The request itself was refused before deciding (malformed JSON, schema, size, unknown command). Recorded as a dead letter. Access refusals (`identity_mismatch`, `principal_not_allowed`) are `forbidden` and recorded too. */
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
  /** The body claims another identity than the subject's principal (kind `forbidden`, dead-lettered). */
  identityMismatch: LedgerAccessErrorCode.identityMismatch,
  /** The subject's principal may not issue the command (kind `forbidden`, dead-lettered). */
  principalNotAllowed: LedgerAccessErrorCode.principalNotAllowed,
  /** The body names another project than the subject (kind `rejected`, dead-lettered): the router's code for the same refusal. */
  projectMismatch: RejectionCode.projectMismatch,
  /** Contention outlasted the store's retries. Retryable. */
  conflict: 'conflict',
  /** The event store could not be reached or did not answer. Retryable. */
  unavailable: 'unavailable',
  /**
   * The ledger instance is working on as many requests as it takes at once (`LEDGER_MAX_INFLIGHT`):
   * nothing was done. Retryable with the same key after `details.retry_after_ms`.
   */
  overloaded: 'overloaded',
  /**
   * A stored event of the handoff cannot be decoded (kind `internal`, `details`: its `subject` and
   * `seq`): no retry can help until it is repaired or the reader upgraded. Not `unavailable`, which
   * a client would retry forever.
   */
  eventUndecodable: 'event_undecodable',
  /** Client side: no ledger answered within the timeout, after every attempt. */
  timeout: 'timeout',
  /** Client side: no ledger instance is subscribed. */
  noResponders: 'no_responders',
  /** Client side: the server refused these credentials publishing to the command subject (another principal's). */
  permissionDenied: 'permission_denied',
  /** Client side: the reply was not a ledger reply. */
  badReply: 'bad_reply',
  internal: 'internal_error',
} as const;

export type LedgerErrorCode = (typeof LedgerErrorCode)[keyof typeof LedgerErrorCode];

export const LedgerErrorSchema = z.object({
  code: z.string().min(1),
  kind: LedgerErrorKindSchema,
  message: z.string(),
  /**
   * What the refusal is about, by code (docs/errors.md, section 2). A refusal for the handoff's
   * state (`wrong_state`: `handoff_not_claimed`, `handoff_not_pending`, `handoff_not_open`…) names
   * its `status`, and — once it has ended or was returned for review — how, in `ended`
   * (`HandoffEndings`: `deadline_passed`, `handoff_abandoned`…; absent while it is open). Read as
   * data: a newer ledger may add keys and `ended` values.
   */
  details: z
    .record(z.string(), z.unknown())
    .optional()
    .describe(
      'what the refusal is about, by code (docs/errors.md section 2): a refusal for the handoff state names its `status` and, once the handoff ended or was returned, how in `ended` (deadline_passed, handoff_escalated, handoff_failed, handoff_abandoned, handoff_released, handoff_completed, handoff_returned, handoff_archived; more may come)',
    ),
});
export type LedgerError = z.infer<typeof LedgerErrorSchema>;

/**
 * What every ledger command answers. `events` counts the events this command stored: a retry of
 * the handoff's latest command reports them again (the store recognises its event ids); a key
 * applied before some later command answers 0. Either way nothing new is appended.
 */
export type LedgerReply = { ok: true; handoff: HandoffRecord; events: number } | { ok: false; error: LedgerError };

export const LedgerReplySchema = z.union([
  z.object({
    ok: z.literal(true),
    handoff: HandoffRecordSchema,
    events: z
      .number()
      .int()
      .min(0)
      .describe('how many events this request stored: 0 for a retry (the first request stored them) or a command that changed nothing'),
  }),
  z.object({ ok: z.literal(false), error: LedgerErrorSchema }),
]);

/**
 * What `complete_then_create` answers when the request itself was accepted: the completion's
 * reply, and the creation's (null when the completion was refused, so the creation was not
 * tried). Each part is what its command alone would have answered. A request refused as a whole
 * (rejected input, an access refusal) is answered `{ ok: false, error }` like any ledger command.
 */
export type CompleteThenCreateReply = { ok: true; complete: LedgerReply; create: LedgerReply | null } | { ok: false; error: LedgerError };

export const CompleteThenCreateReplySchema = z.union([
  z.object({ ok: z.literal(true), complete: LedgerReplySchema, create: LedgerReplySchema.nullable() }),
  z.object({ ok: z.literal(false), error: LedgerErrorSchema }),
]);

/** Error codes a client may retry with the same idempotency key. */
export const RetryableLedgerCodes: readonly string[] = [LedgerErrorCode.conflict, LedgerErrorCode.unavailable, LedgerErrorCode.overloaded];

/**
 * The JetStream subject a handoff offer is published on: `<prefix>.in.<project>.offer.<agent>`
 * (stream `<PREFIX>_INBOX`). The message body is the {@link HandoffRecord} JSON, its `Nats-Msg-Id`
 * is `offer:<project>:<handoff id>:<event seq>` (`MsgIds.offer`). Agents whose name is not a subject token get no offer.
 */
export function handoffOfferSubject(prefix: string, project: string, agent: string): string | null {
  if (!isSubjectToken(project) || !isSubjectToken(agent)) return null;
  return Subjects.offer(prefix, project, agent);
}

/** Every offer for one agent across projects (`*` for any agent). */
export function handoffOffersFor(prefix: string, agent = '*', project = '*'): string {
  return Subjects.offer(prefix, project, agent);
}

/**
 * What an offer message carries, as a reader of the agent's offers may rely on: the ledger publishes
 * the HandoffRecord as it was when offered (`id`, `status`, `workflow_run_id`...); a reader needs
 * only the id and the version (a give-up names it, so a give-up of an earlier round's offer counts
 * for nothing). `handoff_id` is accepted too, for offers written by hand.
 */
export const OfferMessageSchema = z.looseObject({
  id: IdSchema.optional(),
  handoff_id: IdSchema.optional(),
  version: z.number().int().min(1).optional(),
});

/** The handoff an offer message names, and the version it was offered at; null when it names none. */
export function offeredHandoff(value: unknown): { handoffId: string; version: number | undefined; message: z.infer<typeof OfferMessageSchema> } | null {
  const parsed = OfferMessageSchema.safeParse(value);
  const handoffId = parsed.success ? (parsed.data.id ?? parsed.data.handoff_id) : undefined;
  return parsed.success && handoffId !== undefined ? { handoffId, version: parsed.data.version, message: parsed.data } : null;
}

/** Headers an offer carries besides its body. */
export const OfferHeader = {
  handoffId: 'Baton-Handoff-Id',
  eventSeq: 'Baton-Event-Seq',
  eventType: EventHeader.type,
} as const;
