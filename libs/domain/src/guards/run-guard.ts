import { HopCapName, type GuardConfig, type GuardFact, type GuardStop } from './facts';

/*
 * Per-run loop guards: the hop budget and ping-pong (thrash) detection per edge. State is folded
 * from the run's own events (`run.routed` hops, halts, resumes); a trip asks for ONE stop and the
 * guard stays quiet until the run is resumed by a person.
 */

/** One edge A—B of a run (unordered) and the direction it was last taken in. */
export interface EdgeCount {
  /** `fwd` when last taken from the lexically smaller agent to the larger, `rev` otherwise. */
  last: 'fwd' | 'rev';
  /** Direction changes seen on the edge since the run last resumed. */
  alternations: number;
}

export interface RunGuardState {
  project: string;
  run: string;
  status: 'live' | 'halted' | 'ended';
  /** The hop budget in force: the configured one, or a cap an operator raised. */
  hop_limit: number;
  /**
   * The run last stopped on the hop budget: a budget packet from outside the run (source
   * `external`: the watchdog's stop request) naming the {@link HopCapName} cap, or naming no cap
   * (packets stored before stops named their cap; the hop budget's stop was the one that named
   * none). An agent's own budget stop never is, whatever cap it names. Only then does the raised cap of the run's next routed event lift `hop_limit`:
   * raising another cap (an agent's `tokens`) is not a hop budget.
   */
  hop_stop: boolean;
  last_hop: number;
  edges: Readonly<Record<string, EdgeCount>>;
  /** A stop was asked for; no more until the run is resumed. */
  tripped: boolean;
}

export type RunGuardFact = Extract<GuardFact, { kind: 'run_started' | 'routed' | 'run_halted' | 'run_resumed' | 'run_ended' }>;

/** The result of one step: the next state and the stops to ask for (at most one). */
export interface RunGuardStep {
  state: RunGuardState;
  stops: GuardStop[];
}

export function initialRunGuard(project: string, run: string, config: GuardConfig): RunGuardState {
  return { project, run, status: 'live', hop_limit: config.maxHops, hop_stop: false, last_hop: 0, edges: {}, tripped: false };
}

/** The unordered edge key of a hop and its direction. */
export function edgeOf(from: string, to: string): { key: string; dir: 'fwd' | 'rev' } {
  return from < to ? { key: `${from}>${to}`, dir: 'fwd' } : { key: `${to}>${from}`, dir: 'rev' };
}

/**
 * Fold one run fact into the run's guard state and decide. Pure and deterministic (the same facts
 * give the same stops on every watchdog instance):
 * - hop budget: a `run.routed` whose hop exceeds the limit asks for a stop, why `budget`, naming
 *   the cap (`hops`, the limit, the hop reached). Only an operator raises the cap: a routed event
 *   carrying `raised_cap` lifts the limit when the run was resumed from a hop-budget stop (see
 *   {@link RunGuardState.hop_stop}); a raise of any other cap leaves the hop limit alone;
 * - ping-pong: taking an edge A—B in the opposite direction of its last use is one alternation;
 *   more than `maxAlternations` on one edge asks for a stop, why `thrash`;
 * - after a trip nothing more is asked until `run.resumed`, which also resets the edge counts.
 */
export function stepRunGuard(current: RunGuardState | undefined, fact: RunGuardFact, config: GuardConfig): RunGuardStep {
  const state = current ?? initialRunGuard(fact.project, fact.run, config);
  switch (fact.kind) {
    case 'run_started':
      return { state: current ?? state, stops: [] };
    case 'run_halted': {
      const on = fact.stopped_on;
      // The hop budget's stop comes from outside the run (the watchdog's stop request): an agent's
      // own budget stop names whatever cap it likes, `hops` included, and raising it is not the watchdog's budget.
      const hop_stop = on !== undefined && on.why === 'budget' && on.source === 'external' && (on.cap === null || on.cap === HopCapName);
      return { state: { ...state, status: 'halted', hop_stop }, stops: [] };
    }
    case 'run_resumed':
      return { state: { ...state, status: 'live', tripped: false, edges: {} }, stops: [] };
    case 'run_ended':
      return { state: { ...state, status: 'ended' }, stops: [] };
    case 'routed':
      return stepRouted(state, fact, config);
    default: {
      const never: never = fact;
      return { state, stops: never };
    }
  }
}

function stepRouted(state: RunGuardState, fact: Extract<GuardFact, { kind: 'routed' }>, config: GuardConfig): RunGuardStep {
  const hop_limit = fact.raised_cap !== undefined && state.hop_stop ? Math.max(state.hop_limit, Math.floor(fact.raised_cap)) : state.hop_limit;
  let edges = state.edges;
  let alternations = 0;
  let edgeKey: string | null = null;
  if (fact.from !== null && fact.from !== fact.to) {
    const edge = edgeOf(fact.from, fact.to);
    const previous = edges[edge.key];
    alternations = previous === undefined ? 0 : previous.alternations + (previous.last === edge.dir ? 0 : 1);
    edges = { ...edges, [edge.key]: { last: edge.dir, alternations } };
    edgeKey = edge.key;
  }
  const next: RunGuardState = { ...state, status: 'live', hop_limit, hop_stop: false, last_hop: Math.max(state.last_hop, fact.hop), edges };
  if (state.tripped) return { state: next, stops: [] };

  const base = { project: fact.project, workflow_run_id: fact.run, trigger_event_id: fact.event_id };
  if (fact.hop > hop_limit) {
    return {
      state: { ...next, tripped: true },
      stops: [
        {
          kind: 'stop_run',
          guard: 'hop_budget',
          why: 'budget',
          detail: `hop budget spent: hop ${fact.hop} of ${hop_limit} (${fact.from ?? 'start'} → ${fact.to})`,
          tried: [`hop ${fact.hop}: ${fact.from ?? 'start'} → ${fact.to}`],
          packet_seed: `hop_budget:${fact.event_id}`,
          cap: { name: HopCapName, limit: hop_limit, used: fact.hop },
          ...base,
        },
      ],
    };
  }
  if (edgeKey !== null && alternations > config.maxAlternations && fact.from !== null) {
    return {
      state: { ...next, tripped: true, edges: { ...edges, [edgeKey]: { last: edgeOf(fact.from, fact.to).dir, alternations: 0 } } },
      stops: [
        {
          kind: 'stop_run',
          guard: 'ping_pong',
          why: 'thrash',
          detail: `ping-pong between ${fact.from} and ${fact.to}: ${alternations} alternations (limit ${config.maxAlternations})`,
          tried: [fact.to, fact.from, fact.to, fact.from].map((agent, i) => `${agent}${i === 0 ? ` (hop ${fact.hop})` : ''}`),
          packet_seed: `ping_pong:${fact.event_id}`,
          ...base,
        },
      ],
    };
  }
  return { state: next, stops: [] };
}
