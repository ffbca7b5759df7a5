import type { GuardConfig, GuardStop } from './facts';

/*
 * A circuit per agent (per project): it opens after `circuitFailures` CONSECUTIVE failures of the
 * agent (a handoff of the agent ending failed / escalated / past its deadline, a lease the agent
 * let expire, a result of the agent the router rejected) on as many handoffs: a handoff with a
 * retry cap that fails again counts once in a streak, because its own cap governs it — it is
 * requeued, then escalated to the lead (a CONSULT) at the cap, and a circuit opened by its
 * lapses alone would stop the run first and leave that escalation unreachable. (A review has no
 * cap — its lapses only requeue it —, so each of its failures counts.) While open, every dispatch to the agent
 * (`run.routed` to it) stops that run with why `circuit_open`. After `circuitCooldownMs` (measured
 * on event times, so every watchdog decides alike) ONE dispatch goes through as a probe
 * (half-open): its success closes the circuit, its failure opens it again; a probe that comes to
 * neither within another cool-down is replaced by the next dispatch.
 *
 * A circuit opened by a lease lapse marks its stops `settle`: the router may yet accept a result
 * the inbox stored before that lease ran out (docs/handoffs.md rule 4b) — results queued behind a
 * busy router, whose lapses landed together — and the completion that voids the lapse is the
 * agent's success, which closes the circuit. The watchdog requests such a stop only once the lapse
 * has settled (`WATCHDOG_LAPSE_SETTLE_MS` after it) and the circuit is still not closed — and, when
 * lapses re-opened it since, once the latest of those has settled too.
 */

export type CircuitState =
  /** `handoffs`: the capped handoffs whose failures the streak counted (at most `circuitFailures` − 1). */
  | { status: 'closed'; failures: number; handoffs?: string[] }
  /** `lapse_at`: the circuit was opened by a lease lapse at that time, which a result stored in time may still void (rule 4b). */
  | { status: 'open'; failures: number; opened_at: string; lapse_at?: string }
  | { status: 'half_open'; failures: number; probe_run: string; probe_since: string };

/**
 * What happened to the agent (`project` is the agent's: the circuit's key). `run` is the run the
 * outcome belongs to, when known, and `run_project` that run's project when it is not the agent's
 * (a cross-project handoff's run lives in its source project): a stop goes to the run's project.
 * A dispatch (`run.routed`) is always in its run's project.
 */
export type CircuitInput =
  | {
      kind: 'failure';
      event_id: string;
      project: string;
      agent: string;
      run?: string;
      run_project?: string;
      cause: string;
      at: string;
      /** The failing handoff when it has a retry cap (`<project>/<handoff id>`): counted once in a streak. */
      capped_handoff?: string;
    }
  | { kind: 'success'; project: string; agent: string; run?: string; run_project?: string }
  | { kind: 'dispatch'; event_id: string; project: string; agent: string; run: string; at: string };

export interface CircuitStep {
  state: CircuitState;
  stops: GuardStop[];
}

/** The failure cause of a lease the watchdog requeued (`handoff.lease_expired`). */
const LAPSE_CAUSE = 'lease_expired';

export function initialCircuit(): CircuitState {
  return { status: 'closed', failures: 0 };
}

function openStop(input: { event_id: string; project: string; agent: string; run_project?: string }, run: string, detail: string, lapseAt?: string): GuardStop {
  const runProject = input.run_project ?? input.project;
  return {
    ...(lapseAt !== undefined ? { settle: { agent_project: input.project, lapse_at: lapseAt } } : {}),
    kind: 'stop_run',
    guard: 'circuit',
    why: 'circuit_open',
    project: runProject,
    workflow_run_id: run,
    // The run's project may not know the agent: say whose circuit it is.
    detail: runProject === input.project ? detail : `${detail} (agent of project ${input.project})`,
    tried: [input.agent],
    trigger_event_id: input.event_id,
    packet_seed: `circuit:${input.event_id}`,
    agent: input.agent,
  };
}

/** Fold one outcome or dispatch of an agent into its circuit and decide. Pure. */
export function stepCircuit(current: CircuitState | undefined, input: CircuitInput, config: GuardConfig): CircuitStep {
  const state = current ?? initialCircuit();
  switch (input.kind) {
    case 'success':
      return { state: { status: 'closed', failures: 0 }, stops: [] };
    case 'failure': {
      const handoff = input.capped_handoff;
      if (state.status === 'closed' && handoff !== undefined && state.handoffs?.includes(handoff)) return { state, stops: [] };
      const failures = state.failures + 1;
      const reopens = state.status === 'half_open';
      if (state.status === 'open') return { state: { ...state, failures }, stops: [] };
      if (!reopens && failures < config.circuitFailures) {
        const counted = state.status === 'closed' ? (state.handoffs ?? []) : [];
        const handoffs = handoff !== undefined ? [...counted, handoff] : counted;
        return { state: { status: 'closed', failures, ...(handoffs.length > 0 ? { handoffs } : {}) }, stops: [] };
      }
      const detail = reopens
        ? `circuit of ${input.agent} re-opened: the probe failed (${input.cause})`
        : `circuit of ${input.agent} opened after ${failures} consecutive failures (last: ${input.cause})`;
      // A lapse may yet be voided by a result the inbox stored before it (rule 4b): its stop says so.
      const lapseAt = input.cause === LAPSE_CAUSE ? input.at : undefined;
      return {
        state: { status: 'open', failures, opened_at: input.at, ...(lapseAt !== undefined ? { lapse_at: lapseAt } : {}) },
        stops: input.run !== undefined ? [openStop(input, input.run, detail, lapseAt)] : [],
      };
    }
    case 'dispatch': {
      if (state.status === 'closed') return { state, stops: [] };
      if (state.status === 'open') {
        const cooled = Date.parse(input.at) - Date.parse(state.opened_at) >= config.circuitCooldownMs;
        if (cooled) return { state: { status: 'half_open', failures: state.failures, probe_run: input.run, probe_since: input.at }, stops: [] };
        return { state, stops: [openStop(input, input.run, `circuit of ${input.agent} is open since ${state.opened_at}; dispatch held`, state.lapse_at)] };
      }
      if (state.probe_run === input.run) return { state, stops: [] };
      // A probe whose handoff ended neither way (released, abandoned when its run stopped,
      // archived) resolves nothing: after another cool-down the next dispatch is the probe, so a
      // half-open circuit cannot hold every dispatch for good.
      const stale = Date.parse(input.at) - Date.parse(state.probe_since) >= config.circuitCooldownMs;
      if (stale) return { state: { status: 'half_open', failures: state.failures, probe_run: input.run, probe_since: input.at }, stops: [] };
      return { state, stops: [openStop(input, input.run, `circuit of ${input.agent} is half-open; a probe (run ${state.probe_run}) is in flight`)] };
    }
    default: {
      const never: never = input;
      return { state, stops: never };
    }
  }
}
