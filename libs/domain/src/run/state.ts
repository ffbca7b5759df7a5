import type {
  DomainEventOf,
  HoldKind,
  RouteTarget,
  RunEventSchemas,
  RunPeople,
  StopPacket,
  WorkflowRef,
} from '@baton/contracts';
import { assertNever } from '../decider';

/** A workflow-run event: `{ type: 'run.routed', data: {...} }`. */
export type RunEvent = DomainEventOf<typeof RunEventSchemas>;
export type RunEventOf<T extends RunEvent['type']> = Extract<RunEvent, { type: T }>;

/** A parent waiting for a returnable handoff's child (seed 001). Filled by a later issue. */
export interface WaitingParent {
  agent: string;
  step: string;
  handoffId: string;
}

/** The hold a `held` run waits in (no stop packet). */
export interface RunHold {
  kind: HoldKind;
  reason: string;
  /** Where an operator's `continue` goes; null when there is nowhere to continue to. */
  pendingTarget: RouteTarget | null;
}

/** What every started run knows. */
export interface RunCore {
  workflowRunId: string;
  project: string;
  workflow: WorkflowRef;
  /** The step the current agent runs under. */
  step: string;
  /** The agent whose result the run waits for (or waited for, once finished). */
  agent: string;
  /** The return address (seed 000 §4), cleared on every non-function-call transition. */
  callback: string | null;
  /** Parents waiting for a returnable child, innermost last (seed 001; later issue). */
  waitingParents: readonly WaitingParent[];
  /** Session variables: the start's, with every result's `variables` merged over them. */
  variables: Readonly<Record<string, unknown>>;
  /** How many times the run has dispatched an agent (`run.routed` events). */
  hops: number;
  /** The handoff the current agent works on (the last `run.routed`'s `handoff_id`). */
  handoffId: string | null;
  /** Who started the run and who else may be notified (seed 000 §5). */
  people: RunPeople;
  /** Result ids, answer ids and stop packet ids already applied (idempotency). */
  processedIds: readonly string[];
  /** How many HumanActionNotices the run has emitted. */
  notices: number;
  startedAt: string;
}

/**
 * The workflow-run state, keyed on `status`. `none` is a run that has not started; `held` waits
 * for a person without a packet; `stopped` waits on its open stop packet; `completed` and
 * `terminated` are final.
 */
export type RunState =
  | { status: 'none' }
  | (RunCore & { status: 'running' })
  | (RunCore & { status: 'held'; hold: RunHold })
  | (RunCore & { status: 'stopped'; openStop: StopPacket })
  | (RunCore & { status: 'completed' })
  | (RunCore & { status: 'terminated'; terminatedReason: string });

export type StartedRunState = Exclude<RunState, { status: 'none' }>;

export function initialRunState(): RunState {
  return { status: 'none' };
}

/** The open stop packet's id, or null when the run is not stopped. */
export function openStopId(state: RunState): string | null {
  return state.status === 'stopped' ? state.openStop.packet_id : null;
}

/** True once the run can take no more results (completed or terminated). */
export function isFinished(state: RunState): boolean {
  return state.status === 'completed' || state.status === 'terminated';
}

/**
 * Apply one event. Pure and total over valid histories; an event that cannot follow the state
 * (e.g. `run.routed` before `run.started`) is a corrupt stream and throws, so a bad history is
 * never folded into a plausible-looking state.
 */
export function evolveRun(state: RunState, event: RunEvent): RunState {
  if (event.type === 'run.started') {
    const data = event.data;
    return {
      status: 'running',
      workflowRunId: data.workflow_run_id,
      project: data.project,
      workflow: { name: data.workflow.name, version: data.workflow.version },
      step: data.entry.step,
      agent: data.entry.agent,
      callback: null,
      waitingParents: [],
      variables: { ...data.variables },
      hops: 0,
      handoffId: null,
      people: { ...data.people },
      processedIds: [data.workflow_run_id],
      notices: 0,
      startedAt: data.started_at,
    };
  }
  if (state.status === 'none') throw new Error(`corrupt run stream: ${event.type} before run.started`);
  const core = coreOf(state);
  switch (event.type) {
    case 'run.result_recorded':
      return {
        ...state,
        processedIds: addId(state.processedIds, event.data.result_id),
        variables: event.data.variables ? { ...state.variables, ...event.data.variables } : state.variables,
      };
    case 'run.routed':
      return {
        ...core,
        status: 'running',
        step: event.data.target.step,
        agent: event.data.target.agent,
        callback: event.data.decision.callback_after,
        hops: event.data.hop,
        handoffId: event.data.handoff_id,
      };
    case 'run.held':
      return {
        ...core,
        status: 'held',
        callback: event.data.decision.callback_after,
        hold: { kind: event.data.hold_kind, reason: event.data.reason, pendingTarget: event.data.pending_target },
      };
    case 'run.stopped':
      return {
        ...core,
        status: 'stopped',
        processedIds: addId(core.processedIds, event.data.packet.packet_id),
        openStop: event.data.packet,
      };
    case 'run.resumed':
      return { ...core, status: 'running', processedIds: addId(core.processedIds, event.data.answer_id) };
    case 'run.completed':
      return { ...core, status: 'completed', callback: null };
    case 'run.terminated':
      return { ...core, status: 'terminated', callback: null, terminatedReason: event.data.reason };
    case 'run.result_rejected':
      return { ...state, processedIds: addId(state.processedIds, event.data.result_id) };
    case 'run.notice_emitted':
      return { ...state, notices: state.notices + 1 };
    default:
      return assertNever(event, 'run event');
  }
}

/** The fields every started run has, without the status-specific ones. */
function coreOf(state: StartedRunState): RunCore {
  return {
    workflowRunId: state.workflowRunId,
    project: state.project,
    workflow: state.workflow,
    step: state.step,
    agent: state.agent,
    callback: state.callback,
    waitingParents: state.waitingParents,
    variables: state.variables,
    hops: state.hops,
    handoffId: state.handoffId,
    people: state.people,
    processedIds: state.processedIds,
    notices: state.notices,
    startedAt: state.startedAt,
  };
}

function addId(ids: readonly string[], id: string): readonly string[] {
  return ids.includes(id) ? ids : [...ids, id];
}
