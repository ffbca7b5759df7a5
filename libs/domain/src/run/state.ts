import type {
  DomainEventOf,
  HoldKind,
  OnFailure,
  OnReturn,
  PendingToolCall,
  RefusedKind,
  RouteCause,
  TranscriptEntry,
  RouteTarget,
  RunEventSchemas,
  RunPeople,
  StopPacket,
  WorkflowRef,
} from '@baton/contracts';
import { assertNever } from '../decider';
import { ProcessedIds } from './processed-ids';

/** A run's applied ids: as the domain grows them, or as an array (a state decoded from JSON). */
export type ProcessedIdList = ProcessedIds | readonly string[];

/** A workflow-run event: `{ type: 'run.routed', data: {...} }`. */
export type RunEvent = DomainEventOf<typeof RunEventSchemas>;
export type RunEventOf<T extends RunEvent['type']> = Extract<RunEvent, { type: T }>;

/**
 * A parent waiting for a returnable handoff's child (seed 001): one frame of the call stack. A
 * returnable handoff is a call with a return address (seed 000's callback): `agent` is the
 * return address, `child` the callee. The child's own variables live here until MAP copies the
 * mapped ones back to the parent's scope.
 */
export interface WaitingParent {
  agent: string;
  step: string;
  handoffId: string;
  /** The agent the parent waits for (a permanent handoff by the child replaces it). */
  child: string;
  /** The child's scope: the PASS variables plus whatever the child set. */
  childVariables: Readonly<Record<string, unknown>>;
  onReturn: OnReturn | null;
  /** original_handoff_utterance. */
  originalUtterance: string | null;
  /** latest_child_user_utterance: the last customer message while this child was active. */
  latestChildUtterance: string | null;
  /** 0 when a real customer message caused the handoff, 1 when a replay did (one level only). */
  replayDepth: number;
  at: string;
}

/** A handoff the target has not yet accepted and run (its `handoff_completed` is pending). */
export interface PendingHandoff {
  handoffId: string;
  from: string;
  fromStep: string;
  to: string;
  route: number;
  returnExpected: boolean;
  onFailure: OnFailure;
  at: string;
}

/**
 * A customer message that arrived while an agent of the running conversation worked; delivered
 * (as `run.message_received`) the next time the run waits for the customer, oldest first.
 */
export interface QueuedMessage {
  messageId: string;
  text: string;
  sentBy: string | null;
  /** The agent that relayed it (`relayed_by`), null on the shared subject. */
  relayedBy: string | null;
  queuedAt: string;
}

/** The most customer messages a run queues while an agent works; one more is refused (`message_queue_full`). */
export const MAX_QUEUED_MESSAGES = 20;

/** The most transcript entries a run keeps (HISTORY reads from them). */
export const MAX_TRANSCRIPT = 50;

/** The hold a `held` run waits in (no stop packet). */
export interface RunHold {
  kind: HoldKind;
  reason: string;
  /** Where an operator's `continue` goes; null when there is nowhere to continue to. */
  pendingTarget: RouteTarget | null;
  /** What caused the hold (its `run.held`'s cause): an answer naming another cause was made for an earlier hold. */
  cause: RouteCause;
  /** The call the result before the hold left pending (`run.held.pending_call`): a continue or reroute hands it on. */
  pendingCall: PendingToolCall | null;
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
  /** Parents waiting for a returnable child, innermost last (seed 001). */
  waitingParents: readonly WaitingParent[];
  /** The published definition the run is pinned to (null for runs started before pinning). */
  definitionDigest: string | null;
  /** True while the active agent waits for the customer's next message (seed 001). */
  awaitingInput: boolean;
  /** The conversation so far (customer messages and agent replies), the last MAX_TRANSCRIPT. */
  transcript: readonly TranscriptEntry[];
  /** The handoff whose target has not yet run (seed 001 `handoff_completed`). */
  pendingHandoff: PendingHandoff | null;
  /** Customer messages that arrived while an agent worked, oldest first (at most MAX_QUEUED_MESSAGES). */
  queuedMessages: readonly QueuedMessage[];
  /** Session variables: the start's, with every result's `variables` merged over them. */
  variables: Readonly<Record<string, unknown>>;
  /**
   * The variables the run's definition declares (MEMORY and GATHER of its agents), sorted; every
   * other variable is implicit. Null for runs started before the router recorded them.
   */
  declaredVariables: readonly string[] | null;
  /** How many times the run has dispatched an agent (`run.routed` events). */
  hops: number;
  /** The handoff the current agent works on (the last `run.routed`'s `handoff_id`). */
  handoffId: string | null;
  /**
   * The call that handoff carries (its `run.routed`'s `pending_call`, else `approved_call`): a stop
   * from outside while the agent works on it freezes this call in its packet, so it is not dropped.
   * Absent in a fold stored before it was kept (read as none).
   */
  handoffCall?: PendingToolCall | null;
  /** Who started the run and who else may be notified (seed 000 §5). */
  people: RunPeople;
  /**
   * Result ids, answer ids and stop packet ids already applied (idempotency). A state decoded from
   * JSON (a projection's stored fold) holds them as an array; {@link hasProcessedId} and
   * {@link withProcessedId} take either.
   */
  processedIds: ProcessedIdList;
  /** How many HumanActionNotices the run has emitted. */
  notices: number;
  startedAt: string;
  /**
   * Refused results the run recorded (`run.result_rejected`, `refused: result`) of agents other than
   * the one it waited for when each came, per agent: what {@link foreignRefusalsOf} counts against
   * the router's cap on them (an agent may publish a result naming any run of its project, and every
   * refusal recorded is an event on someone else's run; docs/runs.md, rule 4). Null while there are
   * none; absent in a fold stored before it was kept (read as none).
   */
  foreignRefusals?: Readonly<Record<string, number>> | null;
  /**
   * Refused results the run recorded of the agent it waited for while it waited for no agent result
   * (held, stopped, completed, terminated, or waiting for the customer's message: `run_not_running`,
   * `awaiting_input`), per agent: what {@link idleRefusalsOf} counts against the router's cap on
   * them (`ROUTER_FOREIGN_REFUSALS_PER_RUN`: a finished run's last agent could otherwise append
   * refusals to it for ever). A refusal is counted here or in `foreignRefusals`, never both. Null
   * while there are none; absent in a fold stored before it was kept (read as none).
   */
  idleRefusals?: Readonly<Record<string, number>> | null;
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
 * The call frames and pending handoff left once a person routes the run to `agent`: when `agent`
 * waits in a frame for a returnable child, that frame and every frame above it go, with the
 * pending handoff of any of them; null when `agent` waits in none.
 */
function unwindTo(
  state: Pick<RunCore, 'waitingParents' | 'pendingHandoff'>,
  agent: string,
): { waitingParents: readonly WaitingParent[]; pendingHandoff: PendingHandoff | null } | null {
  const frames = state.waitingParents;
  let at = -1;
  for (let i = frames.length - 1; i >= 0; i--) {
    if (frames[i]!.agent === agent) {
      at = i;
      break;
    }
  }
  if (at < 0) return null;
  const gone = new Set(frames.slice(at).map((frame) => frame.handoffId));
  const pending = state.pendingHandoff;
  return { waitingParents: frames.slice(0, at), pendingHandoff: pending !== null && gone.has(pending.handoffId) ? null : pending };
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
      definitionDigest: data.definition_digest ?? null,
      awaitingInput: false,
      transcript: [],
      pendingHandoff: null,
      queuedMessages: [],
      variables: { ...data.variables },
      declaredVariables: data.declared_variables ?? null,
      hops: 0,
      handoffId: null,
      handoffCall: null,
      people: { ...data.people },
      processedIds: ProcessedIds.of([data.workflow_run_id]),
      notices: 0,
      startedAt: data.started_at,
      foreignRefusals: null,
      idleRefusals: null,
    };
  }
  if (state.status === 'none') throw new Error(`corrupt run stream: ${event.type} before run.started`);
  const core = coreOf(state);
  switch (event.type) {
    case 'run.result_recorded': {
      const set = event.data.variables;
      const top = state.waitingParents[state.waitingParents.length - 1];
      if (set !== undefined && top !== undefined && top.child === event.data.agent) {
        // A child's variables stay in its own scope until MAP copies the mapped ones back.
        return {
          ...state,
          processedIds: withProcessedId(state.processedIds, event.data.result_id),
          waitingParents: replaceTop(state.waitingParents, { ...top, childVariables: { ...top.childVariables, ...set } }),
        };
      }
      return {
        ...state,
        processedIds: withProcessedId(state.processedIds, event.data.result_id),
        variables: set ? { ...state.variables, ...set } : state.variables,
      };
    }
    case 'run.message_received': {
      const top = state.waitingParents[state.waitingParents.length - 1];
      return {
        ...state,
        processedIds: withProcessedId(state.processedIds, messageKey(event.data.message_id)),
        transcript: appendTranscript(state.transcript, { role: 'customer', agent: null, text: event.data.text }),
        // A delivered queued message leaves the queue.
        queuedMessages: state.queuedMessages.some((m) => m.messageId === event.data.message_id)
          ? state.queuedMessages.filter((m) => m.messageId !== event.data.message_id)
          : state.queuedMessages,
        waitingParents: top === undefined ? state.waitingParents : replaceTop(state.waitingParents, { ...top, latestChildUtterance: event.data.text }),
      };
    }
    case 'run.message_queued':
      return {
        ...state,
        processedIds: withProcessedId(state.processedIds, messageKey(event.data.message_id)),
        queuedMessages: [
          ...state.queuedMessages,
          {
            messageId: event.data.message_id,
            text: event.data.text,
            sentBy: event.data.sent_by ?? null,
            relayedBy: event.data.relayed_by ?? null,
            queuedAt: event.data.queued_at,
          },
        ],
      };
    case 'run.awaiting_input':
      return {
        status: 'running',
        ...core,
        agent: event.data.agent,
        step: event.data.step,
        awaitingInput: true,
        transcript:
          event.data.reply === null ? core.transcript : appendTranscript(core.transcript, { role: 'agent', agent: event.data.agent, text: event.data.reply }),
      };
    case 'run.handoff': {
      const d = event.data;
      const pendingHandoff: PendingHandoff = {
        handoffId: d.handoffId,
        from: d.from,
        fromStep: state.step,
        to: d.to,
        route: d.route,
        returnExpected: d.returnExpected,
        onFailure: d.onFailure,
        at: d.at,
      };
      if (d.returnExpected) {
        const frame: WaitingParent = {
          agent: d.from,
          step: state.step,
          handoffId: d.handoffId,
          child: d.to,
          childVariables: { ...d.passedVariables },
          onReturn: d.onReturn,
          originalUtterance: d.message,
          latestChildUtterance: null,
          replayDepth: d.replayDepth,
          at: d.at,
        };
        return { ...state, pendingHandoff, waitingParents: [...state.waitingParents, frame] };
      }
      // Permanent: the caller's thread ends; inside a child, the target takes the child's place.
      const top = state.waitingParents[state.waitingParents.length - 1];
      return {
        ...state,
        pendingHandoff,
        waitingParents: top === undefined ? state.waitingParents : replaceTop(state.waitingParents, { ...top, child: d.to }),
      };
    }
    case 'run.handoff_return_handler': {
      const frames = state.waitingParents.slice(0, -1);
      const writes = event.data.applied ? event.data.writes : {};
      const below = frames[frames.length - 1];
      if (below !== undefined) {
        return { ...state, waitingParents: replaceTop(frames, { ...below, childVariables: { ...below.childVariables, ...writes } }) };
      }
      return { ...state, waitingParents: frames, variables: { ...state.variables, ...writes } };
    }
    case 'run.handoff_completed': {
      const d = event.data;
      const pending = state.pendingHandoff !== null && state.pendingHandoff.handoffId === d.handoffId ? null : state.pendingHandoff;
      // A returnable handoff that failed before the child accepted it leaves no waiting parent.
      const failed = d.outcome === 'error' || d.outcome === 'timeout';
      const top = state.waitingParents[state.waitingParents.length - 1];
      const frames = failed && top !== undefined && top.handoffId === d.handoffId ? state.waitingParents.slice(0, -1) : state.waitingParents;
      return { ...state, pendingHandoff: pending, waitingParents: frames };
    }
    case 'run.resume_intent':
      // A COMPLETE's RESPOND said before the replay: in the transcript, as the child's.
      return event.data.reply === undefined
        ? state
        : {
            ...state,
            transcript: appendTranscript(state.transcript, { role: 'agent', agent: event.data.replyFrom ?? event.data.parent, text: event.data.reply }),
          };
    case 'run.memory_error':
      return state;
    case 'run.routed': {
      // A person's route (an answer's reroute or intent, a hold's continue) to an agent that waits
      // for a returnable child takes the work back to it: the call frames from its own up are
      // unwound (the child's return will never come; its variables are not mapped), as a failed
      // child's frame is. Otherwise the frame stayed, and the child's next return mapped into it.
      const unwound = event.data.decision.rule === 'resume' ? unwindTo(core, event.data.target.agent) : null;
      // Keys that `core` lacks come before it (status, hold, openStop, terminatedReason here and
      // below): a literal that spreads and then adds a key gets a hidden class per object on
      // Node 20, and every later copy of such a state is slow (hidden-class.spec.ts).
      return {
        status: 'running',
        ...core,
        ...(unwound ?? {}),
        awaitingInput: false,
        step: event.data.target.step,
        agent: event.data.target.agent,
        callback: event.data.decision.callback_after,
        hops: event.data.hop,
        handoffId: event.data.handoff_id,
        handoffCall: event.data.pending_call ?? event.data.approved_call ?? null,
      };
    }
    case 'run.held':
      return {
        status: 'held',
        hold: {
          kind: event.data.hold_kind,
          reason: event.data.reason,
          pendingTarget: event.data.pending_target,
          cause: event.data.cause,
          pendingCall: event.data.pending_call ?? null,
        },
        ...core,
        // The agent and step the hold names: the run's own but for an ON_FAILURE ESCALATE hold, which
        // names the caller (its `continue` runs it; the failed child's turn is over). A hold stored
        // before named the run's agent, so folding it changes nothing.
        agent: event.data.agent,
        step: event.data.step,
        callback: event.data.decision.callback_after,
      };
    case 'run.stopped':
      // The router's own stop (an unresolved decision: unknown_intent) is a transition that is not a
      // call, so it clears the return address (seed 000 §4); an agent's or an outside stop keeps it
      // for an approval or a raised cap, which let the stopped agent carry on.
      return {
        status: 'stopped',
        openStop: event.data.packet,
        ...core,
        callback: event.data.source === 'router' ? null : core.callback,
        processedIds: withProcessedId(core.processedIds, event.data.packet.packet_id),
      };
    case 'run.resumed':
      return { status: 'running', ...core, processedIds: withProcessedId(core.processedIds, answerKey(event.data.answer_id)) };
    case 'run.completed':
      return { status: 'completed', ...core, callback: null };
    case 'run.terminated':
      return { status: 'terminated', terminatedReason: event.data.reason, ...core, callback: null };
    case 'run.result_rejected':
      return {
        ...state,
        processedIds: withProcessedId(state.processedIds, refusalKey(event.data)),
        foreignRefusals: withForeignRefusal(state, event.data),
        idleRefusals: withIdleRefusal(state, event.data),
      };
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
    definitionDigest: state.definitionDigest,
    awaitingInput: state.awaitingInput,
    transcript: state.transcript,
    pendingHandoff: state.pendingHandoff,
    queuedMessages: state.queuedMessages,
    variables: state.variables,
    declaredVariables: state.declaredVariables,
    hops: state.hops,
    handoffId: state.handoffId,
    people: state.people,
    processedIds: state.processedIds,
    notices: state.notices,
    startedAt: state.startedAt,
    foreignRefusals: state.foreignRefusals ?? null,
    idleRefusals: state.idleRefusals ?? null,
  };
}

/**
 * How many refused results of `agent` the run has recorded while it waited for another agent
 * (`foreignRefusals`): the count the router holds to `ROUTER_FOREIGN_REFUSALS_PER_RUN` before it
 * stops recording them on the run (and dead-letters them instead).
 */
export function foreignRefusalsOf(state: Pick<RunCore, 'foreignRefusals'>, agent: string): number {
  const counts = state.foreignRefusals;
  return counts !== null && counts !== undefined && Object.hasOwn(counts, agent) ? (counts[agent] ?? 0) : 0;
}

/** `foreignRefusals` after a `run.result_rejected`: one more for its agent when it refused a result of an agent the run did not wait for. */
function withForeignRefusal(state: StartedRunState, data: { agent: string; refused?: RefusedKind | undefined }): RunCore['foreignRefusals'] {
  const counts = state.foreignRefusals ?? null;
  if (refusedKindOf(data) !== 'result' || data.agent === state.agent) return counts;
  // A record without a prototype: an agent name is a key here, never a property of Object.prototype.
  const next: Record<string, number> = Object.assign(Object.create(null) as Record<string, number>, counts);
  next[data.agent] = foreignRefusalsOf(state, data.agent) + 1;
  return next;
}

/**
 * Whether the run waits for no agent result now: held, stopped or finished, or waiting for the
 * customer's message. A result its own agent sends then is refused (`run_not_running`,
 * `awaiting_input`) whatever it holds, and says nothing of its turn (the guards read none of them
 * as a failure on the run: `OwnTurnRefusalCodes`).
 */
export function waitsForNoResult(state: StartedRunState): boolean {
  return state.status !== 'running' || state.awaitingInput;
}

/**
 * How many refused results of `agent` — the agent the run waited for — the run has recorded while it
 * waited for no agent result ({@link waitsForNoResult}; `idleRefusals`): the count the router holds
 * to `ROUTER_FOREIGN_REFUSALS_PER_RUN` before it stops recording them on the run (and dead-letters
 * them `idle_refusals_spent` instead).
 */
export function idleRefusalsOf(state: Pick<RunCore, 'idleRefusals'>, agent: string): number {
  const counts = state.idleRefusals;
  return counts !== null && counts !== undefined && Object.hasOwn(counts, agent) ? (counts[agent] ?? 0) : 0;
}

/** `idleRefusals` after a `run.result_rejected`: one more for its agent when it refused a result of the run's own agent while the run waited for no result. */
function withIdleRefusal(state: StartedRunState, data: { agent: string; refused?: RefusedKind | undefined }): RunCore['idleRefusals'] {
  const counts = state.idleRefusals ?? null;
  if (refusedKindOf(data) !== 'result' || data.agent !== state.agent || !waitsForNoResult(state)) return counts;
  const next: Record<string, number> = Object.assign(Object.create(null) as Record<string, number>, counts);
  next[data.agent] = idleRefusalsOf(state, data.agent) + 1;
  return next;
}

/**
 * The processed-id key of a customer message: message ids are apart from result, answer and stop
 * ids (a customer chooses them, and a message whose id is the agent's next result id must not
 * swallow that result). `#` is no id's character, so no result id (`message:m1` is one) can be a
 * message's key.
 */
export function messageKey(messageId: string): string {
  return `message#${messageId}`;
}

/**
 * The processed-id key of an operator's answer: answer ids are apart from result ids as message ids
 * are (an operator or client chooses them, so an answer whose id is one of the run's result ids
 * must still be decided, and must not swallow a later result of that id).
 */
export function answerKey(answerId: string): string {
  return `answer#${answerId}`;
}

/** The processed-id key of what a `run.result_rejected` refused: a message's {@link messageKey}, an answer's {@link answerKey}, a result's its id. */
export function refusedKey(kind: RefusedKind, id: string): string {
  return kind === 'message' ? messageKey(id) : kind === 'answer' ? answerKey(id) : id;
}

/**
 * What a `run.result_rejected` refused: its `refused`, or — on refusals recorded before they named
 * their kind — what its agent says (`customer`: a message, `operator`: an answer, else a result).
 * The one reading of it: the run's idempotency keys, the guards' failure facts and the notifier's
 * answer outcomes all ask here.
 */
export function refusedKindOf(data: { agent: string; refused?: RefusedKind | undefined }): RefusedKind {
  return data.refused ?? (data.agent === LEGACY_MESSAGE_REFUSAL_AGENT ? 'message' : data.agent === LEGACY_ANSWER_REFUSAL_AGENT ? 'answer' : 'result');
}

/** The processed-id key of a refusal. */
function refusalKey(data: { result_id: string; agent: string; refused?: RefusedKind | undefined }): string {
  return refusedKey(refusedKindOf(data), data.result_id);
}

/** The `agent` refused customer messages were recorded under before refusals named their kind. */
const LEGACY_MESSAGE_REFUSAL_AGENT = 'customer';
/** The `agent` refused operator answers were recorded under before refusals named their kind (still, with `refused: answer`). */
const LEGACY_ANSWER_REFUSAL_AGENT = 'operator';

/** Whether a run has applied the result, answer, message or stop `id` (its `processedIds` hold it). */
export function hasProcessedId(ids: ProcessedIdList, id: string): boolean {
  return ids instanceof ProcessedIds ? ids.has(id) : ids.includes(id);
}

/** `ids` with `id` added (the same value when it holds it already). */
export function withProcessedId(ids: ProcessedIdList, id: string): ProcessedIds {
  return (ids instanceof ProcessedIds ? ids : ProcessedIds.of(ids)).with(id);
}

function replaceTop(frames: readonly WaitingParent[], top: WaitingParent): readonly WaitingParent[] {
  return [...frames.slice(0, -1), top];
}

function appendTranscript(transcript: readonly TranscriptEntry[], entry: TranscriptEntry): readonly TranscriptEntry[] {
  const next = [...transcript, entry];
  return next.length <= MAX_TRANSCRIPT ? next : next.slice(next.length - MAX_TRANSCRIPT);
}

/** The variables the active agent reads: a child's own scope, else the session's. */
export function activeScope(state: RunCore): Readonly<Record<string, unknown>> {
  const top = state.waitingParents[state.waitingParents.length - 1];
  return top !== undefined && top.child === state.agent ? top.childVariables : state.variables;
}

/** The scope of the waiting parent at `index` (the frame below it holds it; the session at 0). */
export function parentScope(state: RunCore, index: number): Readonly<Record<string, unknown>> {
  return index === 0 ? state.variables : (state.waitingParents[index - 1]?.childVariables ?? state.variables);
}
