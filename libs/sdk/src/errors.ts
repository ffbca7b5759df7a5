import { leadingCode, type EdgeRefusalIssue, type EdgeRefusalReason, type HandoffRecord, type Rejection } from '@baton/contracts';

/**
 * Base class of every error the SDK throws on purpose. `code` is stable — branch on it, never on
 * the message: `schema_violation` (and the other rejection codes) for {@link InvalidInputError},
 * the ledger's code for {@link LedgerCommandError}, `not_claimed`, `cross_project_result`, `duplicate_message_id`, `message_id_reused`,
 * `offer_terminated`, `offer_pull_failed`, `subscription_stopping`, `mesh_invalid`, and the agent edge's reasons for {@link EdgeRefusedError}. Publishes also throw the event store's errors
 * (`PublishTimeout`, `StreamNotFound`, `PermissionDenied`, … re-exported here), whose `code` is one
 * of `EventStoreErrorCode`; a connection closed for good is the event store's `ConnectionClosed`
 * (`connection_closed`).
 */
export class BatonSdkError extends Error {
  readonly code: string;
  constructor(message: string, options?: { cause?: unknown; code?: string }) {
    super(message, options);
    this.name = 'BatonSdkError';
    this.code = options?.code ?? 'sdk_error';
  }
}

/**
 * A value the SDK was asked to send failed its wire contract (an agent result that fails
 * `AgentResultSchema`, a run start without a run id...). Nothing was sent. `rejection` names
 * every offending field, in the shape the services use.
 */
export class InvalidInputError extends BatonSdkError {
  constructor(
    readonly what: string,
    readonly rejection: Rejection,
  ) {
    // The first issue's own code when its check has one (a start with nobody to notify is
    // `no_notice_recipient`), as the router and the CLI report it: one code for one refusal.
    super(`invalid ${what}: ${rejection.message}`, { code: leadingCode(rejection) });
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
  readonly kind: string;
  readonly details: Record<string, unknown> | undefined;
  constructor(
    readonly command: string,
    readonly handoffId: string,
    error: LedgerErrorBody,
  ) {
    super(`ledger refused ${command}${handoffId !== '' ? ` on handoff ${handoffId}` : ''}: ${error.code}: ${error.message}`, { code: error.code });
    this.name = 'LedgerCommandError';
    this.kind = error.kind;
    this.details = error.details;
  }
}

/**
 * A claim-bound helper (heartbeat, return, release, fail, finish) was called on an offer this agent
 * holds no claim on: never claimed, or its claim already given up by this offer's own `return`,
 * `release` or `fail` (`endedBy`), or lost as a refused heartbeat said (`lostBy`). Nothing was sent.
 */
export class NotClaimedError extends BatonSdkError {
  constructor(
    readonly handoffId: string,
    action: string,
    /** The helper that already ended this offer's claim (`return`, `release`, `fail`), if any. */
    readonly endedBy: 'return' | 'release' | 'fail' | 'decide' | null = null,
    /** The code of the heartbeat refusal that said the claim is lost (`lease_expired`, `stale_claim`…), if that is why. */
    readonly lostBy: string | null = null,
  ) {
    super(
      endedBy !== null
        ? `cannot ${action} handoff ${handoffId}: this offer already ended its claim (${endedBy}); nothing was sent`
        : lostBy !== null
          ? `cannot ${action} handoff ${handoffId}: its claim is lost (a heartbeat was refused: ${lostBy}); claim() it again; nothing was sent`
          : `cannot ${action} handoff ${handoffId}: claim() it first`,
      { code: 'not_claimed' },
    );
    this.name = 'NotClaimedError';
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
  constructor(
    readonly handoffId: string,
    readonly project: string,
    readonly runProject: string,
    readonly workflowRunId: string | undefined,
  ) {
    super(
      `cannot finish handoff ${handoffId} with a run result: it is a cross-project handoff whose run${workflowRunId !== undefined ? ` ${workflowRunId}` : ''} belongs to project ${runProject}, not ${project}; end it through the ledger with return() (or release() / fail())`,
      { code: 'cross_project_result' },
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
  constructor(readonly handoffId: string) {
    super(
      `cannot finish handoff ${handoffId} with a run result: it belongs to no workflow run; end it through the ledger with return() (or release() / fail())`,
      { code: 'handoff_has_no_run' },
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
  constructor(
    readonly handoffId: string,
    readonly workflowRunId: string,
  ) {
    super(
      `cannot finish handoff ${handoffId} with a result of run ${workflowRunId}: an agent delegated it, the router did not route it to this agent for the run; end it with return(report) (or release() / fail())`,
      { code: 'delegated_handoff' },
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
  constructor(readonly handoffId: string) {
    super(
      `cannot finish handoff ${handoffId} with a run result: it is a completion handback to review; decide it with decide('accept') or decide('rework', note)`,
      {
        code: 'completion_handback',
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
        code: 'duplicate_message_id',
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
  constructor(
    readonly msgId: string,
    readonly subject: string,
  ) {
    super(
      `this client already published other content under message id ${msgId}: nothing was sent; retry with the same content, or use a new id for a new message`,
      {
        code: 'message_id_reused',
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
  constructor(
    readonly subject: string,
    readonly tries: number,
    readonly waitedMs: number,
    options?: { cause?: unknown },
  ) {
    super(
      `no ledger relayed the agent edge for ${subject} (${tries} tries over ${waitedMs} ms: every ledger is stopped or restarting); nothing was stored — publish it again later (the same id)`,
      { code: 'edge_unavailable', ...(options?.cause !== undefined ? { cause: options.cause } : {}) },
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
      { ...(options?.cause !== undefined ? { cause: options.cause } : {}), code: 'offer_terminated' },
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
 * The reason an offer's `signal` is aborted with when its subscription is stopping
 * (`subscription.stop()`, `agent.close()`): wind the work down — end it (`finish`, `return`,
 * `release`, `fail`) or just return — before the stop's bound (`timeoutMs`) passes. `code` is
 * stable: `subscription_stopping`.
 */
export class SubscriptionStoppingError extends BatonSdkError {
  constructor(
    /** How long the stop waits for the handlers in flight, ms (Infinity: without a bound). */
    readonly timeoutMs: number,
  ) {
    super(`the offer subscription is stopping: finish or give up the work within ${Number.isFinite(timeoutMs) ? `${timeoutMs} ms` : 'the stop'}`, {
      code: 'subscription_stopping',
    });
    this.name = 'SubscriptionStoppingError';
  }
}

/**
 * Why pulling offers failed, for {@link OfferPullError}: `unavailable` — nothing answered the pull
 * (through the agent edge: no ledger relays it, every one stopped or restarting; directly:
 * JetStream is not there); `timeout` — no answer in time (a stalled or disconnected server);
 * `error` — anything else the NATS client said (`natsCode`).
 */
export type OfferPullFailure = 'unavailable' | 'timeout' | 'error';

/**
 * Pulling this agent's offers failed for now (handed to `onError`, never thrown): the SDK keeps
 * trying, backing off up to 30 s, and takes offers again once the server (or the ledger relaying
 * the edge) answers. Nothing is lost — offers wait in their durable. `reason` says which failure,
 * `natsCode` is the NATS client's own code (`503`, `TIMEOUT`…) for diagnostics. A connection
 * closed for good is never this error: `onError` gets the `ConnectionClosed` once instead.
 * `code` is stable: `offer_pull_failed`.
 */
export class OfferPullError extends BatonSdkError {
  readonly reason: OfferPullFailure;
  readonly natsCode: string | null;
  constructor(
    readonly durable: string,
    options: { cause: unknown; reason: OfferPullFailure; natsCode: string | null },
  ) {
    const said = options.cause instanceof Error ? options.cause.message : String(options.cause);
    super(`pulling offers from ${durable} failed (${options.reason}${options.natsCode !== null ? `, ${options.natsCode}` : ''}): ${said}; retrying`, {
      cause: options.cause,
      code: 'offer_pull_failed',
    });
    this.name = 'OfferPullError';
    this.reason = options.reason;
    this.natsCode = options.natsCode;
  }
}
