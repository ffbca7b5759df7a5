import type {
  DispatchOrigin,
  DispatchStatus,
  HoldKind,
  OnFailure,
  OnReturn,
  RouteCause,
  RouteOutcome,
  RouteRule,
  PendingToolCall,
  RouteTarget,
  RunPeople,
  RunStatus,
  WorkflowRef,
} from '@baton/contracts';
import { clipText, setOwn } from '@baton/contracts';
import { evolveRun, initialRunState, refusedKindOf, type RunEvent, type RunState } from '@baton/domain';
import { canonicalJson, type JsonValue } from '../canonical-json';
import { Op } from '../ops';
import type { SequencedEvent } from '../store';
import { domainEvent, timelineOp } from './common';
import { ID_LOOKUP_KEY, idLookupMember, projectRef } from './refs';
import { toJson, type FoldingProjection } from './fold';

/**
 * One routing decision of a run: where control went (or why it stopped going), by which rule of
 * the cascade and for what reason — the agent's own reason, or the one the engine wrote.
 */
export interface RunRoute {
  /** Stream sequence and time of the event that recorded it. */
  seq: number;
  at: string;
  /**
   * `run.routed` (dispatch), `run.held`, `run.completed`, `run.terminated` (when the agent decided
   * it), or `run.stopped` (the router's `unresolved` decision: outcome `unresolved`, the engine's
   * fallback hold as its status and reason; or the hold a `policy` stop froze a pending call on).
   */
  event: 'run.routed' | 'run.held' | 'run.completed' | 'run.terminated' | 'run.stopped';
  outcome: RouteOutcome;
  /** The rule that decided it (`function_call`, `task`, `workflow_edge`, `handoff`, `message`, `no_action_default`…). */
  rule: RouteRule;
  /** Why: the agent's reason, or the engine's (`no-action default: …`, `returnable handoff A → B: …`); null when the agent gave none. */
  reason: string | null;
  /** Who decided: the agent, the engine (a fallback) or a person (an answer). */
  origin: DispatchOrigin;
  /**
   * The dispatch status the decision carries (seed 000's `status`): `advance`, `hold`, `loop` or
   * `terminate` — a loop and an advance both dispatch, and only this tells them apart.
   */
  status: DispatchStatus;
  /** The agent and step control left (null for the entry step). */
  from: RouteTarget | null;
  /** Where it went: the dispatched target, or the hold's pending target (null when none). */
  to: RouteTarget | null;
  /** The hop number of a dispatch. */
  hop: number | null;
  handoff_id: string | null;
  /** What led to it (a start, a result, an answer, a stop, a customer message, a failed handoff). */
  cause: RouteCause | null;
  /** A HANDOFF route (seed 001): returnable (a call with a return address) or permanent, and its index in the caller's HANDOFF list. */
  handoff?: { return_expected: boolean; route: number };
}

/** The most routes a run view lists (the latest; `hops` counts every dispatch). */
export const MAX_VIEW_ROUTES = 100;

/** A parent waiting for its returnable handoff's child to return (seed 001), as the view shows it. */
export interface RunWaitingParent {
  /** The waiting parent: the return address. */
  agent: string;
  step: string;
  /** The returnable handoff it made. */
  handoff_id: string;
  /** The agent it waits for (a permanent handoff by the child replaces it). */
  child: string;
  /** Since when it waits. */
  since: string;
  /** What happens on return (ON_RETURN), null for the default. */
  on_return: OnReturn | null;
  /** The child's own scope: the PASS variables plus what the child set (MAP copies them back). */
  child_variables: Record<string, unknown>;
  /** The customer message that caused the handoff (original_handoff_utterance). */
  original_utterance: string | null;
  /** 0 for a real customer message, 1 for a replayed one. */
  replay_depth: number;
}

/** The view of one workflow run, as the API (`GET /v1/projects/:project/runs/:id`) and the CLI show it. */
export interface RunView {
  workflow_run_id: string;
  project: string;
  workflow: WorkflowRef;
  status: RunStatus;
  /** The step the current agent runs under, and that agent. */
  step: string;
  agent: string;
  /** The return address (seed 000 §4), or null. */
  callback: string | null;
  /** How many times the run has dispatched an agent. */
  hops: number;
  /** The handoff the current agent works on. */
  handoff_id: string | null;
  /** The open stop packet while the run is stopped. */
  open_stop_id: string | null;
  /** The hold while the run is held (no packet). */
  /** `cause`: what caused the hold (a hold answer names it as `hold_cause`); absent on runs folded before holds kept it. */
  hold: { kind: HoldKind; reason: string; pending_target: RouteTarget | null; cause?: RouteCause; pending_call?: PendingToolCall } | null;
  terminated_reason: string | null;
  people: RunPeople;
  /** Every session variable the run holds (declared and implicit together). */
  variables: Record<string, unknown>;
  /**
   * The session variables the run's definition declares (a MEMORY variable or GATHER field of one
   * of its agents), with their values; null when the run started before the router recorded
   * declarations.
   */
  declared_variables: Record<string, unknown> | null;
  /**
   * The other session variables: set without a declaration — the start's `input`, start
   * variables, and values results or returns wrote that no agent declares. Null with
   * `declared_variables`.
   */
  implicit_variables: Record<string, unknown> | null;
  /** The names declared but not set yet (with `declared_variables`). */
  unset_declared_variables: string[] | null;
  /** Parents waiting for a returnable child, innermost last (seed 001); empty when none waits. */
  waiting_parents: RunWaitingParent[];
  /** A handoff whose target has not run yet (seed 001), or null. */
  pending_handoff: { handoff_id: string; from: string; to: string; route: number; return_expected: boolean; on_failure: OnFailure; since: string } | null;
  /** True while the active agent waits for the customer's next message (a conversation). */
  awaiting_input: boolean;
  /** Customer messages queued while an agent works. */
  queued_messages: number;
  /** The routing decisions, oldest first (the latest {@link MAX_VIEW_ROUTES}), each with its rule and reason. */
  routes: RunRoute[];
  notices: number;
  started_at: string;
  /** Time of the last event applied to the run. */
  updated_at: string;
  /** Stream sequence of that event. */
  last_seq: number;
}

/**
 * Keys of the `runs` projection (relative to its generation). A run is named by its project and
 * id (`<project>:<id>`, see {@link projectRef}): the same workflow_run_id in two projects is two
 * runs. The ref is always the last part of a key.
 */
export const RunKeys = {
  /** The folded state, from which the view is rendered when read ({@link runViewOfState}). */
  state: (project: string, id: string) => `rs:${projectRef(project, id)}`,
  timeline: (project: string, id: string) => `rt:${projectRef(project, id)}`,
  /**
   * The run's routes: a sorted set scored by the stream sequence of the event that recorded each
   * route, its member the route's canonical JSON. Only ever added to (like the timeline), so the
   * routes of a state whose last event is `n` are exactly the members scored `<= n`.
   */
  routes: (project: string, id: string) => `rr:${projectRef(project, id)}`,
  /** The id lookup (members `<id> <project>`): which projects hold a run of a given id. */
  ids: ID_LOOKUP_KEY,
} as const;

/** What the agent said on a result's turn (its posted body, one canonical sentinel), for the timeline. */
export function saidOf(event: RunEvent): string | undefined {
  return event.type === 'run.result_recorded' ? event.data.posted_body : undefined;
}

/**
 * One sentence per run event for the timeline. `actor` is the event's recorded actor (its
 * envelope's): a refused operator answer is recorded under the role word (`agent` `operator`) and
 * by the person who answered (the actor), whom its line names; without an actor, the role word.
 */
export function summarizeRunEvent(event: RunEvent, actor?: string): string {
  switch (event.type) {
    case 'run.started':
      return `started workflow ${event.data.workflow.name} v${event.data.workflow.version} at ${event.data.entry.step} (${event.data.entry.agent})`;
    case 'run.result_recorded':
      return `result ${event.data.result_id} from ${event.data.agent} at ${event.data.step} (${event.data.signal.kind})${
        event.data.pending_tool_call !== undefined ? `; pending call ${event.data.pending_tool_call.name}` : ''
      }`;
    case 'run.routed':
      return `routed to ${event.data.target.agent} at ${event.data.target.step} by rule ${event.data.decision.rule} (hop ${event.data.hop}, origin ${event.data.decision.dispatch.origin}); handoff ${event.data.handoff_id}${
        event.data.approved_call !== undefined ? `; approved call ${event.data.approved_call.name}` : ''
      }${event.data.pending_call !== undefined ? `; hands on pending call ${event.data.pending_call.name}` : ''}`;
    case 'run.held':
      return `held (${event.data.hold_kind}) at ${event.data.step}: ${event.data.reason}${
        event.data.pending_call !== undefined ? `; pending call ${event.data.pending_call.name}` : ''
      }`;
    case 'run.stopped':
      return `stopped (${event.data.packet.why}) at ${event.data.packet.step}; packet ${event.data.packet.packet_id}${
        event.data.on_behalf_of !== undefined ? `; asked by the admin for ${event.data.on_behalf_of}` : ''
      }`;
    case 'run.resumed': {
      const from = event.data.from;
      return from.kind === 'stop'
        ? `resumed by ${event.data.answered_by}: ${from.answer.action} on packet ${from.packet_id} (${from.effect.kind})`
        : `resumed by ${event.data.answered_by}: ${from.answer.action} after a ${from.hold_kind}`;
    }
    case 'run.completed':
      return `completed at ${event.data.step} (${event.data.agent})`;
    case 'run.terminated':
      return `terminated (${event.data.origin}): ${event.data.reason}`;
    case 'run.result_rejected': {
      // What was refused: a result (the default), an operator's answer or a customer's message.
      const d = event.data;
      // Refusals recorded before they named their kind are read by their agent, as the run reads them.
      const kind = refusedKindOf(d);
      if (kind === 'message') return `customer message ${d.result_id} rejected (${d.code}): ${d.message}`;
      if (kind === 'answer') {
        const by = actor !== undefined && actor !== '' ? actor : d.agent;
        // The router's message opens with the same words ("answer <id> by <name>: …"): said once.
        const said = `answer ${d.result_id} by ${by}: `;
        return `answer ${d.result_id} by ${by} rejected (${d.code}): ${d.message.startsWith(said) ? d.message.slice(said.length) : d.message}`;
      }
      return `result ${d.result_id} from ${d.agent} rejected (${d.code}): ${d.message}`;
    }
    case 'run.notice_emitted':
      return `notice ${event.data.notice.notice_id} (${event.data.notice.reason}) to @${event.data.notice.recipient.handle}`;
    // Conversations and returnable handoffs (seed 001): the seed's trace vocabulary.
    case 'run.message_received':
      return `customer message ${event.data.message_id} to ${event.data.agent}${event.data.queued_at !== undefined ? ` (queued at ${event.data.queued_at})` : ''}: "${excerpt(event.data.text)}"`;
    case 'run.message_queued':
      return `customer message ${event.data.message_id} queued while ${event.data.agent} works (${event.data.position} waiting)${event.data.sent_by !== undefined ? ` from @${event.data.sent_by}` : ''}: "${excerpt(event.data.text)}"`;
    case 'run.awaiting_input':
      return `${event.data.agent} waits for the customer${event.data.reply ? `; replied "${excerpt(event.data.reply)}"` : ''}${event.data.note ? ` (${event.data.note})` : ''}`;
    case 'run.handoff':
      return `handoff ${event.data.from} → ${event.data.to} returnExpected: ${event.data.returnExpected} reasonCode: ${event.data.reasonCode} (route ${event.data.route}, ${event.data.trigger}, history ${event.data.context.history_mode}, pass [${event.data.context.passed.join(', ')}]); handoff ${event.data.handoffId}`;
    case 'run.handoff_return_handler':
      return `handoff_return_handler ${event.data.child} → ${event.data.parent} (${event.data.path}, action ${event.data.action}${event.data.handler ? `, handler ${event.data.handler}` : ''}) mappedFields: [${event.data.mappedFields.join(', ')}]${event.data.skippedFields.length > 0 ? ` skipped: [${event.data.skippedFields.join(', ')}]` : ''}${event.data.applied ? '' : ' — no effects applied'}`;
    case 'run.resume_intent':
      return `resume_intent ${event.data.parent} reasonCode: ${event.data.reasonCode} (${event.data.resumeWith}${event.data.message !== null ? `: "${excerpt(event.data.message)}"` : ''})${event.data.reply !== undefined ? `; ${event.data.replyFrom ?? event.data.parent} replied "${excerpt(event.data.reply)}"` : ''}`;
    case 'run.handoff_completed':
      return `handoff_completed ${event.data.from} → ${event.data.to} outcome: ${event.data.outcome} durationMs: ${event.data.durationMs}${event.data.cause ? ` cause: ${event.data.cause}` : ''}${event.data.code ? ` code: ${event.data.code}` : ''}${event.data.siblingIntentMs !== undefined ? ` siblingIntentMs: ${event.data.siblingIntentMs}` : ''}${event.data.onFailure ? ` ON_FAILURE ${event.data.onFailure}` : ''}`;
    case 'run.memory_error':
      return `memory_error: ${event.data.parent} may not write [${event.data.targets.join(', ')}]; the return of ${event.data.child} applied no effects`;
    default: {
      const never: never = event;
      return `event ${(never as { type: string }).type}`;
    }
  }
}

/** A text on one line, at most 80 characters (code points: a clip never splits a surrogate pair). */
function excerpt(text: string): string {
  return clipText(text.replace(/\s+/g, ' ').trim(), 80);
}

/**
 * The routing decision `event` records, or null: `run.routed`, `run.held` and `run.completed`
 * carry the router's decision; `run.terminated` carries one when an agent (or the engine) ended
 * the run. `before` / `after` are the run's states around the event (`after` tells a HANDOFF
 * route's returnable flag, set by the `run.handoff` just before).
 */
export function routeOf(domain: RunEvent, event: SequencedEvent, before: RunState, after: RunState): RunRoute | null {
  const base = { seq: event.seq, at: event.occurredAt };
  const decided = (decision: {
    rule: RouteRule;
    outcome: RouteOutcome;
    dispatch: { status: DispatchStatus; reason: string | null; origin: DispatchOrigin };
  }) => ({
    outcome: decision.outcome,
    rule: decision.rule,
    reason: decision.dispatch.reason,
    origin: decision.dispatch.origin,
    status: decision.dispatch.status,
  });
  const current = (state: RunState): RouteTarget | null => (state.status === 'none' ? null : { agent: state.agent, step: state.step });
  switch (domain.type) {
    case 'run.routed': {
      const d = domain.data;
      const pending = after.status !== 'none' ? after.pendingHandoff : null;
      const handoff =
        d.decision.rule === 'handoff' && pending !== null && pending.handoffId === d.handoff_id
          ? { return_expected: pending.returnExpected, route: pending.route }
          : undefined;
      return {
        ...base,
        event: domain.type,
        ...decided(d.decision),
        from: d.from,
        to: { ...d.target },
        hop: d.hop,
        handoff_id: d.handoff_id,
        cause: { ...d.cause },
        ...(handoff ? { handoff } : {}),
      };
    }
    case 'run.held': {
      const d = domain.data;
      return {
        ...base,
        event: domain.type,
        ...decided(d.decision),
        from: { agent: d.agent, step: d.step },
        to: d.pending_target,
        hop: null,
        handoff_id: null,
        cause: { ...d.cause },
      };
    }
    case 'run.completed': {
      const d = domain.data;
      return {
        ...base,
        event: domain.type,
        ...decided(d.decision),
        from: { agent: d.agent, step: d.step },
        to: null,
        hop: null,
        handoff_id: null,
        cause: null,
      };
    }
    case 'run.terminated': {
      const d = domain.data;
      if (d.decision === undefined) return null;
      return { ...base, event: domain.type, ...decided(d.decision), from: current(before), to: null, hop: null, handoff_id: null, cause: null };
    }
    case 'run.stopped': {
      const d = domain.data;
      if (d.decision === undefined) return null;
      return { ...base, event: domain.type, ...decided(d.decision), from: current(before), to: null, hop: null, handoff_id: null, cause: { ...d.cause } };
    }
    default:
      return null;
  }
}

/** `routes` with `route` appended, keeping the latest {@link MAX_VIEW_ROUTES}. */
export function appendRoute(routes: readonly RunRoute[], route: RunRoute | null): RunRoute[] {
  if (route === null) return [...routes];
  const next = [...routes, route];
  return next.length <= MAX_VIEW_ROUTES ? next : next.slice(next.length - MAX_VIEW_ROUTES);
}

/** Split the session variables into declared and implicit ones (null, null when nothing is known declared). */
function splitVariables(variables: Readonly<Record<string, unknown>>, declared: readonly string[] | null) {
  if (declared === null) return { declared: null, implicit: null, unset: null };
  const names = new Set(declared);
  const d: Record<string, unknown> = {};
  const i: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(variables)) setOwn(names.has(name) ? d : i, name, value);
  return { declared: d, implicit: i, unset: declared.filter((name) => !Object.prototype.hasOwnProperty.call(variables, name)) };
}

/**
 * The view of a folded run state (null before `run.started`). `routes` are the run's routing
 * decisions so far ({@link routeOf}; the state keeps no history of them).
 */
export function toRunView(state: RunState, event: Pick<SequencedEvent, 'seq' | 'occurredAt'>, routes: readonly RunRoute[] = []): RunView | null {
  if (state.status === 'none') return null;
  const split = splitVariables(state.variables, state.declaredVariables);
  return {
    workflow_run_id: state.workflowRunId,
    project: state.project,
    workflow: { ...state.workflow },
    status: state.status,
    step: state.step,
    agent: state.agent,
    callback: state.callback,
    hops: state.hops,
    handoff_id: state.handoffId,
    open_stop_id: state.status === 'stopped' ? state.openStop.packet_id : null,
    hold:
      state.status === 'held'
        ? {
            kind: state.hold.kind,
            reason: state.hold.reason,
            pending_target: state.hold.pendingTarget,
            // Folded before holds kept their cause: absent (an answer then names none).
            ...(state.hold.cause !== undefined ? { cause: state.hold.cause } : {}),
            ...(state.hold.pendingCall != null ? { pending_call: state.hold.pendingCall } : {}),
          }
        : null,
    terminated_reason: state.status === 'terminated' ? state.terminatedReason : null,
    people: { ...state.people },
    variables: { ...state.variables },
    declared_variables: split.declared,
    implicit_variables: split.implicit,
    unset_declared_variables: split.unset,
    waiting_parents: state.waitingParents.map((frame) => ({
      agent: frame.agent,
      step: frame.step,
      handoff_id: frame.handoffId,
      child: frame.child,
      since: frame.at,
      on_return: frame.onReturn,
      child_variables: { ...frame.childVariables },
      original_utterance: frame.originalUtterance,
      replay_depth: frame.replayDepth,
    })),
    pending_handoff:
      state.pendingHandoff === null
        ? null
        : {
            handoff_id: state.pendingHandoff.handoffId,
            from: state.pendingHandoff.from,
            to: state.pendingHandoff.to,
            route: state.pendingHandoff.route,
            return_expected: state.pendingHandoff.returnExpected,
            on_failure: state.pendingHandoff.onFailure,
            since: state.pendingHandoff.at,
          },
    awaiting_input: state.awaitingInput,
    queued_messages: state.queuedMessages.length,
    routes: [...routes],
    notices: state.notices,
    started_at: state.startedAt,
    updated_at: event.occurredAt,
    last_seq: event.seq,
  };
}

/**
 * The view of a run folded from its events (in stream order) the way the `runs` projection folds
 * it, routes included: for readers that have the events and not the projection (`baton run --at`,
 * the notifier's answer outcomes). Null before `run.started`; throws on a corrupt history (as
 * `evolveRun` does).
 */
export function runViewOf(events: readonly SequencedEvent[]): RunView | null {
  let state: RunState = initialRunState();
  let routes: RunRoute[] = [];
  for (const event of events) {
    const domain = domainEvent<RunEvent>(event);
    const after = evolveRun(state, domain);
    routes = appendRoute(routes, routeOf(domain, event, state, after));
    state = after;
  }
  const last = events[events.length - 1];
  return last ? toRunView(state, last, routes) : null;
}

/** Where the `runs` projection keeps the sequence and time of the last event it applied to the run (the view's `last_seq`, `updated_at`). */
const LAST_EVENT_KEY = 'view_last_event';

/**
 * The sequence of the last event the `runs` projection applied to a stored run state, or null when
 * there is no run yet: a reader asks for the routes scored up to it ({@link RunKeys.routes}), so
 * that a route recorded after the state it read is not shown with it.
 */
export function lastSeqOfState(stored: JsonValue | null): number | null {
  if (stored === null || typeof stored !== 'object' || Array.isArray(stored)) return null;
  const last = stored[LAST_EVENT_KEY] as { seq: number } | undefined;
  return last === undefined ? null : last.seq;
}

/**
 * The view of a run as the `runs` projection stores it: rendered from the folded state (the
 * domain's run state and the last applied event) and the run's latest routes (the members of
 * {@link RunKeys.routes} up to the state's last event, oldest first, at most
 * {@link MAX_VIEW_ROUTES}), or null when there is no run yet. Neither the view nor the routes are
 * written with the state: a state holding the run's routes (up to a hundred, ~36 KB) was
 * serialised and written again on every run event.
 */
export function runViewOfState(stored: JsonValue | null, routes: readonly string[] = []): RunView | null {
  if (stored === null || typeof stored !== 'object' || Array.isArray(stored)) return null;
  const last = stored[LAST_EVENT_KEY] as { seq: number; at: string } | undefined;
  if (last === undefined) return null;
  const kept = routes.length <= MAX_VIEW_ROUTES ? routes : routes.slice(routes.length - MAX_VIEW_ROUTES);
  return toRunView(
    stored as unknown as RunState,
    { seq: last.seq, occurredAt: last.at },
    kept.map((raw) => JSON.parse(raw) as RunRoute),
  );
}

/**
 * The `runs` projection: per workflow run, a folded state — the domain's run state (what the
 * router computes with `evolveRun`), the routes and the last event applied — from which the
 * {@link RunView} is rendered when read ({@link runViewOfState}), and a timeline. An event the
 * fold refuses (a damaged stream) is kept in the timeline and changes nothing else.
 */
export function runsProjection(): FoldingProjection<JsonValue> {
  return {
    name: 'runs',
    // 2: keys hold the project as well as the id (`r:<project>:<id>`...), plus the id lookup.
    // 3: a result's timeline entry carries what the agent said (`said`, the posted body).
    // 4: the view shows routes (rule, reason), waiting parents, the pending handoff, and declared
    //    vs implicit variables; the folded state keeps the routes.
    // 5: the view is rendered from the folded state when read (no `r:` key): one value written
    //    per run event instead of two, each with the run's routes.
    // 6: the routes are a sorted set of their own (`rr:`), one member added per route; the state
    //    no longer holds them.
    // 7: each route carries its dispatch `status` (advance, hold, loop, terminate).
    // 8: a run the router stopped (unknown_intent) has no return address (`callback` null).
    // 9: a held run's hold carries its `cause` (what a hold answer names as `hold_cause`).
    // 10: a refused answer's or customer message's timeline line says so (it said "result …").
    // 11: a person's route to an agent waiting for a returnable child unwinds its call frames
    //     (they stayed, and the child's next return mapped into them).
    // 12: a timeline excerpt is clipped at 80 characters, not 80 UTF-16 units (it could end in half
    //     a surrogate pair, which is not text).
    // 13: a hold keeps the call the result before it left pending (`hold.pendingCall`); route and
    //     hold lines name a call handed on.
    // 14: the folded state keeps the call the current handoff carries (`handoffCall`).
    // 15: a refused operator answer's timeline line names who answered (the event's actor), not
    //     the role word it is recorded under ("answer a-1 by alice rejected", was "from operator").
    // 16: the folded state counts refused results of agents the run does not wait for, per agent
    //     (`foreignRefusals`: the router's cap of what one agent may write onto another's run).
    // 17: the folded state counts the refused results of the run's own agent recorded while the run
    //     waited for no result (`idleRefusals`: the same cap, on a held, stopped or finished run).
    version: 17,
    handles: (type) => type.startsWith('run.'),
    stateKeyOf: (event) => RunKeys.state(event.project, event.aggregate.id),
    step(prior, event) {
      const { project } = event;
      const id = event.aggregate.id;
      const domain = domainEvent<RunEvent>(event);
      const timeline = timelineOp(RunKeys.timeline(project, id), event, summarizeRunEvent(domain, event.actor), saidOf(domain));
      const before = (prior as RunState | null) ?? initialRunState();
      let after: RunState;
      try {
        after = evolveRun(before, domain);
      } catch {
        return { ops: [timeline] };
      }
      if (after.status === 'none') return { state: toJson(after), ops: [timeline] };
      // The route (if the event recorded one) goes to the run's routes, scored by this event's
      // sequence; the state keeps no routes, so a run event writes its state without them.
      const route = routeOf(domain, event, before, after);
      // processedIds only serve the router's idempotency: the projection never decides.
      const last = { seq: event.seq, at: event.occurredAt };
      // A state evolved from the stored one carries the key already (the spread overrides it); one
      // the domain rebuilt from its core does not, and gets it first: a literal that spreads and
      // then adds keys gives each object a hidden class of its own on Node 20 (hidden-class.spec.ts).
      const state = LAST_EVENT_KEY in after ? { ...after, processedIds: [], [LAST_EVENT_KEY]: last } : { [LAST_EVENT_KEY]: last, ...after, processedIds: [] };
      const ops = [timeline];
      if (route !== null) ops.push(Op.zadd(RunKeys.routes(project, id), event.seq, canonicalJson(route)));
      // The run's first view: the id lookup learns this project holds it.
      if (before.status === 'none') ops.push(Op.zadd(RunKeys.ids, 0, idLookupMember(project, id)));
      return { state: toJson(state), ops };
    },
  };
}
