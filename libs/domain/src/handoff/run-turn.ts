import type { HandoffCommandMetadata } from '@baton/contracts';
import { reject, type DecisionResult } from '../decider';
import type { RunEvent } from '../run/state';
import type { CreateHandoff } from './commands';

/*
 * Who may make a handoff part of a workflow run. A handoff that names a run (`workflow_run_id`) acts
 * on it: its failures count toward its claimer's circuit and the circuit's opening stops that run
 * (docs/governance.md), its escalation with no lead — or with one — stops the run `guard_failed`, and
 * a deadline passing on it is sent to the run. So an agent may name a run in a `create` only while
 * that run waits for it: while it is the run's current agent, delegating a piece of its own work.
 * The router names the runs it routes; nobody else creates (operators do not create).
 *
 * Before this rule an agent with no part in a run created a handoff to itself naming that run (any
 * `workflow_run_id` of its project was accepted), claimed it and failed it: three such failures
 * opened its circuit, and the circuit stopped the run — another agent's (a security audit's second
 * form of the circuit attack). One `give_up_offer` at `max_retries: 0` did it in one move, through
 * the escalation's stop. The ledger refuses such a create (`not_in_run`): nothing is stored, so
 * nothing of it can ever act on the run.
 */

/**
 * What the ledger read of the run a create names (in the run's project: the subject's, which is the
 * source project of a cross-project create): whether it runs and whose turn it is. Folded by
 * {@link runTurnFold} from the run's events (the router's aggregate, read-only here).
 */
export interface RunTurn {
  /** `none`: no run of that id in the project (not started yet, never, or the id of a mesh run). */
  status: 'none' | 'running' | 'held' | 'stopped' | 'completed' | 'terminated';
  /** The agent whose result the run waits for (its entry agent, then each route's target); null before any. */
  agent: string | null;
}

/** The refusal of a create naming a run that does not wait for its sender (listed in `HandoffErrorCode` too). */
export const RunPartErrorCode = { notInRun: 'not_in_run' } as const;

const NO_RUN: RunTurn = Object.freeze({ status: 'none', agent: null }) as RunTurn;

function moved(state: RunTurn, status: RunTurn['status']): RunTurn {
  return state.status === 'none' || state.status === status ? state : { status, agent: state.agent };
}

/**
 * One run event into the turn. The status and agent are the run fold's (`evolveRun`: status, and
 * `agent`, the agent whose result the run waits for), event for event; it reads nothing else, keeps
 * nothing else, and never throws (a history the run fold refuses is still read for its agent).
 */
export function evolveRunTurn(state: RunTurn, event: RunEvent): RunTurn {
  switch (event.type) {
    case 'run.started':
      return { status: 'running', agent: event.data.entry.agent };
    case 'run.routed':
      return { status: 'running', agent: event.data.target.agent };
    case 'run.awaiting_input':
      return { status: 'running', agent: event.data.agent };
    case 'run.held':
      // The hold names the agent it waits on (an ON_FAILURE ESCALATE hold: the caller), as the run fold does.
      return state.status === 'none' ? state : { status: 'held', agent: event.data.agent };
    case 'run.stopped':
      return moved(state, 'stopped');
    case 'run.resumed':
      return moved(state, 'running');
    case 'run.completed':
      return moved(state, 'completed');
    case 'run.terminated':
      return moved(state, 'terminated');
    default:
      return state;
  }
}

/**
 * The fold the ledger reads a named run with (`store.current`): small, so the fold cache keeps one
 * per run an agent names, with none of the run's events (`cacheHistory: 0`).
 */
export const runTurnFold = {
  initialState: (): RunTurn => NO_RUN,
  cacheHistory: 0,
  evolve: evolveRunTurn,
};

/** May this caller make its new handoff part of the run the ledger read? */
export function runWaitsFor(turn: RunTurn, metadata: Pick<HandoffCommandMetadata, 'actor' | 'actorKind'>): boolean {
  return turn.status === 'running' && metadata.actorKind === 'agent' && turn.agent === metadata.actor;
}

/**
 * A create that names a run is refused `not_in_run` when its sender is an agent the run does not
 * wait for (or there is no such run running). Checked only when the ledger read the run (`run_turn`,
 * which it reads for every agent's create that names one); the services' creates (the router's
 * routes) are not. The answer is the same whatever the run's state, so it tells the sender nothing
 * of whose turn it is. Null when nothing is wrong.
 */
export function checkRunPart({ data, metadata }: CreateHandoff): DecisionResult<never> | null {
  const turn = data.run_turn;
  if (turn === undefined || data.workflow_run_id === undefined || metadata.actorKind !== 'agent') return null;
  if (runWaitsFor(turn, metadata)) return null;
  const runProject = data.cross_project?.source_project ?? data.project;
  return reject(
    'forbidden',
    RunPartErrorCode.notInRun,
    `${metadata.actor} may not create a handoff of run ${data.workflow_run_id} (project ${runProject}): an agent names a run in a create only while that run waits for it (its current agent)`,
    { workflow_run_id: data.workflow_run_id, run_project: runProject },
  );
}
