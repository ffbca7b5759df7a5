import { z } from 'zod';
import {
  clipText,
  DecideHandbackCommandSchema,
  GiveUpOfferCommandSchema,
  Limits,
  offeredHandoff,
  parseIgnoringUnknownKeys,
  parseUntrustedJson,
  rejectionFromZod,
  ReturnedAnswerSchema,
  type ClaimWithdrawn,
  type CompletionReportSchema,
  type HandoffRecord,
  type LedgerReply,
  type ReturnedAnswer,
} from '@baton/contracts';
import { hopTrace, LruCache, PoisonError, TransientError, traceHeaders, type ConsumedMessage, type HopTrace, type LedgerClient } from '@baton/eventstore';
import { ROUTER_DERIVED_HANDOFF_ID } from '@baton/domain';
import type { AgentResultInput, PublishReceipt } from './client';
import {
  ClaimLostError,
  CrossProjectResultError,
  DelegatedResultError,
  HandbackResultError,
  InvalidInputError,
  LedgerCommandError,
  NoRunResultError,
  NotClaimedError,
  OfferUnsettledError,
  type ClaimLostBy,
  type OfferEnding,
  type OfferGiveUp,
} from './errors';

/** A report as an agent writes it: `files_changed`, `verification`, `next_steps` and `evidence` may be left out. */
export type ReturnReport = z.input<typeof CompletionReportSchema>;

/** An agent result for {@link HandoffOffer.finish}: ids default from the handoff and the claim. */
export type FinishResult = Omit<AgentResultInput, 'handoff_id' | 'claim_id' | 'result_id' | 'run_id' | 'workflow_run_id'> &
  Partial<Pick<AgentResultInput, 'result_id' | 'run_id' | 'workflow_run_id'>>;

/** The lease assumed when a claim's record does not say how long it is (the ledger's default). */
const DEFAULT_LEASE_MS = 60_000;
/** The shortest auto-heartbeat interval. */
const MIN_BEAT_MS = 100;

/** How long a claimed record's lease is (claimed → expiry), or null when it does not say. */
function leaseOf(handoff: HandoffRecord): number | null {
  if (!handoff.lease_expires_at || !handoff.claimed_at) return null;
  const ms = Date.parse(handoff.lease_expires_at) - Date.parse(handoff.claimed_at);
  return Number.isFinite(ms) && ms > 0 ? ms : null;
}

export interface ClaimOptions {
  /** Lease length in ms (default: the ledger's configured lease). */
  leaseMs?: number;
  /**
   * Keep the lease alive while the work runs (default true): heartbeat every third of the lease
   * until `finish`, `return`, `release` or `fail` is called or the `onOffer` handler returns.
   * A heartbeat the ledger refuses (the lease expired and the handoff was requeued, or the handoff
   * ended: its deadline passed, it was abandoned…) aborts {@link HandoffOffer.signal} with a
   * `ClaimLostError` saying which (`lostBy`, `handoffEnded`): stop the work.
   */
  autoHeartbeat?: boolean | { everyMs: number };
}

/**
 * One handoff offered to this agent. Claim it, then end it with exactly one of `finish`,
 * `return`, `release` or `fail` — or decline it unclaimed with `giveUp(reason)`. A handler that
 * returns having done none of these (and whose `tryClaim()` did not resolve null) leaves the offer
 * unsettled: it counts as a failed delivery (`OfferUnsettledError` to `onError`, once), so the offer
 * is delivered again and, after `maxDeliver` deliveries, given up to the ledger (docs/handoffs.md
 * rule 5a) — never acknowledged into a handoff pending for nobody. Every helper is idempotent
 * (deterministic idempotency keys from the offer and the claim), so calling one again after a
 * timeout is safe.
 */
export interface HandoffOffer {
  readonly handoffId: string;
  readonly project: string;
  /** The offer message as published: the handoff record as it was when offered. */
  readonly offered: Readonly<Record<string, unknown>>;
  /** 1 on first delivery; more when an earlier attempt failed or its replica died. */
  readonly deliveryCount: number;
  /**
   * The handoff as the offer carried it, then as the ledger last answered (after claim and each
   * helper). Every offer the ledger publishes carries the whole record, so it is null only for an
   * offer message written by hand that names the handoff without being its record (`handoff_id`
   * alone, no `status` / `project`: `offered` has what it holds); once `claim()` resolved it is the
   * ledger's record, never null. Code that must compile under `strict` reads the record `claim()` /
   * `tryClaim()` resolves with, or checks `offer.handoff` first.
   */
  readonly handoff: HandoffRecord | null;
  /** The current claim id, null until claimed. */
  readonly claimId: string | null;
  /**
   * A step of a workflow run (or a mesh turn) the router routed to this agent, ended with
   * `finish(result)`; false for delegated work, a completion handback or a cross-project handoff,
   * which end through the ledger (`return`, `decide`, `release`, `fail`).
   */
  readonly isRunStep: boolean;
  /**
   * The callee's answer, when this offer gives control back to this agent after an agent it called
   * finished (`decisions.callAgent`: the return address, or the no-action default returning to the
   * caller), or after the returnable child it handed to returned — the replayed message the parent
   * gets itself, or its first turn after a return that left it waiting for the customer (ON_RETURN
   * `continue`) —: the callee (`from_agent`, `step`), its `result_id`, its `body` without the decision's
   * sentinel (null when it wrote none; cut at 16 384 characters: `body_truncated`) and its `evidence`
   * (or `evidence_omitted` when too large). Read from `handoff.context.returned`; null on any other offer.
   */
  readonly returned: ReturnedAnswer | null;
  /**
   * Aborted when the claim is lost (a heartbeat was refused: `reason` is a `ClaimLostError`, code
   * `claim_lost`, whose `lostBy` says why — the handoff still open, `lease_expired`,
   * `handoff_requeued`, `stale_claim`, or ended, `deadline_passed`, `handoff_abandoned`… with
   * `handoffEnded` true — and whose `refusal` is the ledger's `LedgerCommandError`),
   * when the subscription is stopping (`subscription.stop()`, `agent.close()`: a
   * `SubscriptionStoppingError`, code `subscription_stopping`), when the connection is closed for
   * good (the `ConnectionClosed`), or when the work ended.
   */
  readonly signal: AbortSignal;
  /**
   * Claim the handoff for this agent (optimistic: only a pending handoff addressed to this agent
   * or its role can be claimed). Retrying after a crash re-uses the same idempotency key, so a
   * claim that already succeeded is returned again.
   * @throws LedgerCommandError when the ledger refuses (e.g. `handoff_not_pending`: another replica won).
   */
  claim(options?: ClaimOptions): Promise<HandoffRecord>;
  /** Like {@link claim}, but resolves null when the ledger refuses because of the handoff's state or addressee. */
  tryClaim(options?: ClaimOptions): Promise<HandoffRecord | null>;
  /** Extend the lease now (auto-heartbeat does this for you). @throws LedgerCommandError, NotClaimedError */
  heartbeat(leaseMs?: number): Promise<HandoffRecord>;
  /** Return the work with a completion report; the ledger creates the completion handback. @throws LedgerCommandError, NotClaimedError */
  return(report: ReturnReport): Promise<HandoffRecord>;
  /** Decline the work; the handoff ends `released` and its delegator decides what next. @throws LedgerCommandError, NotClaimedError */
  release(reason: string): Promise<HandoffRecord>;
  /** Record that the work failed. @throws LedgerCommandError, NotClaimedError */
  fail(reason: string): Promise<HandoffRecord>;
  /**
   * Decline the offer without claiming it ("not for me", "not now"): tell the ledger at once
   * (`give_up_offer` as this agent, `deliveries` this delivery's count, `reason`, the offered
   * record's `version`; key `give_up:<handoff id>:<offer seq>`, the one a termination of this offer
   * would use), which counts a retry against the handoff's cap and offers it again (to this agent's
   * replicas: it is addressed to this agent), or escalates it at the cap to the lead or an operator
   * — a person hears of it; a returnable child fails at once (its run's ON_FAILURE); a completion
   * handback waits in the operators' inbox (docs/handoffs.md rule 5a). The offer is then settled:
   * acknowledged when the handler returns. After a claim, decline with `release(reason)` instead
   * (the ledger refuses a give-up of a claimed handoff: `handoff_not_pending`).
   * @throws InvalidInputError (nothing sent) for a blank or over-long reason; LedgerCommandError when
   *   the ledger refuses (`handoff_not_pending`, `not_the_addressee`, `stale_offer`: the handoff moved
   *   on since this offer — each of them settles the offer too).
   */
  giveUp(reason: string): Promise<HandoffRecord>;
  /**
   * Decide a completion handback offered to this agent for review (`kind: completion_handback`):
   * accept the work, or send it back for rework (a rework says what to change: `note`).
   * @throws LedgerCommandError (e.g. `self_accept_forbidden`, `handback_already_decided`, `not_a_handback`), NotClaimedError,
   *   InvalidInputError (nothing sent: a rework whose note is blank, a note too long)
   */
  decide(decision: 'accept', note?: string): Promise<HandoffRecord>;
  decide(decision: 'rework', note: string): Promise<HandoffRecord>;
  /**
   * Publish this agent's result for the handoff under its claim (`handoff_id` and `claim_id` set;
   * `workflow_run_id` from the handoff; `run_id` defaults to the claim id, `result_id` to
   * `res-<claim id>` (cut to the id length cap), so finishing twice with the same result publishes
   * once). A claim settles once: once a finish was acknowledged (or while one is being sent), a
   * finish under another `result_id` throws `NotClaimedError` (`endedBy: 'finish'`) and sends
   * nothing — the router would refuse a second result and count it toward this agent's circuit —,
   * as do `return`, `release`, `fail`, `decide` and `heartbeat`. The router accepts a result only under the current claim of
   * the run's current handoff (docs/runs.md): a claim lost meanwhile (lease expired, requeued) is
   * refused there (`handoff_not_claimed`, `claim_mismatch`). The router records it on the run and
   * closes the handoff (`complete_from_result`).
   * A cross-project handoff (`source_project` on the handoff) is not finished this way: its run is
   * another project's, which this agent may not publish results to; end it with `return(report)`.
   * A handoff of no workflow run (an agent's own `create`) has no run to record a result on: end it
   * with `return(report)` too.
   * @throws NotClaimedError (nothing sent) when the offer was not claimed, or its claim was already
   *   settled (`endedBy`: a finish under another `result_id`, a return…); CrossProjectResultError
   *   (nothing sent, the claim kept) on a cross-project handoff; NoRunResultError (nothing sent, the
   *   claim kept) on a handoff of no run; DelegatedResultError (nothing sent, the claim kept) on work
   *   an agent delegated naming a run (not {@link isRunStep}); HandbackResultError (nothing sent, the claim kept) on a
   *   completion handback (decide it); InvalidInputError when the result breaks the contract.
   */
  finish(result: FinishResult): Promise<PublishReceipt>;
}

export interface OfferHandlerDeps {
  project: string;
  agent: string;
  /** This client among the agent's replicas: part of the claim's idempotency key. */
  instance: string;
  ledger: Pick<LedgerClient, 'claim' | 'heartbeat' | 'return' | 'release' | 'fail' | 'decideHandback' | 'giveUpOffer'>;
  /** `trace`: the hop the result continues (the offer's trace, or the caller's active one). */
  publishResult: (result: AgentResultInput, trace?: HopTrace) => Promise<PublishReceipt>;
  onOffer: (offer: HandoffOffer) => Promise<void> | void;
  /** Told once per offer message that a handler returned without settling it (the subscription's `onError`; default: `console.warn`). */
  warn?: (error: OfferUnsettledError) => void;
}

const decoder = new TextDecoder();
/** Ledger answers that say nothing of the claim: the ledger could not decide now, or failed. */
const TRANSIENT_KINDS: ReadonlySet<string> = new Set(['unavailable', 'internal']);
/** Refusals that mean "not yours to take", as opposed to faults. */
const NOT_AVAILABLE_KINDS = new Set(['wrong_state', 'forbidden', 'not_found']);

/** What the failed deliveries of one offer message did, until it is settled: what a give-up tells the ledger. */
interface FailedOffer {
  handoffId: string;
  /** The record version the offer carried, when it carried a record. */
  version: number | undefined;
  /**
   * A delivery of this offer claimed its handoff (its lease, not a give-up, decides what follows),
   * or gave its offer up already (`offer.giveUp`): a termination tells the ledger nothing more.
   */
  claimed: boolean;
}

/** Offers whose handler failed and that are not settled yet, remembered per process (bounded). */
const FAILED_OFFERS_CAPACITY = 1024;

/** The key of a give-up of one offer message: the handler's own (`offer.giveUp`) and a termination's are one give-up. */
const giveUpKey = (handoffId: string, seq: number): string => `give_up:${handoffId}:${seq}`;

/** The runner handler of an agent's offers, and what to do when the runner terminates one. */
export interface OfferHandler {
  (msg: ConsumedMessage): Promise<void>;
  /**
   * The runner terminated `msg` (its handler failed `maxDeliver` times, or it named no handoff).
   * When no delivery of it claimed its handoff, tell the ledger (`give_up_offer`, as this agent;
   * idempotency key `give_up:<handoff id>:<offer seq>`, naming the version the offer carried), so
   * the handoff is offered again or escalated instead of left pending for nobody. Resolves with
   * the handoff id (null: the bytes named none) and what the ledger answered (absent when nothing
   * was sent: no handoff, or a delivery claimed it). Never throws.
   */
  terminated(msg: ConsumedMessage, error: unknown): Promise<{ handoffId: string | null; giveUp?: OfferGiveUp }>;
  /**
   * The ledger said a claim of this agent was taken away (`claim-withdrawn.json`): an offer being
   * handled here under that claim asks the ledger at once (a heartbeat), and the refusal aborts its
   * `signal` as a refused auto-heartbeat would — now instead of at the next beat. A notice for a
   * claim no offer here holds is ignored; one the ledger contradicts (the claim is still held)
   * changes nothing but the lease it renewed.
   */
  withdrawn(notice: ClaimWithdrawn): void;
  /**
   * The subscription is stopping (or its connection is gone): abort the `signal` of every offer
   * whose handler still runs, and of every offer handed over from now on, with `reason`.
   */
  stopping(reason: unknown): void;
  /** The offers whose handler is still running, as a stop that gave up waiting reports them. */
  unfinished(): UnfinishedOffer[];
  /**
   * A stop gave up waiting: the SDK no longer keeps the claims of the offers still running alive
   * (their auto-heartbeats stop), so a claim lapses at its lease's end and its handoff is offered again.
   */
  letGo(): void;
}

/** An offer whose handler was still running when a bounded `stop()` / `close()` stopped waiting for it. */
export interface UnfinishedOffer {
  readonly handoffId: string;
  /** The claim it held, null when it never claimed. */
  readonly claimId: string | null;
  /** The offer message's stream sequence, and how often it was delivered. */
  readonly seq: number;
  readonly deliveryCount: number;
}

/**
 * One line saying why the handler gave up, for the ledger (`reason`: not blank, within the
 * short-text cap): its last error, or — when it last returned without settling the offer — that.
 */
function giveUpReason(deliveries: number, error: unknown): string {
  const times = `${deliveries} time${deliveries === 1 ? '' : 's'}`;
  if (error instanceof OfferUnsettledError) {
    const refused = error.claimRefusal !== null ? ` (its claim refused ${error.claimRefusal.code})` : '';
    return clipText(`onOffer returned without claiming or giving up the offer, ${times}${refused}`);
  }
  const message = (error instanceof Error ? error.message : String(error)).replace(/\s+/g, ' ').trim();
  const text = `onOffer failed ${times}${message !== '' ? `: ${message}` : ''}`;
  return clipText(text);
}

/** Build the runner handler that turns offer messages into {@link HandoffOffer}s. */
export function createOfferHandler(deps: OfferHandlerDeps): OfferHandler {
  const failed = new LruCache<number, FailedOffer>(FAILED_OFFERS_CAPACITY);
  /** The offer messages whose unsettled return was told (`warn`): once per offer. */
  const warned = new LruCache<number, true>(FAILED_OFFERS_CAPACITY);
  /** The offers whose handler is running, by handoff id (a withdrawal names the handoff). */
  const live = new Map<string, Set<Offer>>();
  /** Set once the subscription is stopping: an offer handed over after it starts aborted. */
  let stoppedBy: { reason: unknown } | null = null;
  const handle = async (msg: ConsumedMessage): Promise<void> => {
    const decoded = parseUntrustedJson(decoder.decode(msg.data), Limits.maxMessageBytes);
    if (!decoded.ok) throw new PoisonError(decoded.rejection.message, decoded.rejection.code);
    // The HandoffRecord as offered; only its id and version are read here (the ledger's replies carry the rest).
    const offered = offeredHandoff(decoded.value);
    if (offered === null) throw new PoisonError('an offer names no handoff_id', 'schema_violation');
    const { handoffId } = offered;
    const offer = new Offer(deps, handoffId, offered.message, offered.version, msg);
    const running = live.get(handoffId) ?? new Set<Offer>();
    running.add(offer);
    live.set(handoffId, running);
    if (stoppedBy !== null) offer.stop(stoppedBy.reason);
    try {
      await deps.onOffer(offer);
      // Returned without settling the offer: a failed delivery, not an acknowledgement (rule 5a).
      const unsettled = offer.unsettled(stoppedBy !== null);
      if (unsettled !== null) {
        if (unsettled instanceof OfferUnsettledError && warned.get(msg.seq) === undefined) {
          warned.set(msg.seq, true);
          (deps.warn ?? ((e: OfferUnsettledError) => console.warn(`[baton sdk] ${e.message}`)))(unsettled);
        }
        throw unsettled;
      }
      failed.delete(msg.seq);
      warned.delete(msg.seq);
    } catch (error) {
      // A paused project: the offer is let go (acknowledged). The handoff stays pending, and the
      // project's resume offers every pending handoff again in a new message, so redelivering this
      // one every few seconds for as long as the pause lasts would only ask the ledger again.
      if (error instanceof LedgerCommandError && error.code === 'project_paused') {
        failed.delete(msg.seq);
        warned.delete(msg.seq);
        return;
      }
      // Remembered for a give-up, should the runner terminate this offer (see `terminated`).
      const before = failed.get(msg.seq);
      failed.set(msg.seq, { handoffId, version: offered.version, claimed: (before?.claimed ?? false) || offer.claimId !== null || offer.gaveUp });
      // The rate cap: redeliver the offer later, not at once, and as long as it lasts — it says
      // nothing about the offer, and giving the offer up would count a retry against its handoff.
      if (error instanceof LedgerCommandError && error.code === 'rate_limited') {
        const after = error.details?.['retry_after_ms'];
        throw new TransientError(error.message, { cause: error, delayMs: typeof after === 'number' ? after : 5_000, unbounded: true });
      }
      throw error;
    } finally {
      offer.end();
      running.delete(offer);
      if (running.size === 0 && live.get(handoffId) === running) live.delete(handoffId);
    }
  };
  const withdrawn = (notice: ClaimWithdrawn): void => {
    for (const offer of live.get(notice.handoff_id) ?? []) offer.confirmWithdrawn(notice.claim_id);
  };
  const terminated = async (msg: ConsumedMessage, error: unknown): Promise<{ handoffId: string | null; giveUp?: OfferGiveUp }> => {
    const attempts = failed.get(msg.seq);
    failed.delete(msg.seq);
    warned.delete(msg.seq);
    if (attempts === undefined) return { handoffId: null };
    if (attempts.claimed) return { handoffId: attempts.handoffId };
    try {
      const reply = await deps.ledger.giveUpOffer(deps.project, {
        handoff_id: attempts.handoffId,
        ...(attempts.version !== undefined ? { offered_version: attempts.version } : {}),
        deliveries: msg.deliveryCount,
        reason: giveUpReason(msg.deliveryCount, error),
        idempotency_key: giveUpKey(attempts.handoffId, msg.seq),
      });
      return { handoffId: attempts.handoffId, giveUp: reply.ok ? { recorded: true, handoff: reply.handoff } : { recorded: false, error: reply.error } };
    } catch (cause) {
      return {
        handoffId: attempts.handoffId,
        giveUp: { recorded: false, error: { code: 'sdk_error', kind: 'internal', message: cause instanceof Error ? cause.message : String(cause) } },
      };
    }
  };
  const everyLive = (): Offer[] => [...live.values()].flatMap((offers) => [...offers]);
  const stopping = (reason: unknown): void => {
    stoppedBy ??= { reason };
    for (const offer of everyLive()) offer.stop(stoppedBy.reason);
  };
  const unfinished = (): UnfinishedOffer[] => everyLive().map((offer) => offer.unfinished());
  const letGo = (): void => {
    for (const offer of everyLive()) offer.letGo();
  };
  return Object.assign(handle, { terminated, withdrawn, stopping, unfinished, letGo });
}

class Offer implements HandoffOffer {
  handoff: HandoffRecord | null = null;
  claimId: string | null = null;
  readonly deliveryCount: number;
  private readonly abort = new AbortController();
  private timer: NodeJS.Timeout | null = null;
  private beats = 0;
  /** The lease this claim was taken with (what a heartbeat without a length renews it to). */
  private claimLeaseMs: number | null = null;
  /** The helper that settled this offer's claim (`finish`, `return`, `release`, `fail`, `decide`), once it was accepted. */
  private endedBy: OfferEnding | null = null;
  /** The `result_id` of this offer's finish: being sent (`finishing`), then acknowledged (`finishedWith`). */
  private finishing: string | null = null;
  private finishedWith: string | null = null;
  /** The ledger's last refusal of this offer's claim (cleared by a claim): what the handler's return is judged by. */
  private claimRefusal: LedgerCommandError | null = null;
  /** This offer was given up to the ledger (`giveUp`), or the ledger answered that it moved on: settled. */
  gaveUp = false;
  /** Claims this offer took (a claim after one lapsed is a new one, with a key of its own). */
  private claims = 0;
  /** Why a refused heartbeat said this offer's claim is lost (cleared by a new claim). */
  private lostBy: ClaimLostBy | null = null;

  constructor(
    private readonly deps: OfferHandlerDeps,
    readonly handoffId: string,
    readonly offered: Readonly<Record<string, unknown>>,
    /** The record version the offer carried (what a give-up names), when it carried one. */
    private readonly offeredVersion: number | undefined,
    private readonly msg: ConsumedMessage,
  ) {
    this.deliveryCount = msg.deliveryCount;
    if (typeof offered['status'] === 'string' && typeof offered['project'] === 'string') this.handoff = offered as unknown as HandoffRecord;
  }

  get project(): string {
    return this.deps.project;
  }

  /**
   * The trace a call made for this offer continues: the caller's active one when it has one (an
   * OpenTelemetry SDK of its own), else the offer's — the run's, which the offer carried from the
   * result that routed it — so a run stays one trace through every agent that uses the SDK. A new
   * span of it per call.
   */
  private trace(): HopTrace | undefined {
    const active = traceHeaders();
    return Object.keys(active).length > 0 ? hopTrace(active, false) : hopTrace(this.msg.headers, false);
  }

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  async claim(options: ClaimOptions = {}): Promise<HandoffRecord> {
    const held = this.heldClaim();
    if (held !== null) return held;
    try {
      const handoff = await this.claimNow(options);
      this.claimRefusal = null;
      return handoff;
    } catch (error) {
      // Remembered: a refusal saying the handoff is not this agent's to take settles the offer.
      if (error instanceof LedgerCommandError) this.claimRefusal = error;
      throw error;
    }
  }

  private async claimNow(options: ClaimOptions): Promise<HandoffRecord> {
    const reply = await this.deps.ledger.claim(
      this.project,
      {
        handoff_id: this.handoffId,
        // A retry of this client's claim of this delivery is the same claim; another replica given
        // the same offer (redelivered while this one stalled) is another claimer, refused while the
        // claim is held (tryClaim: null), not handed this one's claim to work it twice. Once a claim
        // of this offer lapsed (its lease ran out), claiming again is a new claim with a key of its own.
        idempotency_key: `claim:${this.handoffId}:${this.msg.seq}:${this.deps.instance}${this.claims > 0 ? `:${this.claims + 1}` : ''}`,
        ...(options.leaseMs !== undefined ? { lease_ms: options.leaseMs } : {}),
      },
      { trace: this.trace() },
    );
    const handoff = this.accept('claim', reply);
    if (handoff.status !== 'claimed' || handoff.claimed_by !== this.deps.agent || !handoff.claim_id) {
      throw new LedgerCommandError('claim', this.handoffId, {
        code: 'handoff_not_pending',
        kind: 'wrong_state',
        message: `handoff ${this.handoffId} is ${handoff.status}${handoff.claimed_by ? ` (claimed by ${handoff.claimed_by})` : ''}`,
      });
    }
    this.claimId = handoff.claim_id;
    this.claims++;
    this.lostBy = null;
    this.claimLeaseMs = options.leaseMs ?? leaseOf(handoff);
    this.startHeartbeat(options);
    return handoff;
  }

  async tryClaim(options: ClaimOptions = {}): Promise<HandoffRecord | null> {
    try {
      return await this.claim(options);
    } catch (error) {
      if (error instanceof LedgerCommandError && NOT_AVAILABLE_KINDS.has(error.kind)) return null;
      throw error;
    }
  }

  async heartbeat(leaseMs?: number): Promise<HandoffRecord> {
    const claimId = this.requireClaim('heartbeat');
    this.beats++;
    // Without a length, the lease is renewed to the one the claim was taken with (the ledger's
    // own default would shorten a long claim's lease, or lengthen a short one's).
    const length = leaseMs ?? this.claimLeaseMs ?? undefined;
    const reply = await this.deps.ledger.heartbeat(
      this.project,
      {
        handoff_id: this.handoffId,
        claim_id: claimId,
        idempotency_key: `hb:${claimId}:${this.beats}:${Date.now()}`,
        ...(length !== undefined ? { lease_ms: length } : {}),
      },
      { trace: this.trace() },
    );
    try {
      return this.accept('heartbeat', reply);
    } catch (error) {
      // A refusal (lease expired, claim lost or stale, the handoff ended) means someone else may
      // hold the handoff, or no one will: whoever sent the beat (auto-heartbeat or the handler),
      // stop beating and abort the signal, saying why from the refusal's code and details.
      if (error instanceof LedgerCommandError && !TRANSIENT_KINDS.has(error.kind)) {
        this.stopHeartbeat();
        const lost = new ClaimLostError(this.handoffId, error);
        this.lostBy = lost.lostBy;
        if (!this.abort.signal.aborted) this.abort.abort(lost);
      }
      throw error;
    }
  }

  async return(report: ReturnReport): Promise<HandoffRecord> {
    const claimId = this.requireClaim('return');
    this.stopHeartbeat();
    const reply = await this.deps.ledger.return(
      this.project,
      {
        handoff_id: this.handoffId,
        claim_id: claimId,
        report,
        idempotency_key: `return:${claimId}`,
      },
      { trace: this.trace() },
    );
    return this.ending('return', reply);
  }

  async release(reason: string): Promise<HandoffRecord> {
    const claimId = this.requireClaim('release');
    this.stopHeartbeat();
    const reply = await this.deps.ledger.release(
      this.project,
      {
        handoff_id: this.handoffId,
        claim_id: claimId,
        reason,
        idempotency_key: `release:${claimId}`,
      },
      { trace: this.trace() },
    );
    return this.ending('release', reply);
  }

  async fail(reason: string): Promise<HandoffRecord> {
    const claimId = this.requireClaim('fail');
    this.stopHeartbeat();
    const reply = await this.deps.ledger.fail(
      this.project,
      { handoff_id: this.handoffId, claim_id: claimId, reason, idempotency_key: `fail:${claimId}` },
      { trace: this.trace() },
    );
    return this.ending('fail', reply);
  }

  async giveUp(reason: string): Promise<HandoffRecord> {
    const body = {
      handoff_id: this.handoffId,
      ...(this.offeredVersion !== undefined ? { offered_version: this.offeredVersion } : {}),
      deliveries: this.deliveryCount,
      reason,
      idempotency_key: giveUpKey(this.handoffId, this.msg.seq),
    };
    // Held to the ledger's contract here: a give-up that says nothing is not sent.
    const parsed = GiveUpOfferCommandSchema.safeParse(body);
    if (!parsed.success) throw new InvalidInputError('offer give-up', rejectionFromZod(parsed.error));
    const reply = await this.deps.ledger.giveUpOffer(this.project, body, { trace: this.trace() });
    // Given up, or the ledger says the handoff moved on from this offer (claimed, ended, offered
    // again): either way nothing is left for this offer to do. An undecided answer settles nothing.
    if (reply.ok || !TRANSIENT_KINDS.has(reply.error.kind)) this.gaveUp = true;
    return this.accept('give_up_offer', reply);
  }

  /**
   * Whether the handler's return settled this offer: null when it did (a claim, a give-up, or a
   * claim the ledger refused because the handoff is not this agent's to take), else the error the
   * delivery fails with — the ledger's `rate_limited` / `project_paused` refusal the handler caught
   * (handled as if it had let it through), a transient error while the subscription stops (the
   * offer is for another replica), or an {@link OfferUnsettledError}.
   */
  unsettled(stopping: boolean): Error | null {
    if (this.claims > 0 || this.gaveUp) return null;
    const refusal = this.claimRefusal;
    if (refusal !== null) {
      if (NOT_AVAILABLE_KINDS.has(refusal.kind)) return null;
      if (refusal.code === 'rate_limited' || refusal.code === 'project_paused') return refusal;
    }
    if (stopping) return new TransientError('the subscription stopped before the offer was settled: it is delivered again', { delayMs: 0, unbounded: true });
    return new OfferUnsettledError(this.handoffId, this.msg.seq, this.deliveryCount, refusal);
  }

  async decide(decision: 'accept' | 'rework', note?: string): Promise<HandoffRecord> {
    const claimId = this.requireClaim('decide');
    const body =
      decision === 'accept'
        ? { handoff_id: this.handoffId, decision, ...(note !== undefined ? { note } : {}), idempotency_key: `decide:${claimId}` }
        : { handoff_id: this.handoffId, decision, note: note ?? '', idempotency_key: `decide:${claimId}` };
    // Held to the ledger's contract here, as a result is: a rework that says nothing is not sent.
    const parsed = DecideHandbackCommandSchema.safeParse(body);
    if (!parsed.success) throw new InvalidInputError('handback decision', rejectionFromZod(parsed.error));
    this.stopHeartbeat();
    const reply = await this.deps.ledger.decideHandback(this.project, body, { trace: this.trace() });
    return this.ending('decide', reply);
  }

  /** The callee's answer this offer carries back to its caller (`handoff.context.returned`), else null. */
  get returned(): ReturnedAnswer | null {
    const value = this.handoff?.context['returned'];
    if (value === undefined) return null;
    // Baton wrote it: a field a newer Baton added is left out, not a reason to drop the answer.
    const parsed = parseIgnoringUnknownKeys(ReturnedAnswerSchema, value);
    return parsed.success ? parsed.data : null;
  }

  /**
   * True when this handoff is a step of a workflow run (or a mesh turn) that the router routed to
   * this agent: its id is one only the router creates (`ho-…`, `mh-…`), it is no completion
   * handback, and its run is this project's. Such a handoff ends with `finish(result)`; any other
   * (delegated work, a review, a cross-project handoff) ends through the ledger: `return`,
   * `decide`, `release`, `fail`.
   */
  get isRunStep(): boolean {
    const handoff = this.handoff;
    if (handoff?.kind === 'completion_handback') return false;
    if (handoff?.source_project !== undefined && handoff.source_project !== this.project) return false;
    return ROUTER_DERIVED_HANDOFF_ID.test(this.handoffId);
  }

  async finish(result: FinishResult): Promise<PublishReceipt> {
    const claimId = this.requireClaim('finish');
    const resultId = result.result_id ?? `res-${claimId}`.slice(0, Limits.maxIdLength);
    // One result per claim: the same one again is its retry (published once); another would be
    // refused by the router and counted toward this agent's circuit.
    const settledWith = this.finishedWith ?? this.finishing;
    if (settledWith !== null && settledWith !== resultId) throw new NotClaimedError(this.handoffId, 'finish', 'finish');
    // A completion handback is a review: it is decided, never finished with a run result (the run
    // waits for someone else's, and a refused result counts toward this agent's circuit).
    if (this.handoff?.kind === 'completion_handback') throw new HandbackResultError(this.handoffId);
    // A run id means something only with its project: a cross-project handoff's run is its source
    // project's, and this agent publishes results only on its own project's subject.
    const runProject = this.handoff?.source_project;
    if (runProject !== undefined && runProject !== this.project) {
      throw new CrossProjectResultError(this.handoffId, this.project, runProject, this.handoff?.workflow_run_id);
    }
    const workflowRunId = result.workflow_run_id ?? this.handoff?.workflow_run_id;
    if (workflowRunId === undefined) throw new NoRunResultError(this.handoffId);
    // A run takes a result only on the handoff the router routed to it: one an agent delegated
    // (naming the run for context) would be refused, and the refusal would count against this agent.
    if (!this.isRunStep) throw new DelegatedResultError(this.handoffId, workflowRunId);
    this.stopHeartbeat();
    this.finishing = resultId;
    try {
      const receipt = await this.deps.publishResult(
        { ...result, handoff_id: this.handoffId, claim_id: claimId, workflow_run_id: workflowRunId, run_id: result.run_id ?? claimId, result_id: resultId },
        this.trace(),
      );
      this.finishedWith = resultId;
      this.endedBy = 'finish';
      return receipt;
    } finally {
      this.finishing = null;
    }
  }

  /**
   * The ledger said claim `claimId` was taken away: when it is this offer's live claim, ask the
   * ledger with a heartbeat, whose refusal stops the beats and aborts the signal (see `heartbeat`).
   */
  confirmWithdrawn(claimId: string): void {
    if (this.claimId !== claimId || this.lostBy !== null || this.endedBy !== null || this.abort.signal.aborted) return;
    this.heartbeat().catch(() => undefined);
  }

  /** The subscription is stopping: abort the signal with `reason` (the handler should wind down). */
  stop(reason: unknown): void {
    if (!this.abort.signal.aborted) this.abort.abort(reason);
  }

  /** A stop gave up waiting for this offer's handler: no more auto-heartbeats (the claim lapses at its lease's end). */
  letGo(): void {
    this.stopHeartbeat();
  }

  unfinished(): UnfinishedOffer {
    return { handoffId: this.handoffId, claimId: this.claimId, seq: this.msg.seq, deliveryCount: this.deliveryCount };
  }

  /** Called when the onOffer handler has returned: stop heartbeating, abort the signal. */
  end(): void {
    this.stopHeartbeat();
    if (!this.abort.signal.aborted) this.abort.abort(new Error('the offer handler returned'));
  }

  private accept(command: string, reply: LedgerReply): HandoffRecord {
    if (!reply.ok) throw new LedgerCommandError(command, this.handoffId, reply.error);
    this.handoff = reply.handoff;
    return reply.handoff;
  }

  /**
   * The claim this offer still holds, as far as it knows (its lease not past by this clock, not lost
   * to a refused heartbeat, not given up): claim() again is then that claim, with no request.
   */
  private heldClaim(): HandoffRecord | null {
    const handoff = this.handoff;
    if (this.claimId === null || this.endedBy !== null || this.abort.signal.aborted || handoff === null) return null;
    if (handoff.status !== 'claimed' || handoff.claim_id !== this.claimId || handoff.lease_expires_at === undefined) return null;
    return Date.parse(handoff.lease_expires_at) > Date.now() ? handoff : null;
  }

  /** The reply to `return` / `release` / `fail` / `decide`: once accepted, this offer's claim is given up. */
  private ending(action: Exclude<OfferEnding, 'finish'>, reply: LedgerReply): HandoffRecord {
    const handoff = this.accept(action, reply);
    this.endedBy = action;
    return handoff;
  }

  private requireClaim(action: string): string {
    if (this.claimId === null) throw new NotClaimedError(this.handoffId, action);
    // A refused heartbeat said the claim is gone (lease expired, another claim since, the handoff
    // ended): a result or an ending under it would only be refused — and a refused result counts
    // toward the agent's circuit.
    if (this.lostBy !== null) throw new NotClaimedError(this.handoffId, action, null, this.lostBy);
    // The claim this offer gave up: only the same ending again (a retry, the ledger's idempotent reply).
    if (this.endedBy !== null && this.endedBy !== action) throw new NotClaimedError(this.handoffId, action, this.endedBy);
    return this.claimId;
  }

  private startHeartbeat(options: ClaimOptions): void {
    if (options.autoHeartbeat === false || this.timer !== null) return;
    const leaseMs = this.claimLeaseMs ?? DEFAULT_LEASE_MS;
    // Every third of the lease, however short (the ledger takes leases from 1 s): a floor above a
    // third would send the first beat after a short lease had already run out.
    const everyMs = typeof options.autoHeartbeat === 'object' ? options.autoHeartbeat.everyMs : Math.max(MIN_BEAT_MS, Math.floor(leaseMs / 3));
    this.timer = setInterval(() => {
      // The ledger unreachable or failing for now (a timeout after the client's retries, a store
      // outage) says nothing of the claim: the next beat tries again while the lease lasts. A
      // refusal has already stopped the beats and aborted the signal (heartbeat).
      this.heartbeat().catch(() => undefined);
    }, everyMs);
    this.timer.unref();
  }

  private stopHeartbeat(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}
