import {
  guardFactOf,
  stepCircuit,
  stepRunGuard,
  type CircuitInput,
  type CircuitState,
  type GuardConfig,
  type GuardEventInput,
  type GuardFact,
  type GuardStop,
  type HandoffRunRef,
  type RunGuardState,
} from '@baton/domain';
import { LruCache } from '@baton/eventstore';

/**
 * Most claims whose lapse or failure the book remembers having counted. A late result arrives
 * within the lease and the retries that follow, so the most recent suffice; evicting the same
 * entries in the same order, every watchdog decides alike.
 */
export const COUNTED_CLAIMS_KEPT = 16_384;

export interface HandoffInfo {
  /** The addressee, then whoever last claimed it (whose success a return or result is). */
  agent?: string;
  /** Who holds the claim now (cleared when a lapse requeues it): the only agent a failure can be charged to. */
  claimer?: string;
  /** That claim's id. */
  claimId?: string;
  /** The handoff's run with its project (the source project of a cross-project handoff). */
  run?: HandoffRunRef;
  /** A returnable child: its run handles its failure (ON_FAILURE), so a circuit it opens stops no run. */
  returnable?: true;
  /** A completion handback: no retry cap (its lapses only requeue it), so each of its failures counts. */
  review?: true;
}

/** The circuit input's `capped_handoff`: the handoff, unless it is a review (which has no retry cap). */
function cappedHandoff(key: string, info: HandoffInfo | undefined): { capped_handoff?: string } {
  return info?.review ? {} : { capped_handoff: key };
}

/** The run fields of a circuit input for a handoff's outcome (none when the handoff names no run). */
function runOf(info: HandoffInfo | undefined): { run?: string; run_project?: string } {
  return info?.run !== undefined ? { run: info.run.workflow_run_id, run_project: info.run.project } : {};
}

/**
 * Everything the book holds, as plain JSON (the watchdog's saved snapshot, apps/watchdog/src/snapshot):
 * the maps as entry lists, the two LRU sets least recently used first, so a book restored from it
 * decides and evicts exactly as the book it was taken from.
 */
export interface GuardBookState {
  runs: Array<[string, RunGuardState]>;
  circuits: Array<[string, CircuitState]>;
  handoffs: Array<[string, HandoffInfo]>;
  counted: string[];
  withdrawn: Array<[string, string]>;
}

/** A snapshot of what the book tracks (status endpoint, tests). */
export interface GuardBookStatus {
  runs: number;
  handoffs: number;
  open_circuits: string[];
}

/**
 * The watchdog's in-memory fold of the guard state: one {@link RunGuardState} per live run, one
 * {@link CircuitState} per `<project>/<agent>`, and which agent / run each open handoff belongs to
 * (to attribute a handoff's failure to its agent). Every decision is made by the pure steps in
 * `@baton/domain` (`stepRunGuard`, `stepCircuit`); this class only keeps their states in maps.
 * Deterministic: two watchdogs fed the same events ask for the same stops (same packet seeds).
 */
export class GuardBook {
  private readonly runs = new Map<string, RunGuardState>();
  private readonly circuits = new Map<string, CircuitState>();
  private readonly handoffs = new Map<string, HandoffInfo>();
  /**
   * Claims (`<project>/<handoff>/<claim id>`) whose end the circuit already counted as their
   * agent's failure (a lapse, a deadline, a failure): a result sent late under one of them, which
   * the router refuses, is the same failure, not a second one.
   */
  private readonly counted = new LruCache<string, true>(COUNTED_CLAIMS_KEPT);
  /**
   * Claims whose work someone else withdrew (the handoff abandoned while its claimer held it: by a
   * person, its delegator, or the router stopping its run), with that claimer: it did nothing
   * wrong, so a result IT sends late under that claim, which the router refuses (`stale_handoff`,
   * `unexpected_agent`, `run_not_running`), is not its failure either. Another agent naming the
   * claim is not excused.
   */
  private readonly withdrawn = new LruCache<string, string>(COUNTED_CLAIMS_KEPT);

  constructor(private readonly config: GuardConfig) {}

  /** Fold one stored event; returns the stops it asks for (usually none). */
  apply(event: GuardEventInput): GuardStop[] {
    const fact = guardFactOf(event);
    return fact ? this.applyFact(fact) : [];
  }

  applyFact(fact: GuardFact): GuardStop[] {
    switch (fact.kind) {
      case 'run_started':
      case 'run_halted':
      case 'run_resumed':
      case 'run_ended':
      case 'routed': {
        const key = `${fact.project}/${fact.run}`;
        const step = stepRunGuard(this.runs.get(key), fact, this.config);
        if (step.state.status === 'ended') this.runs.delete(key);
        else this.runs.set(key, step.state);
        if (fact.kind !== 'routed') return step.stops;
        // A run already stopping for its own loop needs no second packet for the circuit.
        const circuit = this.circuit({ kind: 'dispatch', event_id: fact.event_id, project: fact.project, agent: fact.to, run: fact.run, at: fact.at });
        return step.stops.length > 0 ? step.stops : circuit;
      }
      case 'result_recorded':
        return this.circuit({ kind: 'success', project: fact.project, agent: fact.agent, run: fact.run });
      case 'turn_recorded':
        // No guard counts mesh turns; the runner passes the claim it answered to the lease table.
        return [];
      case 'result_rejected': {
        const claim = fact.named !== undefined ? `${fact.project}/${fact.named.handoff}/${fact.named.claim_id}` : undefined;
        if (claim !== undefined && (this.counted.get(claim) || this.withdrawn.get(claim) === fact.agent)) return [];
        // A failure of the sender's all the same; but only a result refused on its own turn in the
        // run (the fact names the run then) is a failure on that run, which the circuit may stop.
        return this.circuit({
          kind: 'failure',
          event_id: fact.event_id,
          project: fact.project,
          agent: fact.agent,
          ...(fact.run !== undefined ? { run: fact.run } : {}),
          cause: 'result_rejected',
          at: fact.at,
          ...(fact.named !== undefined
            ? cappedHandoff(`${fact.project}/${fact.named.handoff}`, this.handoffs.get(`${fact.project}/${fact.named.handoff}`))
            : {}),
        });
      }
      case 'handoff_created': {
        const info: HandoffInfo = {};
        if (fact.to_agent !== undefined) info.agent = fact.to_agent;
        if (fact.run !== undefined) info.run = { project: fact.run_project ?? fact.project, workflow_run_id: fact.run };
        if (fact.returnable) info.returnable = true;
        if (fact.review) info.review = true;
        this.handoffs.set(`${fact.project}/${fact.handoff}`, info);
        return [];
      }
      case 'handoff_claimed': {
        const key = `${fact.project}/${fact.handoff}`;
        this.handoffs.set(key, { ...this.handoffs.get(key), agent: fact.agent, claimer: fact.agent, claimId: fact.claim_id });
        return [];
      }
      case 'handoff_closed': {
        const key = `${fact.project}/${fact.handoff}`;
        const info = this.handoffs.get(key);
        if (fact.withdrawn && info?.claimer !== undefined && info.claimId !== undefined) this.withdrawn.set(`${key}/${info.claimId}`, info.claimer);
        this.handoffs.delete(key);
        return [];
      }
      case 'handoff_succeeded': {
        const key = `${fact.project}/${fact.handoff}`;
        const info = this.handoffs.get(key);
        // Over: nothing later needs to know whose it was. A return may still be reworked: kept.
        if (fact.ends) this.handoffs.delete(key);
        const agent = fact.agent ?? info?.agent;
        if (agent === undefined) return [];
        return this.circuit({ kind: 'success', project: fact.project, agent, ...runOf(info) });
      }
      case 'handoff_failed': {
        const key = `${fact.project}/${fact.handoff}`;
        const info = this.handoffs.get(key);
        // A failure is the agent's that held the claim then (a lapse names its claimer). A handoff
        // that failed while nobody held it — an operator failing work nobody took, a deadline passing
        // on a pending handoff (during a pause, say) — is no agent's failure.
        const agent = fact.agent ?? info?.claimer;
        const claimId = fact.claim_id ?? (info?.claimer !== undefined ? info.claimId : undefined);
        // A requeued handoff (lease expired) stays open, unclaimed; any other failure ends it.
        if (fact.cause !== 'lease_expired') this.handoffs.delete(key);
        else if (info !== undefined) this.handoffs.set(key, { ...info, claimer: undefined, claimId: undefined });
        if (agent === undefined) return [];
        if (claimId !== undefined) this.counted.set(`${key}/${claimId}`, true);
        return this.circuit({
          kind: 'failure',
          event_id: fact.event_id,
          project: fact.project,
          agent,
          cause: fact.cause,
          at: fact.at,
          // A returnable child's run goes on by its ON_FAILURE: the circuit holds the next dispatches, not this run.
          ...(info?.returnable ? {} : runOf(info)),
          ...cappedHandoff(key, info),
        });
      }
      default: {
        const never: never = fact;
        return never;
      }
    }
  }

  /**
   * The workflow run an open handoff belongs to, with the run's project, as its `handoff.created`
   * said (undefined: none, or not seen).
   */
  runOfHandoff(project: string, handoff: string): HandoffRunRef | undefined {
    return this.handoffs.get(`${project}/${handoff}`)?.run;
  }

  /** True while the run is known and not halted or ended (stops for it still make sense). */
  isLive(project: string, run: string): boolean {
    return this.runs.get(`${project}/${run}`)?.status === 'live';
  }

  circuitOf(project: string, agent: string): CircuitState | undefined {
    return this.circuits.get(`${project}/${agent}`);
  }

  /**
   * Everything the book holds (see {@link GuardBookState}). The lists are new, their states the
   * book's own (the steps replace a state, never change one): serialize it before the next event.
   */
  save(): GuardBookState {
    return {
      runs: [...this.runs],
      circuits: [...this.circuits],
      handoffs: [...this.handoffs],
      counted: [...this.counted.oldestFirst()].map(([key]) => key),
      withdrawn: [...this.withdrawn.oldestFirst()],
    };
  }

  /** Replace what the book holds with a saved state (taken by {@link save}, under the same config). */
  restore(state: GuardBookState): void {
    this.runs.clear();
    this.circuits.clear();
    this.handoffs.clear();
    this.counted.clear();
    this.withdrawn.clear();
    for (const [key, run] of state.runs) this.runs.set(key, run);
    for (const [key, circuit] of state.circuits) this.circuits.set(key, circuit);
    for (const [key, info] of state.handoffs) this.handoffs.set(key, info);
    for (const key of state.counted) this.counted.set(key, true);
    for (const [key, claimer] of state.withdrawn) this.withdrawn.set(key, claimer);
  }

  status(): GuardBookStatus {
    const open = [...this.circuits.entries()].filter(([, c]) => c.status !== 'closed').map(([key]) => key);
    return { runs: this.runs.size, handoffs: this.handoffs.size, open_circuits: open };
  }

  private circuit(input: CircuitInput): GuardStop[] {
    const key = `${input.project}/${input.agent}`;
    const step = stepCircuit(this.circuits.get(key), input, this.config);
    if (step.state.status === 'closed' && step.state.failures === 0) this.circuits.delete(key);
    else this.circuits.set(key, step.state);
    return step.stops;
  }
}
