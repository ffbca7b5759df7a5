import type { HandoffEventData, LoopGuard, RefusedKind, StopCap, StopWhy } from '@baton/contracts';
import { handoffRun } from '../handoff/run-ref';
import { OwnTurnRefusalCodes, RunErrorCode } from '../run/decide';
import { refusedKindOf } from '../run/state';

/*
 * What the loop guards read from the event streams, reduced to the facts they need. The watchdog
 * maps each stored run / handoff event to at most one fact ({@link guardFactOf}); everything else
 * is ignored, so a new event type elsewhere never breaks the guards.
 */

/** The guards' settings (the watchdog reads them from its environment). */
export interface GuardConfig {
  /** Most hops a run may take before it stops with why `budget` (an operator may raise it). */
  maxHops: number;
  /** Most direction changes on one edge (A→B→A…) within a run before it stops with why `thrash`. */
  maxAlternations: number;
  /** Consecutive failures of one agent that open its circuit. */
  circuitFailures: number;
  /** How long an open circuit stays open before one probe dispatch is let through, ms. */
  circuitCooldownMs: number;
}

export const DefaultGuardConfig: GuardConfig = { maxHops: 50, maxAlternations: 4, circuitFailures: 3, circuitCooldownMs: 60_000 };

export { HopCapName } from '../stop/forms';

/** One stored event as the guards see it (the envelope's fields they read). */
export interface GuardEventInput {
  id: string;
  type: string;
  project: string;
  aggregate: { kind: string; id: string };
  occurredAt: string;
  payload: unknown;
}

/** A claim on a handoff that an agent's accepted result (or mesh turn) answered: the router is closing the handoff. */
export interface AnsweredClaim {
  handoff: string;
  claim_id: string;
}

export type GuardFact =
  | { kind: 'run_started'; project: string; run: string }
  | {
      kind: 'routed';
      event_id: string;
      project: string;
      run: string;
      from: string | null;
      to: string;
      hop: number;
      raised_cap?: number;
      at: string;
    }
  /**
   * `stopped_on`: for `run.stopped`, the packet's why, the name of the cap it names (null: none) and
   * who stopped the run (`source`), which say whether an operator's raise of it is the hop budget's;
   * absent for `run.held`.
   */
  | { kind: 'run_halted'; project: string; run: string; stopped_on?: { why: StopWhy; cap: string | null; source: 'agent' | 'router' | 'external' } }
  | { kind: 'run_resumed'; project: string; run: string }
  | { kind: 'run_ended'; project: string; run: string }
  /** `answered`: the handoff and claim the result was accepted under (the watchdog holds back that claim's requeue). */
  | { kind: 'result_recorded'; event_id: string; project: string; run: string; agent: string; at: string; answered?: AnsweredClaim }
  /** A mesh turn recorded under a claim (no guard counts turns; the watchdog holds back that claim's requeue). */
  | { kind: 'turn_recorded'; project: string; answered: AnsweredClaim }
  /**
   * `named`: the handoff and claim the refused result named (a late result of a claim that lapsed or
   * failed). `run`: the run it was refused on, only when it was refused on its sender's own turn
   * there ({@link OwnTurnRefusalCodes}: the router had found the sender to be the agent the run
   * waits for). Any other refusal (`unexpected_agent`, `awaiting_input`…) names no run: an agent may
   * name any run of its project in a result, and its failure must not stop a run it has no part in.
   */
  | { kind: 'result_rejected'; event_id: string; project: string; run?: string; agent: string; at: string; named?: AnsweredClaim }
  /**
   * `run` is the handoff's workflow run and `run_project` the project it lives in (set together):
   * the delegator's, which on a cross-project handoff is its `source_project`, not `project`.
   * `review`: a completion handback, which names no run here: its reviewer's failures count
   * against the reviewer's circuit but stop no run (the review does not drive its run, the work it
   * reviews is done, and a review's lapse only requeues it: docs/handoffs.md rule 5).
   */
  | {
      kind: 'handoff_created';
      project: string;
      handoff: string;
      to_agent?: string;
      run?: string;
      run_project?: string;
      review?: true;
      /**
       * A run's returnable child (it has a deadline: only the router's returnable routes give a
       * run handoff one): its failure is its run's to handle — the run's ON_FAILURE — so the
       * circuit its failures open stops no run; it holds the agent's next dispatches.
       */
      returnable?: true;
    }
  | { kind: 'handoff_claimed'; project: string; handoff: string; agent: string; claim_id: string }
  /** `ends`: the handoff is over (completed by the result); a return may still be reworked. */
  | { kind: 'handoff_succeeded'; event_id: string; project: string; handoff: string; agent?: string; at: string; ends?: true }
  /**
   * The handoff is over without a success or failure of its own to count (completed after its
   * handback, abandoned, archived). `withdrawn`: abandoned — someone else (a person, the delegator,
   * the router stopping its run) took the work from whoever held it, so a result its claimer sends
   * late under that claim is no failure of the claimer's.
   */
  | { kind: 'handoff_closed'; project: string; handoff: string; withdrawn?: true }
  /** `agent` / `claim_id`: the claimer and claim a lapse names (other failures are charged to the claim the book saw taken). */
  | { kind: 'handoff_failed'; event_id: string; project: string; handoff: string; agent?: string; claim_id?: string; cause: string; at: string };

/** What a guard asks for: stop one run with a packet. `packet_seed` is unique per trip (guard + event id). */
export interface GuardStop {
  kind: 'stop_run';
  guard: LoopGuard;
  /** The run's project (where the stop request goes); for a circuit it may differ from the agent's. */
  project: string;
  workflow_run_id: string;
  why: StopWhy;
  detail: string;
  tried: string[];
  /** The event that tripped the guard. */
  trigger_event_id: string;
  /** `<guard>:<trigger event id>`: the watchdog derives the stop packet id from it. */
  packet_seed: string;
  /** The agent whose circuit is open (circuit only). */
  agent?: string;
  /** The cap the stop hit (hop budget only: {@link HopCapName}, the limit in force and the hop reached). */
  cap?: StopCap;
  /**
   * A circuit stop whose circuit a lease lapse opened (circuit only): the lapse may yet be voided by a
   * result stored before it (rule 4b), so the stop waits until the lapse has settled and is dropped
   * if the circuit of `agent` (of `agent_project`) closed meanwhile.
   */
  settle?: { agent_project: string; lapse_at: string };
}

type RoutedPayload = { target: { agent: string }; from: { agent: string } | null; hop: number; raised_cap?: number; routed_at: string };

/**
 * Map one stored event to the fact the guards read, or null when no guard cares. Pure; the
 * payload is trusted to match its type (the registry validated it).
 */
export function guardFactOf(event: GuardEventInput): GuardFact | null {
  const project = event.project;
  const id = event.aggregate.id;
  if (event.aggregate.kind === 'run') {
    switch (event.type) {
      case 'run.started':
        return { kind: 'run_started', project, run: id };
      case 'run.routed': {
        const p = event.payload as RoutedPayload;
        const fact: GuardFact = {
          kind: 'routed',
          event_id: event.id,
          project,
          run: id,
          from: p.from?.agent ?? null,
          to: p.target.agent,
          hop: p.hop,
          at: p.routed_at,
        };
        if (p.raised_cap !== undefined) fact.raised_cap = p.raised_cap;
        return fact;
      }
      case 'run.stopped': {
        const p = event.payload as { source: 'agent' | 'router' | 'external'; packet: { why: StopWhy; cap?: { name: string } } };
        return { kind: 'run_halted', project, run: id, stopped_on: { why: p.packet.why, cap: p.packet.cap?.name ?? null, source: p.source } };
      }
      case 'run.held':
        return { kind: 'run_halted', project, run: id };
      case 'run.resumed':
        return { kind: 'run_resumed', project, run: id };
      case 'run.completed':
      case 'run.terminated':
        return { kind: 'run_ended', project, run: id };
      case 'run.result_recorded': {
        const p = event.payload as { agent: string; recorded_at: string; handoff_id?: string; claim_id?: string };
        const fact: GuardFact = { kind: 'result_recorded', event_id: event.id, project, run: id, agent: p.agent, at: p.recorded_at };
        if (p.handoff_id !== undefined && p.claim_id !== undefined) fact.answered = { handoff: p.handoff_id, claim_id: p.claim_id };
        return fact;
      }
      case 'run.result_rejected': {
        const p = event.payload as { agent: string; code: string; rejected_at: string; refused?: RefusedKind; handoff_id?: string; claim_id?: string };
        // Only an agent's refused result is an agent's failure: an operator's refused answer or a
        // customer's refused message says nothing of an agent (events stored before `refused`
        // named them by their agent, `operator` or `customer`). Nor does a result refused because
        // the run stopped or ended under the agent's work (`run_not_running`): that is the run's state.
        if (refusedKindOf(p) !== 'result' || p.code === RunErrorCode.runNotRunning) return null;
        const fact: GuardFact = { kind: 'result_rejected', event_id: event.id, project, agent: p.agent, at: p.rejected_at };
        // Read from the code alone, so events stored before this rule fold by it too.
        if (OwnTurnRefusalCodes.has(p.code)) fact.run = id;
        if (p.handoff_id !== undefined && p.claim_id !== undefined) fact.named = { handoff: p.handoff_id, claim_id: p.claim_id };
        return fact;
      }
      default:
        return null;
    }
  }
  if (event.aggregate.kind === 'mesh') {
    if (event.type !== 'mesh.turn_recorded') return null;
    const p = event.payload as { handoff_id: string | null; claim_id?: string };
    return p.handoff_id !== null && p.claim_id !== undefined
      ? { kind: 'turn_recorded', project, answered: { handoff: p.handoff_id, claim_id: p.claim_id } }
      : null;
  }
  if (event.aggregate.kind !== 'handoff') return null;
  switch (event.type) {
    case 'handoff.created': {
      const p = event.payload as HandoffEventData<'handoff.created'>;
      const fact: GuardFact = { kind: 'handoff_created', project, handoff: id };
      if (p.to_agent !== undefined) fact.to_agent = p.to_agent;
      if (p.kind === 'completion_handback') fact.review = true;
      const run = handoffRun({ ...p, project });
      if (run !== null && p.kind !== 'completion_handback') {
        fact.run = run.workflow_run_id;
        fact.run_project = run.project;
        if (p.deadline_at !== undefined) fact.returnable = true;
      }
      return fact;
    }
    case 'handoff.claimed': {
      const p = event.payload as HandoffEventData<'handoff.claimed'>;
      return { kind: 'handoff_claimed', project, handoff: id, agent: p.claimed_by, claim_id: p.claim_id };
    }
    case 'handoff.returned': {
      const p = event.payload as HandoffEventData<'handoff.returned'>;
      return { kind: 'handoff_succeeded', event_id: event.id, project, handoff: id, agent: p.worker, at: p.at };
    }
    case 'handoff.completed_by_result': {
      const p = event.payload as HandoffEventData<'handoff.completed_by_result'>;
      return { kind: 'handoff_succeeded', event_id: event.id, project, handoff: id, agent: p.agent, at: p.at, ends: true };
    }
    // Over: completed, archived, declined by its claimer (a released handoff is never offered
    // again), and a handback once its review is decided (the parent goes on with events of its
    // own). Without the last two the book kept every released handoff and every handback made.
    case 'handoff.completed':
    case 'handoff.archived':
    case 'handoff.released':
    case 'handoff.handback_decided':
      return { kind: 'handoff_closed', project, handoff: id };
    case 'handoff.abandoned':
      return { kind: 'handoff_closed', project, handoff: id, withdrawn: true };
    case 'handoff.lease_expired': {
      const p = event.payload as HandoffEventData<'handoff.lease_expired'>;
      return {
        kind: 'handoff_failed',
        event_id: event.id,
        project,
        handoff: id,
        agent: p.expired_claimer,
        claim_id: p.claim_id,
        cause: 'lease_expired',
        at: p.at,
      };
    }
    case 'handoff.failed':
    case 'handoff.escalated':
    case 'handoff.deadline_expired': {
      const p = event.payload as { at: string };
      return { kind: 'handoff_failed', event_id: event.id, project, handoff: id, cause: event.type.slice('handoff.'.length), at: p.at };
    }
    default:
      return null;
  }
}
