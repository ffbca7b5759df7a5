import type { HandoffEvent } from '@baton/contracts';
import { evolveHandoff, initialHandoffState, type HandoffState } from '../handoff/state';

/**
 * What the router read of the handoff a result names, just before it decides: the handoff's id,
 * its status (`absent` when it has no events yet) and its current claim. The router folds the
 * handoff aggregate (the ledger's, read-only) into this view; the deciders never look anything up.
 */
export interface HandoffClaimView {
  handoff_id: string;
  status: HandoffState['status'];
  /**
   * The current claim: set while the handoff is `claimed` (and kept on a `returned` or closed one, which no result may answer),
   * with its lease's expiry as the ledger last set it (`lease_expires_at`; absent on a view built without it): a result the
   * inbox stored after it is refused although no requeue took the claim back yet (rule 4b).
   */
  claim: { claim_id: string; claimed_by: string; lease_expires_at?: string } | null;
  /**
   * The claim the watchdog took back last (`handoff.lease_expired`) and when its lease ran out, on a
   * handoff open again (pending, or claimed since under a new claim): a result the inbox stored by then
   * is still accepted under it (rule 4b).
   */
  lapsed?: { claim_id: string; claimed_by: string; lease_expires_at: string };
}

const NOTHING: Record<string, unknown> = Object.freeze({}) as Record<string, unknown>;

/** A handoff state without what no claim reader looks at: its context, acceptance criteria and summary. */
function withoutWorkItem(state: HandoffState): HandoffState {
  if (state.status === 'absent' || (state.context === NOTHING && state.acceptance === NOTHING && state.summary === '')) return state;
  return { ...state, context: NOTHING, acceptance: NOTHING, summary: '' };
}

/**
 * The handoff's fold for the processes that read only its status and claim (the router: the claim
 * rule under a result, its deadline reactor). It is the ledger's evolve, keeping out of the state
 * the work item itself — context, acceptance criteria, summary — which no transition reads and
 * which is most of a handoff's weight (KBs with a customer's context): the router keeps one such
 * fold per handoff under a result in its fold cache, with none of the handoff's events
 * (`cacheHistory: 0`: the events carry the context too).
 * Status, claim, lease, run and agent fields are the ledger fold's, event for event.
 */
export const handoffClaimFold = {
  initialState: initialHandoffState,
  /** The claim readers ask for the current state only: the fold cache keeps no events with it. */
  cacheHistory: 0,
  evolve: (state: HandoffState, event: HandoffEvent): HandoffState => withoutWorkItem(evolveHandoff(state, event)),
};

/** The view of a folded handoff (see {@link HandoffClaimView}); `handoffId` names it when it is absent. */
export function handoffClaimView(handoffId: string, state: HandoffState): HandoffClaimView {
  if (state.status === 'absent') return { handoff_id: handoffId, status: 'absent', claim: null };
  const lapsed = state.lapsed_claim;
  return {
    handoff_id: state.id,
    status: state.status,
    claim:
      state.claim === undefined
        ? null
        : state.status === 'claimed'
          ? { claim_id: state.claim.claim_id, claimed_by: state.claim.claimed_by, lease_expires_at: state.claim.lease_expires_at }
          : { claim_id: state.claim.claim_id, claimed_by: state.claim.claimed_by },
    // Kept by states folded before the lapse recorded its expiry (no `lease_expires_at`): none then.
    ...((state.status === 'pending' || state.status === 'claimed') && lapsed?.lease_expires_at !== undefined
      ? { lapsed: { claim_id: lapsed.claim_id, claimed_by: lapsed.claimed_by, lease_expires_at: lapsed.lease_expires_at } }
      : {}),
  };
}

/** Stable codes of a result refused by the claim rule (run and mesh deciders alike). */
export const ResultClaimCode = {
  /** The run (or mesh) is on a handoff and the result names no `handoff_id` or no `claim_id`. */
  claimRequired: 'claim_required',
  /** The result names a handoff other than the one the run (or mesh) is on. */
  staleHandoff: 'stale_handoff',
  /**
   * The handoff the result names is not claimed (not created yet, pending again after a requeue, closed), or the claim the
   * result names ran out before the inbox stored it (rule 4b), requeued yet or not.
   */
  handoffNotClaimed: 'handoff_not_claimed',
  /** The handoff is claimed, but not with this `claim_id`, or not by the agent that sent the result. */
  claimMismatch: 'claim_mismatch',
} as const;
export type ResultClaimCode = (typeof ResultClaimCode)[keyof typeof ResultClaimCode];

/** What the claim rule needs of a result. */
export interface ClaimedResult {
  result_id: string;
  agent: string;
  handoff_id?: string | undefined;
  claim_id?: string | undefined;
  /**
   * When the stream stored the result (the inbox message's timestamp, ISO): what rule 4b compares
   * with the expiry of the claim's lease. Absent (never on a result the inbox delivered): the claim
   * alone decides — a current claim accepts it, a lapsed one refuses it.
   */
  stored_at?: string | undefined;
}

/** Why the claim rule refused a result. */
export interface ResultClaimRefusal {
  code: ResultClaimCode;
  message: string;
}

/**
 * The claim rule: a result is accepted only for the run's current handoff and its current claim.
 *
 * - `current` is the handoff the run (or mesh) is on: the last `run.routed` / `mesh.handed_off`.
 *   When it is null (no handoff dispatched yet), the result is accepted on the agent alone: the
 *   subject `<prefix>.in.<project>.result.<agent>` pins who sent it (the server lets only that
 *   agent publish there) and the decider already checks it is the agent the run waits for; a result
 *   that names a handoff or a claim anyway is refused (`stale_handoff`), since there is none to answer.
 * - Otherwise the result must name that handoff (`handoff_id`, else `claim_required`; another one is
 *   `stale_handoff`) and a claim (`claim_id`, else `claim_required`); the handoff must be claimed
 *   now (`handoff_not_claimed`: absent, pending again after a requeue, released, completed...) and
 *   its current claim must be that `claim_id`, held by the result's agent (`claim_mismatch`).
 * - Rule 4b: the line is the claim's lease expiry, against the time the inbox stored the result
 *   (`stored_at`), not when the router reads it nor whether the watchdog has requeued the claim yet.
 *   Under the current claim, a result stored after its `lease_expires_at` is refused
 *   (`handoff_not_claimed`): the lease ran out and the claim is the watchdog's to take back. Under
 *   the claim the watchdog took back last, from that claim's holder, a result stored by the time its
 *   lease ran out (`stored_at` ≤ its `lease_expires_at`) is accepted while the handoff is open again
 *   (pending, or claimed since): the agent answered in time, and only the router's queue made it
 *   late; stored later, it is refused as above. A refusal for lateness says when the claim lapsed
 *   and when the result was stored. Both times are event times (the ledger's recorded expiry, the
 *   stream's timestamp), so a redelivery or a replay decides the same.
 *
 * `handoff` is what the router read of the handoff the result names (undefined or null when it
 * read nothing): a rule that cannot see the claim refuses. Returns null when the result may be
 * recorded.
 */
export function checkResultClaim(current: string | null, result: ClaimedResult, handoff: HandoffClaimView | null | undefined): ResultClaimRefusal | null {
  if (current === null) {
    if (result.handoff_id === undefined && result.claim_id === undefined) return null;
    return {
      code: ResultClaimCode.staleHandoff,
      message: `result ${result.result_id} answers handoff ${result.handoff_id ?? '(none)'} with claim ${result.claim_id ?? '(none)'}; no handoff was dispatched`,
    };
  }
  if (result.handoff_id === undefined) {
    return {
      code: ResultClaimCode.claimRequired,
      message: `result ${result.result_id} names no handoff_id; the run is on handoff ${current}: claim it and send handoff_id and claim_id`,
    };
  }
  if (result.handoff_id !== current) {
    return { code: ResultClaimCode.staleHandoff, message: `result ${result.result_id} answers handoff ${result.handoff_id}; the run is on ${current}` };
  }
  if (result.claim_id === undefined) {
    return {
      code: ResultClaimCode.claimRequired,
      message: `result ${result.result_id} names no claim_id: a result for handoff ${current} is accepted only under its current claim`,
    };
  }
  // Rule 4b: the result came under a claim whose lease ran out before the router read it — it sat
  // in the inbox, stored by the time the lease ended, while the watchdog requeued the claim. The
  // agent answered in time, so the result is accepted under the claim that lapsed, as when the
  // requeue lands after the result (rule 4a); the ledger's completion then voids the lapse.
  if (handoff?.handoff_id === current && handoff.lapsed !== undefined && sentInTime(result, handoff.lapsed)) return null;
  // A result decided again to complete its cut-short command (its record stored) does not come
  // here: the record proves the rule passed (`claim_recorded`, the deciders' `resuming`).
  if (handoff === null || handoff === undefined || handoff.handoff_id !== current || handoff.status !== 'claimed' || handoff.claim === null) {
    const status = handoff !== null && handoff !== undefined && handoff.handoff_id === current ? handoff.status : 'unknown';
    return {
      code: ResultClaimCode.handoffNotClaimed,
      message: `handoff ${current} is ${status}, not claimed: result ${result.result_id} holds no current claim${lateFor(result, handoff?.lapsed)}`,
    };
  }
  if (handoff.claim.claim_id !== result.claim_id || handoff.claim.claimed_by !== result.agent) {
    return {
      code: ResultClaimCode.claimMismatch,
      message: `result ${result.result_id} names claim ${result.claim_id} of '${result.agent}'; handoff ${current} is claimed by '${handoff.claim.claimed_by}' (another claim)${lateFor(result, handoff.lapsed)}`,
    };
  }
  // Rule 4b, before the requeue: the claim is still current, but its lease ran out before the inbox
  // stored the result. Whether the watchdog's requeue has landed yet (up to its tick later) decides
  // nothing: the result is as late as it would be after it.
  const lease = handoff.claim.lease_expires_at;
  if (lease !== undefined && storedAfter(result, lease)) {
    return {
      code: ResultClaimCode.handoffNotClaimed,
      message: `handoff ${current} is claimed, but its lease ran out: result ${result.result_id} holds no current claim${lateFor(result, { claim_id: result.claim_id, lease_expires_at: lease })}`,
    };
  }
  return null;
}

/**
 * Whether `recorded` — a result's stored record (`run.result_recorded`, `mesh.turn_recorded`) — is
 * the record of `result` from the same agent under the same claim. A command completed after its
 * append was cut short skips the claim rule only then: the record proves the rule passed, while the
 * handoff's claim may have moved on since (completed by this result, lapsed, claimed anew).
 */
export function recordsSameClaim(recorded: ClaimedRecord, result: ClaimedRecord): boolean {
  return recorded.result_id === result.result_id && recorded.agent === result.agent && recorded.claim_id === result.claim_id;
}

/** What {@link recordsSameClaim} compares. */
export interface ClaimedRecord {
  result_id: string;
  agent: string;
  claim_id?: string | undefined;
}

/** The result names the lapsed claim, comes from its holder, and was stored by the time its lease ran out. */
function sentInTime(result: ClaimedResult, lapsed: NonNullable<HandoffClaimView['lapsed']>): boolean {
  return result.claim_id === lapsed.claim_id && result.agent === lapsed.claimed_by && storedBy(result, lapsed.lease_expires_at);
}

/** The inbox stored the result at or before `expiry` (false when either time is unknown or unreadable). */
function storedBy(result: ClaimedResult, expiry: string): boolean {
  const [stored, expired] = times(result, expiry);
  return stored <= expired;
}

/** The inbox stored the result after `expiry` (false when either time is unknown or unreadable). */
function storedAfter(result: ClaimedResult, expiry: string): boolean {
  const [stored, expired] = times(result, expiry);
  return stored > expired;
}

/** The result's store time and `expiry` in ms; NaN for a time unknown or unreadable (every comparison with it is false). */
function times(result: ClaimedResult, expiry: string): [number, number] {
  return [result.stored_at !== undefined ? Date.parse(result.stored_at) : Number.NaN, Date.parse(expiry)];
}

/** Why a result under a claim whose lease ran out was too late, for the refusal's message (else nothing). */
function lateFor(result: ClaimedResult, lapsed: { claim_id: string; lease_expires_at: string } | undefined): string {
  if (lapsed === undefined || result.claim_id !== lapsed.claim_id) return '';
  const stored = result.stored_at !== undefined ? `it was stored at ${result.stored_at}` : 'its store time is unknown';
  return `; its claim ${lapsed.claim_id} lapsed at ${lapsed.lease_expires_at} and ${stored}`;
}
