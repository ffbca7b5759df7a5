import {
  EdgeRefusalReasons,
  GovernanceErrorCode,
  HandoffEndings,
  leadingCode,
  LedgerErrorCode,
  RejectionCode,
  type EdgeRefusalIssue,
  type EdgeRefusalReason,
  type HandoffEnding,
  type HandoffRecord,
  type Rejection,
} from '@baton/contracts';
import { HandoffErrorCode, ProjectControlErrorCode, ResultClaimCode, RunErrorCode } from '@baton/domain';

/**
 * The codes of the SDK's own errors: each class below carries one, and its `code` is typed as that
 * one (`NotClaimedError['code']` is `'not_claimed'`). `sdk_error` is a {@link BatonSdkError} made
 * without a code of its own; `self_call` is an {@link InvalidInputError}'s (a check of the SDK's own:
 * a result whose decision calls the publishing agent itself).
 */
export const SdkErrorCode = {
  sdkError: 'sdk_error',
  notClaimed: 'not_claimed',
  claimLost: 'claim_lost',
  crossProjectResult: 'cross_project_result',
  delegatedHandoff: 'delegated_handoff',
  handoffHasNoRun: 'handoff_has_no_run',
  completionHandback: 'completion_handback',
  duplicateMessageId: 'duplicate_message_id',
  messageIdReused: 'message_id_reused',
  edgeUnavailable: 'edge_unavailable',
  offerTerminated: 'offer_terminated',
  offerUnsettled: 'offer_unsettled',
  offerPullFailed: 'offer_pull_failed',
  subscriptionStopping: 'subscription_stopping',
  meshInvalid: 'mesh_invalid',
  selfCall: 'self_call',
} as const;
export type SdkErrorCode = (typeof SdkErrorCode)[keyof typeof SdkErrorCode];

/** The values of each object of a union of code objects (`keyof` of a union would keep only the keys they share). */
type ValuesOf<T> = T extends unknown ? T[keyof T] : never;

/** Where a ledger reply's code comes from: the handoff decider, the ledger itself (its access refusals and the client side's codes included), governance, project control, the input rejections. */
const LEDGER_REPLY_CODE_SOURCES = [HandoffErrorCode, LedgerErrorCode, GovernanceErrorCode, ProjectControlErrorCode, RejectionCode] as const;

/**
 * Every code a ledger reply's error carries (docs/errors.md, section 2; a rejection's, section 1):
 * the `code` of a {@link LedgerCommandError}. A ledger newer than this SDK could answer one it does
 * not list: keep a `default` branch.
 */
export type LedgerReplyCode = ValuesOf<(typeof LEDGER_REPLY_CODE_SOURCES)[number]>;

/**
 * The checks of their own whose code an {@link InvalidInputError} carries instead of its
 * rejection's: a run start naming nobody to notify, a result naming no claim, a result whose
 * decision calls the publishing agent itself (`self_call`, the SDK's own check).
 */
const INVALID_INPUT_CHECK_CODES = [RunErrorCode.noNoticeRecipient, ResultClaimCode.claimRequired, SdkErrorCode.selfCall] as const;

/** The `code` of an {@link InvalidInputError}: a rejection code, or the code of the check that refused it. */
export type InvalidInputCode = RejectionCode | (typeof INVALID_INPUT_CHECK_CODES)[number];

/**
 * Every code a {@link BatonSdkError} carries: the SDK's own ({@link SdkErrorCode}), an invalid
 * input's ({@link InvalidInputCode}), the ledger's ({@link LedgerReplyCode}) and the agent edge's
 * reasons (`EdgeRefusalReason`). The event store's errors the SDK passes on carry an
 * `EventStoreErrorCode` instead.
 */
export type BatonSdkErrorCode = SdkErrorCode | InvalidInputCode | LedgerReplyCode | EdgeRefusalReason;

/** {@link BatonSdkErrorCode} at run time: every code a `BatonSdkError` may carry. */
export const BatonSdkErrorCodes: ReadonlySet<BatonSdkErrorCode> = new Set<BatonSdkErrorCode>([
  ...Object.values(SdkErrorCode),
  ...INVALID_INPUT_CHECK_CODES,
  ...LEDGER_REPLY_CODE_SOURCES.flatMap((codes) => Object.values(codes) as LedgerReplyCode[]),
  ...EdgeRefusalReasons,
]);

const invalidInputCodes: ReadonlySet<string> = new Set<InvalidInputCode>([...Object.values(RejectionCode), ...INVALID_INPUT_CHECK_CODES]);

/**
 * Base class of every error the SDK throws on purpose. `code` is stable — branch on it, never on
 * the message. It is typed: a {@link BatonSdkErrorCode} here, and each subclass narrows it to the
 * codes it carries (`schema_violation` and the other rejection codes for {@link InvalidInputError},
 * the ledger's for {@link LedgerCommandError}, the agent edge's reasons for {@link EdgeRefusedError},
 * one of {@link SdkErrorCode} for each of the others), so a `switch` on it is checked by the
 * compiler. Publishes also throw the event store's errors (`PublishTimeout`, `StreamNotFound`,
 * `PermissionDenied`, … re-exported here), whose `code` is one of `EventStoreErrorCode`; a
 * connection closed for good is the event store's `ConnectionClosed` (`connection_closed`).
 */
export class BatonSdkError extends Error {
  readonly code: BatonSdkErrorCode;
  constructor(message: string, options?: { cause?: unknown; code?: BatonSdkErrorCode }) {
    super(message, options);
    this.name = 'BatonSdkError';
    this.code = options?.code ?? SdkErrorCode.sdkError;
  }
}

/**
 * A value the SDK was asked to send failed its wire contract (an agent result that fails
 * `AgentResultSchema`, a run start without a run id...). Nothing was sent. `rejection` names
 * every offending field, in the shape the services use.
 */
export class InvalidInputError extends BatonSdkError {
  declare readonly code: InvalidInputCode;
  constructor(
    readonly what: string,
    readonly rejection: Rejection,
  ) {
    // The first issue's own code when its check has one (a start with nobody to notify is
    // `no_notice_recipient`), as the router and the CLI report it: one code for one refusal. A
    // check's code this SDK does not know is left for the rejection's.
    const own = leadingCode(rejection);
    super(`invalid ${what}: ${rejection.message}`, { code: invalidInputCodes.has(own) ? (own as InvalidInputCode) : rejection.code });
    this.name = 'InvalidInputError';
  }
}

/** The error a ledger command answered with: a domain refusal or a rejection, with its stable code. */
export interface LedgerErrorBody {
  code: string;
  kind: string;
  message: string;
  details?: Record<string, unknown>;
}

/**
 * The ledger refused a command (`code` is stable, e.g. `handoff_not_pending`, `not_the_claimer`,
 * `stale_claim`, `principal_not_allowed`). Refusals are decisions, not faults: retrying the same
 * command gets the same answer. `handoffId` is empty for `open_offers` (no handoff).
 */
export class LedgerCommandError extends BatonSdkError {
  declare readonly code: LedgerReplyCode;
  readonly kind: string;
  readonly details: Record<string, unknown> | undefined;
  constructor(
    readonly command: string,
    readonly handoffId: string,
    error: LedgerErrorBody,
  ) {
    // The code as the ledger sent it (a newer ledger's too: not rewritten).
    super(`ledger refused ${command}${handoffId !== '' ? ` on handoff ${handoffId}` : ''}: ${error.code}: ${error.message}`, {
      code: error.code as LedgerReplyCode,
    });
    this.name = 'LedgerCommandError';
    this.kind = error.kind;
    this.details = error.details;
  }
}

/**
 * Why a claim was lost while its handoff stays open — claiming it again can work, once the handoff
 * is offered again: `lease_expired` (the lease ran out before the heartbeat; the watchdog requeues
 * it), `handoff_requeued` (the lease ran out and the watchdog requeued it: pending, offered again),
 * `stale_claim` (requeued and claimed again since: another claim holds it now).
 */
export const ClaimLostOpen = ['lease_expired', 'handoff_requeued', 'stale_claim'] as const;

/**
 * Why a claim was lost because its handoff ended (or was returned for review): claiming it again
 * never works. The ledger's refusal names it (`details.ended`, `HandoffEndings`): `deadline_passed`,
 * `handoff_escalated` (its retry cap reached), `handoff_failed`, `handoff_abandoned`,
 * `handoff_released`, `handoff_completed`, `handoff_returned`, `handoff_archived`.
 */
export const ClaimLostEnded: readonly HandoffEnding[] = HandoffEndings;

/**
 * Why an offer's claim is lost, from the ledger's refusal of its heartbeat (its code and
 * `details`, never its words): one of {@link ClaimLostOpen}, one of {@link ClaimLostEnded}, or
 * `claim_refused` — any other refusal (`not_the_claimer`, an access refusal…; `.refusal` says which).
 */
export type ClaimLostBy = (typeof ClaimLostOpen)[number] | HandoffEnding | 'claim_refused';

const OPEN_LOSSES: ReadonlySet<string> = new Set(ClaimLostOpen);
const ENDINGS: ReadonlySet<string> = new Set(HandoffEndings);
/** A ledger older than `details.ended` names only the status: how each ended status reads then. */
const ENDED_STATUSES: Readonly<Record<string, HandoffEnding>> = {
  failed: 'handoff_failed',
  abandoned: 'handoff_abandoned',
  released: 'handoff_released',
  completed: 'handoff_completed',
  returned: 'handoff_returned',
  archived: 'handoff_archived',
};

/**
 * Why the claim is lost, as the ledger's refusal of a heartbeat says it: its `lease_expired` and
 * `stale_claim` as they are; `details.ended` when the handoff ended (an ending this SDK does not
 * know yet still reads as ended: `handoff_failed` for a failure, else by `details.status`); a
 * handoff `pending` again (`details.status`) was requeued; anything else is `claim_refused`.
 */
export function claimLostBy(refusal: { code: string; details?: Record<string, unknown> | undefined }): ClaimLostBy {
  if (refusal.code === 'lease_expired' || refusal.code === 'stale_claim') return refusal.code;
  const ended = refusal.details?.['ended'];
  if (typeof ended === 'string' && ENDINGS.has(ended)) return ended as HandoffEnding;
  const status = refusal.details?.['status'];
  if (typeof status === 'string' && Object.prototype.hasOwnProperty.call(ENDED_STATUSES, status)) return ENDED_STATUSES[status] as HandoffEnding;
  if (status === 'pending' && refusal.code === 'handoff_not_claimed') return 'handoff_requeued';
  return 'claim_refused';
}

/** True when the claim was lost because its handoff ended: claiming it again never works. */
export function isHandoffEnded(lostBy: ClaimLostBy): boolean {
  return lostBy !== 'claim_refused' && !OPEN_LOSSES.has(lostBy);
}

/** How each loss reads in a message. */
const LOSS_TEXT: Readonly<Record<ClaimLostBy, string>> = {
  lease_expired: 'its lease ran out (the watchdog requeues the handoff)',
  handoff_requeued: 'its lease ran out and the watchdog requeued the handoff',
  stale_claim: 'the handoff was requeued and claimed again since (another claim holds it)',
  deadline_passed: 'the handoff passed its deadline and failed',
  handoff_escalated: 'the handoff reached its retry cap and was escalated',
  handoff_failed: 'the handoff was failed',
  handoff_abandoned: 'the handoff was abandoned',
  handoff_released: 'the handoff was released',
  handoff_completed: 'the handoff was completed',
  handoff_returned: 'the handoff was returned for review',
  handoff_archived: 'the handoff was archived',
  claim_refused: 'the ledger refused it',
};

/** What to do about a loss, in a message: an ended handoff has nothing to claim again. */
function lossAdvice(lostBy: ClaimLostBy): string {
  if (isHandoffEnded(lostBy)) return 'the handoff has ended: there is nothing to claim again, drop the work';
  if (lostBy === 'claim_refused') return 'stop the work';
  return 'stop the work; claim() it again once it is offered again';
}

/**
 * The `reason` an offer's `signal` is aborted with when its claim is lost: a heartbeat (automatic,
 * sent at once on the ledger's claim-withdrawn notice, or the handler's own) was refused.
 * `lostBy` says why from the ledger's refusal (`.refusal`, also the `cause`): the handoff is still
 * open ({@link ClaimLostOpen}: claiming it again can work once it is offered again) or has ended
 * ({@link ClaimLostEnded}: `deadline_passed`, `handoff_abandoned`…; `handoffEnded` true — never
 * claim it again). Stop the work either way: someone else may hold it now, or no one will. `code`
 * is stable: `claim_lost`.
 */
export class ClaimLostError extends BatonSdkError {
  declare readonly code: typeof SdkErrorCode.claimLost;
  readonly lostBy: ClaimLostBy;
  /** True when the handoff ended (or was returned): claiming it again never works. */
  readonly handoffEnded: boolean;
  constructor(
    readonly handoffId: string,
    /** The ledger's refusal of the heartbeat. */
    readonly refusal: LedgerCommandError,
  ) {
    const lostBy = claimLostBy(refusal);
    super(`the claim on handoff ${handoffId} is lost: ${LOSS_TEXT[lostBy]} (the ledger answered ${refusal.code}); ${lossAdvice(lostBy)}`, {
      cause: refusal,
      code: SdkErrorCode.claimLost,
    });
    this.name = 'ClaimLostError';
    this.lostBy = lostBy;
    this.handoffEnded = isHandoffEnded(lostBy);
  }
}

/**
 * The helper that settled an offer's claim: `finish` (its result acknowledged by the stream),
 * `return`, `release`, `fail` or `decide` (accepted by the ledger). Once one has, the claim is no
 * longer this offer's to settle again: only the same ending again (its retry) is sent.
 */
export type OfferEnding = 'finish' | 'return' | 'release' | 'fail' | 'decide';

/**
 * A claim-bound helper (heartbeat, return, release, fail, decide, finish) was called on an offer
 * this agent holds no claim on: never claimed, or its claim already settled by this offer's own
 * `finish`, `return`, `release`, `fail` or `decide` (`endedBy`; a second `finish` under another
 * `result_id` included), or lost as a refused heartbeat said (`lostBy`, `handoffEnded`: see
 * {@link ClaimLostError}). Nothing was sent.
 */
export class NotClaimedError extends BatonSdkError {
  declare readonly code: typeof SdkErrorCode.notClaimed;
  /** True when the claim was lost because the handoff ended (`lostBy` one of {@link ClaimLostEnded}): claiming it again never works. */
  readonly handoffEnded: boolean;
  constructor(
    readonly handoffId: string,
    action: string,
    /** The helper that already settled this offer's claim (`finish`, `return`, `release`, `fail`, `decide`), if any. */
    readonly endedBy: OfferEnding | null = null,
    /** Why a refused heartbeat said the claim is lost (`lease_expired`, `deadline_passed`, `handoff_abandoned`…), if that is why. */
    readonly lostBy: ClaimLostBy | null = null,
  ) {
    super(
      endedBy !== null
        ? `cannot ${action} handoff ${handoffId}: this offer already ended its claim (${endedBy}); nothing was sent`
        : lostBy !== null
          ? `cannot ${action} handoff ${handoffId}: its claim is lost — ${LOSS_TEXT[lostBy]}; nothing was sent; ${lossAdvice(lostBy)}`
          : `cannot ${action} handoff ${handoffId}: claim() it first`,
      { code: SdkErrorCode.notClaimed },
    );
    this.name = 'NotClaimedError';
    this.handoffEnded = lostBy !== null && isHandoffEnded(lostBy);
  }
}

/**
 * `finish()` was called on a cross-project handoff: it lives in this agent's project (`project`),
 * but its workflow run is the source project's (`runProject`, the handoff's `source_project`). A
 * run result is only ever published on this agent's own `<prefix>.in.<project>.result.<agent>`,
 * where it would name a run of the wrong project, and no run of either project dispatched this
 * handoff to wait for it. Nothing was sent and the claim is kept: finish the work through the
 * ledger instead — `return(report)` (the delegator reviews it in its handback), `release` or `fail`.
 * `code` is stable: `cross_project_result`.
 */
export class CrossProjectResultError extends BatonSdkError {
  declare readonly code: typeof SdkErrorCode.crossProjectResult;
  constructor(
    readonly handoffId: string,
    readonly project: string,
    readonly runProject: string,
    readonly workflowRunId: string | undefined,
  ) {
    super(
      `cannot finish handoff ${handoffId} with a run result: it is a cross-project handoff whose run${workflowRunId !== undefined ? ` ${workflowRunId}` : ''} belongs to project ${runProject}, not ${project}; end it through the ledger with return() (or release() / fail())`,
      { code: SdkErrorCode.crossProjectResult },
    );
    this.name = 'CrossProjectResultError';
  }
}

/**
 * `finish()` was called on a handoff that belongs to no workflow run (an agent's own `create`
 * outside any run): a run result has no run to be recorded on, so the router would never see it
 * and the claim would lapse. Nothing was sent and the claim is kept: end the work through the
 * ledger — `return(report)` (the delegator reviews it in its handback), `release` or `fail`.
 * `code` is stable: `handoff_has_no_run`.
 */
export class NoRunResultError extends BatonSdkError {
  declare readonly code: typeof SdkErrorCode.handoffHasNoRun;
  constructor(readonly handoffId: string) {
    super(
      `cannot finish handoff ${handoffId} with a run result: it belongs to no workflow run; end it through the ledger with return() (or release() / fail())`,
      { code: SdkErrorCode.handoffHasNoRun },
    );
    this.name = 'NoRunResultError';
  }
}

/**
 * `finish()` was called on a handoff of a run that the router did not route: work an agent
 * delegated with `agent.ledger.create`, naming its run for context (`workflow_run_id`). A run takes
 * a result only for the handoff the router routed to its current agent (ids `ho-…`, `mh-…`), so the
 * router would refuse this one (`unexpected_agent` / `stale_handoff`) and the refusal would count
 * toward this agent's circuit. Nothing was sent and the claim is kept: end it through the ledger —
 * `return(report)` (the delegator reviews it), `release()` or `fail()`. `code` is stable:
 * `delegated_handoff`.
 */
export class DelegatedResultError extends BatonSdkError {
  declare readonly code: typeof SdkErrorCode.delegatedHandoff;
  constructor(
    readonly handoffId: string,
    readonly workflowRunId: string,
  ) {
    super(
      `cannot finish handoff ${handoffId} with a result of run ${workflowRunId}: an agent delegated it, the router did not route it to this agent for the run; end it with return(report) (or release() / fail())`,
      { code: SdkErrorCode.delegatedHandoff },
    );
    this.name = 'DelegatedResultError';
  }
}

/**
 * `finish()` was called on a completion handback (`kind: completion_handback`): a review of work
 * this agent delegated, which is decided — `offer.decide('accept' | 'rework', note)` — never finished
 * with a run result (its run waits for another agent's result: the router would refuse this one,
 * and a refused result counts toward the agent's circuit). Nothing was sent and the claim is kept.
 * `code` is stable: `completion_handback`.
 */
export class HandbackResultError extends BatonSdkError {
  declare readonly code: typeof SdkErrorCode.completionHandback;
  constructor(readonly handoffId: string) {
    super(
      `cannot finish handoff ${handoffId} with a run result: it is a completion handback to review; decide it with decide('accept') or decide('rework', note)`,
      {
        code: SdkErrorCode.completionHandback,
      },
    );
    this.name = 'HandbackResultError';
  }
}

/**
 * JetStream already held a message with this `Nats-Msg-Id` that this client never published, so it
 * dropped the new one as a duplicate: nothing was stored. Another publisher used the same id (a
 * `result_id`, `workflow_run_id`, `message_id` or `mesh_run_id` of the same project and kind)
 * within the stream's duplicate window (2 minutes). `seq` is the stored message's. A retry of this
 * client's own publish is not this error: it resolves with `duplicate: true`. A client only
 * remembers its own publishes while it lives: the retry, by a new process, of a publish that ended
 * in `PublishTimeout` gets this error too — then the stored message is that very one.
 */
export class DuplicateMessageError extends BatonSdkError {
  declare readonly code: typeof SdkErrorCode.duplicateMessageId;
  constructor(
    readonly msgId: string,
    readonly subject: string,
    readonly stream: string,
    readonly seq: number,
  ) {
    super(
      `the stream ${stream} already holds message ${msgId} (seq ${seq}), which this client did not publish: nothing new was stored. ` +
        'If an earlier process published this same message (a PublishTimeout before a restart), it is stored and this was its retry; ' +
        'otherwise another publisher took the id and this message was not stored (a new message needs a new id)',
      {
        code: SdkErrorCode.duplicateMessageId,
      },
    );
    this.name = 'DuplicateMessageError';
  }
}

/**
 * This client already published other content under this `Nats-Msg-Id` (a run start of the same
 * run id with other people, a result id reused with another body…). Within the stream's duplicate
 * window the new message would be dropped as the first one's duplicate, and after it Baton would
 * take it for the same message or refuse it; either way it is not a retry. Nothing was sent: send
 * the same content to retry, or a new id for a new message.
 */
export class MessageIdReusedError extends BatonSdkError {
  declare readonly code: typeof SdkErrorCode.messageIdReused;
  constructor(
    readonly msgId: string,
    readonly subject: string,
  ) {
    super(
      `this client already published other content under message id ${msgId}: nothing was sent; retry with the same content, or use a new id for a new message`,
      {
        code: SdkErrorCode.messageIdReused,
      },
    );
    this.name = 'MessageIdReusedError';
  }
}

/**
 * The agent edge refused what this client published (docs/identity.md, "The agent edge"): nothing
 * was stored, and the refusal is recorded as a dead letter of source `ledger-edge` with the same
 * reason. `code` (and `reason`) is the edge's stable reason: `msg_id_mismatch` (a message id naming
 * another project, kind or message, or a dead-letter redrive's), `schema_violation` (a header the
 * edge does not carry, or a body its consumer would refuse: `issues` names the fields; also
 * `invalid_utf8`, `malformed_json`, `project_mismatch`, `identity_mismatch`), `payload_too_large`,
 * `no_handler` (a subject that stands for nothing an agent may reach), `unknown_workflow` (a run
 * start naming a workflow its project does not define: publish the definition, then start again).
 * The SDK validates what it sends, so any other refusal is a version skew or a hand-made call. Not retried: the same message is
 * refused again. `detail` says why, in words.
 */
export class EdgeRefusedError extends BatonSdkError {
  declare readonly code: EdgeRefusalReason;
  readonly reason: EdgeRefusalReason;
  readonly detail: string;
  /** The fields a body was refused for (path, message, the check's own code when it has one); empty for the other refusals. */
  readonly issues: readonly EdgeRefusalIssue[];
  constructor(
    readonly subject: string,
    refusal: { reason: EdgeRefusalReason; detail: string; issues?: readonly EdgeRefusalIssue[] | undefined },
    options?: { cause?: unknown },
  ) {
    super(`the agent edge refused the message for ${subject}: ${refusal.reason}: ${refusal.detail}`, {
      code: refusal.reason,
      ...(options?.cause !== undefined ? { cause: options.cause } : {}),
    });
    this.name = 'EdgeRefusedError';
    this.reason = refusal.reason;
    this.detail = refusal.detail;
    this.issues = refusal.issues ?? [];
  }
}

/**
 * Nothing relayed the agent edge while the client kept trying (`edge_unavailable`): no ledger
 * listens on `<prefix>.edge.…` — every instance is stopped or restarting —, so the server answered
 * each attempt at once that no one took it. Nothing was stored. The client tried again until as
 * long had passed as a publish whose every attempt timed out takes (`publishAttempts` ×
 * `publishTimeoutMs` and the waits between; `.waitedMs`, `.tries`); publishing it again later, under
 * the same id, is safe. Not a deployment error: the streams are there, their relay is not.
 */
export class EdgeUnavailableError extends BatonSdkError {
  declare readonly code: typeof SdkErrorCode.edgeUnavailable;
  constructor(
    readonly subject: string,
    readonly tries: number,
    readonly waitedMs: number,
    options?: { cause?: unknown },
  ) {
    super(
      `no ledger relayed the agent edge for ${subject} (${tries} tries over ${waitedMs} ms: every ledger is stopped or restarting); nothing was stored — publish it again later (the same id)`,
      { code: SdkErrorCode.edgeUnavailable, ...(options?.cause !== undefined ? { cause: options.cause } : {}) },
    );
    this.name = 'EdgeUnavailableError';
  }
}

/**
 * What the SDK told the ledger when it gave up on an offer it never claimed (`give_up_offer`):
 * `recorded` with the handoff as it stands now (pending and offered again with `retry_count + 1`,
 * or `failed` and escalated at its retry cap), or the ledger's refusal (`handoff_not_pending`: it
 * was claimed or ended meanwhile; `stale_offer`: it was offered again since; `timeout`...).
 */
export type OfferGiveUp = { recorded: true; handoff: HandoffRecord } | { recorded: false; error: LedgerErrorBody };

/**
 * An offer whose `onOffer` kept throwing was given up on after `maxDeliver` deliveries: it is
 * terminated (not delivered again) and handed to `onError` as this error. Nothing is lost — the
 * offer only announces a handoff the ledger keeps. When no delivery of the offer claimed its
 * handoff, the SDK told the ledger first (`give_up_offer`, `giveUp` says what it answered), which
 * offers the handoff again or, at its retry cap, escalates it to the lead or an operator; a claimed
 * handoff's lease decides. `handoffId` is null for bytes that named no handoff (`giveUp` absent).
 * `cause` is the handler's last error.
 */
export class OfferTerminatedError extends BatonSdkError {
  declare readonly code: typeof SdkErrorCode.offerTerminated;
  readonly handoffId: string | null;
  readonly giveUp: OfferGiveUp | undefined;
  constructor(
    readonly subject: string,
    readonly seq: number,
    readonly deliveries: number,
    options?: { cause?: unknown; handoffId?: string | null; giveUp?: OfferGiveUp },
  ) {
    super(
      `gave up on the offer at ${subject} (seq ${seq}) after ${deliveries} deliveries; it is not delivered again${giveUpText(options?.handoffId ?? null, options?.giveUp)}`,
      { ...(options?.cause !== undefined ? { cause: options.cause } : {}), code: SdkErrorCode.offerTerminated },
    );
    this.name = 'OfferTerminatedError';
    this.handoffId = options?.handoffId ?? null;
    this.giveUp = options?.giveUp;
  }
}

function giveUpText(handoffId: string | null, giveUp: OfferGiveUp | undefined): string {
  if (giveUp === undefined || handoffId === null) return '';
  if (!giveUp.recorded) return `; the ledger did not record the give-up of handoff ${handoffId} (${giveUp.error.code})`;
  const h = giveUp.handoff;
  return h.status === 'pending'
    ? `; handoff ${handoffId} is offered again (retry ${h.retry.retry_count} of ${h.retry.max_retries})`
    : `; handoff ${handoffId} is ${h.status}${h.terminal_reason !== undefined ? `: ${h.terminal_reason}` : ''}`;
}

/**
 * An `onOffer` handler returned without settling its offer: it neither claimed the handoff, nor
 * gave the offer up (`offer.giveUp(reason)`), nor heard from the ledger that the handoff is not this
 * agent's to take (a `tryClaim()` that resolved null). Acknowledged, such an offer would leave its
 * handoff pending, offered to nobody, its run waiting and no person told (docs/handoffs.md rule
 * 5a). So it counts as a failed delivery: the offer is delivered again after the backoff, and after
 * `maxDeliver` deliveries it is terminated and given up to the ledger (`give_up_offer`, whose reason
 * says the handler returned without claiming), which offers it again or escalates it. Handed to
 * `onError` once per offer message (its first such return in this process; never thrown), and the
 * `cause` of the `OfferTerminatedError` that ends it. `claimRefusal` is the ledger's answer to a
 * claim the handler caught and did not act on, if any. `code` is stable: `offer_unsettled`.
 */
export class OfferUnsettledError extends BatonSdkError {
  declare readonly code: typeof SdkErrorCode.offerUnsettled;
  constructor(
    readonly handoffId: string,
    /** The offer message's stream sequence, and how often it was delivered. */
    readonly seq: number,
    readonly deliveryCount: number,
    readonly claimRefusal: LedgerCommandError | null = null,
  ) {
    super(
      `onOffer returned without claiming handoff ${handoffId} or giving its offer up (offer seq ${seq}, delivery ${deliveryCount})` +
        `${claimRefusal !== null ? `; its claim was refused ${claimRefusal.code}` : ''}: the offer is delivered again, and given up to the ledger after maxDeliver deliveries. ` +
        'Claim it (tryClaim), or decline it with offer.giveUp(reason)',
      { code: SdkErrorCode.offerUnsettled },
    );
    this.name = 'OfferUnsettledError';
  }
}

/**
 * The reason an offer's `signal` is aborted with when its subscription is stopping
 * (`subscription.stop()`, `agent.close()`): wind the work down — end it (`finish`, `return`,
 * `release`, `fail`) or just return — before the stop's bound (`timeoutMs`) passes. `code` is
 * stable: `subscription_stopping`.
 */
export class SubscriptionStoppingError extends BatonSdkError {
  declare readonly code: typeof SdkErrorCode.subscriptionStopping;
  constructor(
    /** How long the stop waits for the handlers in flight, ms (Infinity: without a bound). */
    readonly timeoutMs: number,
  ) {
    super(`the offer subscription is stopping: finish or give up the work within ${Number.isFinite(timeoutMs) ? `${timeoutMs} ms` : 'the stop'}`, {
      code: SdkErrorCode.subscriptionStopping,
    });
    this.name = 'SubscriptionStoppingError';
  }
}

/**
 * Why pulling offers failed, for {@link OfferPullError}: `unavailable` — nothing answered the pull
 * (through the agent edge: no ledger relays it, every one stopped or restarting; directly:
 * JetStream is not there; `natsCode` `503`), whether the server said so to the pull's request or to
 * the pull itself; `timeout` — no answer in time (a stalled or disconnected server);
 * `consumer_lost` — the offers durable was deleted under the pull (`natsCode` `409`): the SDK has
 * the ledger open it again from where this agent's acknowledgements got to; `error` — anything else
 * the NATS client or the event store said (`natsCode`, when it has one).
 */
export type OfferPullFailure = 'unavailable' | 'timeout' | 'consumer_lost' | 'error';

/**
 * Pulling this agent's offers failed for now (handed to `onError`, never thrown; a lost durable,
 * `reason` `consumer_lost`, also to `onConsumerLost`, once per loss): the SDK keeps
 * trying, backing off up to 30 s, and takes offers again once the server (or the ledger relaying
 * the edge) answers. Nothing is lost — offers wait in their durable. `reason` says which failure,
 * `natsCode` is the server's or the NATS client's own code (`503`, `409`, `TIMEOUT`…) for
 * diagnostics, `cause` what the client or the event store raised. Every failure of the pull loop
 * is this error — never the client's own, nor the event store's `store_error` — except a refusal
 * the ledger answered when asked to open the durable again (`LedgerCommandError`) and a connection
 * closed for good: `onError` gets its `ConnectionClosed` once instead. `code` is stable:
 * `offer_pull_failed`.
 */
export class OfferPullError extends BatonSdkError {
  declare readonly code: typeof SdkErrorCode.offerPullFailed;
  readonly reason: OfferPullFailure;
  readonly natsCode: string | null;
  constructor(
    readonly durable: string,
    options: { cause: unknown; reason: OfferPullFailure; natsCode: string | null },
  ) {
    const said = options.cause instanceof Error ? options.cause.message : String(options.cause);
    super(`pulling offers from ${durable} failed (${options.reason}${options.natsCode !== null ? `, ${options.natsCode}` : ''}): ${said}; retrying`, {
      cause: options.cause,
      code: SdkErrorCode.offerPullFailed,
    });
    this.name = 'OfferPullError';
    this.reason = options.reason;
    this.natsCode = options.natsCode;
  }
}
