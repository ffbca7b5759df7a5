import type { HoldKind, RouteTarget, RunPeople, RunStatus, WorkflowRef } from '@baton/contracts';
import { evolveRun, initialRunState, type RunEvent, type RunState } from '@baton/domain';
import type { JsonValue } from '../canonical-json';
import { Op } from '../ops';
import type { SequencedEvent } from '../store';
import { domainEvent, timelineOp } from './common';
import { ID_LOOKUP_KEY, idLookupMember, projectRef } from './refs';
import { toJson, type FoldingProjection } from './fold';

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
  hold: { kind: HoldKind; reason: string; pending_target: RouteTarget | null } | null;
  terminated_reason: string | null;
  people: RunPeople;
  variables: Record<string, unknown>;
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
  view: (project: string, id: string) => `r:${projectRef(project, id)}`,
  state: (project: string, id: string) => `rs:${projectRef(project, id)}`,
  timeline: (project: string, id: string) => `rt:${projectRef(project, id)}`,
  /** The id lookup (members `<id> <project>`): which projects hold a run of a given id. */
  ids: ID_LOOKUP_KEY,
} as const;

/** What the agent said on a result's turn (its posted body, one canonical sentinel), for the timeline. */
export function saidOf(event: RunEvent): string | undefined {
  return event.type === 'run.result_recorded' ? event.data.posted_body : undefined;
}

/** One sentence per run event for the timeline. */
export function summarizeRunEvent(event: RunEvent): string {
  switch (event.type) {
    case 'run.started':
      return `started workflow ${event.data.workflow.name} v${event.data.workflow.version} at ${event.data.entry.step} (${event.data.entry.agent})`;
    case 'run.result_recorded':
      return `result ${event.data.result_id} from ${event.data.agent} at ${event.data.step} (${event.data.signal.kind})`;
    case 'run.routed':
      return `routed to ${event.data.target.agent} at ${event.data.target.step} by rule ${event.data.decision.rule} (hop ${event.data.hop}, origin ${event.data.decision.dispatch.origin}); handoff ${event.data.handoff_id}`;
    case 'run.held':
      return `held (${event.data.hold_kind}) at ${event.data.step}: ${event.data.reason}`;
    case 'run.stopped':
      return `stopped (${event.data.packet.why}) at ${event.data.packet.step}; packet ${event.data.packet.packet_id}`;
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
    case 'run.result_rejected':
      return `result ${event.data.result_id} from ${event.data.agent} rejected (${event.data.code}): ${event.data.message}`;
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
      return `resume_intent ${event.data.parent} reasonCode: ${event.data.reasonCode} (${event.data.resumeWith}${event.data.message !== null ? `: "${excerpt(event.data.message)}"` : ''})`;
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

function excerpt(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= 80 ? flat : `${flat.slice(0, 79)}…`;
}

/** The view of a folded run state (null before `run.started`). */
export function toRunView(state: RunState, event: SequencedEvent): RunView | null {
  if (state.status === 'none') return null;
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
    hold: state.status === 'held' ? { kind: state.hold.kind, reason: state.hold.reason, pending_target: state.hold.pendingTarget } : null,
    terminated_reason: state.status === 'terminated' ? state.terminatedReason : null,
    people: { ...state.people },
    variables: { ...state.variables },
    notices: state.notices,
    started_at: state.startedAt,
    updated_at: event.occurredAt,
    last_seq: event.seq,
  };
}

/**
 * The `runs` projection: per workflow run, a {@link RunView} folded with the domain's `evolveRun`
 * (what the router computes) and a timeline. An event the fold refuses (a damaged stream) is kept
 * in the timeline and changes nothing else.
 */
export function runsProjection(): FoldingProjection<JsonValue> {
  return {
    name: 'runs',
    // 2: keys hold the project as well as the id (`r:<project>:<id>`...), plus the id lookup.
    // 3: a result's timeline entry carries what the agent said (`said`, the posted body).
    version: 3,
    handles: (type) => type.startsWith('run.'),
    stateKeyOf: (event) => RunKeys.state(event.project, event.aggregate.id),
    step(prior, event) {
      const { project } = event;
      const id = event.aggregate.id;
      const domain = domainEvent<RunEvent>(event);
      const timeline = timelineOp(RunKeys.timeline(project, id), event, summarizeRunEvent(domain), saidOf(domain));
      const before = (prior as RunState | null) ?? initialRunState();
      let after: RunState;
      try {
        after = evolveRun(before, domain);
      } catch {
        return { ops: [timeline] };
      }
      const view = toRunView(after, event);
      // processedIds only serve the router's idempotency: the projection never decides.
      const state = after.status === 'none' ? after : { ...after, processedIds: [] };
      if (!view) return { state: toJson(state), ops: [timeline] };
      const ops = [timeline, Op.jsonSet(RunKeys.view(project, id), toJson(view))];
      // The run's first view: the id lookup learns this project holds it.
      if (before.status === 'none') ops.push(Op.zadd(RunKeys.ids, 0, idLookupMember(project, id)));
      return { state: toJson(state), ops };
    },
  };
}
