import {
  HandbackDecisionSchema,
  HoldAnswerActionSchema,
  type HandoffEvent,
  type HandoffPriority,
  type StopEscalation,
  type StopPacket,
} from '@baton/contracts';
import { assertNever, type RunEvent } from '@baton/domain';
import type { JsonValue } from '../canonical-json';
import { Op, type IndexedItem, type ProjectionOp } from '../ops';
import type { SequencedEvent } from '../store';
import { domainEvent, eventMs, InboxKind, InboxStatus, UrgencyByPriority } from './common';
import { toJson, type FoldingProjection } from './fold';
import { stopPriority } from './stops';
import { projectRef } from './refs';

export const INBOX_STORE = 'inbox';

/**
 * An item of the operator inbox. `kind` says what the person must do: answer a stop packet's
 * form (`stop`), answer a hold (`hold`), accept or rework a completion handback (`handback`), or
 * take over an escalation (`escalation`). `status` is `open` until the item ends: `answered` when a
 * person's answer or handback decision ended it (resolution `answered:<action>` /
 * `decided:<decision>`), `closed` when anything else did (resumed, superseded, the run ended, the
 * handoff withdrawn...); either way with a `resolution`. `at` is when it opened (epoch ms).
 */
export interface InboxItem extends IndexedItem {
  kind: InboxKind;
  status: InboxStatus;
  title: string;
  opened_at: string;
  workflow_run_id?: string;
  handoff_id?: string;
  packet_id?: string;
  resolution?: string;
  closed_at?: string;
  closed_by?: string;
  /** W3C trace id of the event that opened the item (from its `traceparent` header), when it had one. */
  trace_id?: string;
}

/**
 * The answers an item takes, by kind, where the item does not store them: a hold's answer actions
 * and a handback's decisions. A stop's come from its packet's form and are stored with it
 * (`actions`); an escalation is answered nowhere (its consult is the lead's work).
 */
const ACTIONS_BY_KIND: Partial<Record<InboxKind, readonly string[]>> = {
  [InboxKind.hold]: HoldAnswerActionSchema.options,
  [InboxKind.handback]: HandbackDecisionSchema.options,
};

/** An inbox item as the API and the console show it: with the answers it takes (`actions`), whatever its kind. */
export function inboxItemView<T extends InboxItem>(item: T): T & { actions?: readonly string[] } {
  const actions = ACTIONS_BY_KIND[item.kind];
  return actions === undefined || 'actions' in item ? item : { ...item, actions };
}

/** What the inbox remembers per run between events. */
interface RunMemo {
  hold_item: string | null;
  stop_item: string | null;
}

/** What the inbox remembers per handoff between events. */
interface HandoffMemo {
  kind: string;
  priority: HandoffPriority;
  from_agent: string;
  summary: string;
  to_agent?: string;
  to_role?: string;
  workflow_run_id?: string;
  /** The project of `workflow_run_id` when it is not the handoff's own (a cross-project handoff: its `source_project`). */
  run_project?: string;
  /** A completion handback whose item is still open. */
  handback_open?: boolean;
  /** This handoff was escalated and its escalation item is open. */
  escalation_open?: boolean;
  /** The escalation is answered by a consult handoff (it closes with that consult). */
  escalation_via_consult?: boolean;
  /** On a consult created by an escalation: the escalated handoff. */
  escalation_of?: string;
  /** On such a consult: whether it already closed the escalation item. */
  escalation_closed?: boolean;
}

/**
 * Item ids: one namespace per kind, then the project ref of the item's aggregate
 * (`<project>:<id>`, see {@link projectRef}) last, so ids never collide across kinds or projects.
 */
export const InboxItemId = {
  stop: (project: string, packetId: string) => `stop:${projectRef(project, packetId)}`,
  /** A hold opened by the run event at stream seq `seq` (a run may be held several times). */
  hold: (project: string, workflowRunId: string, seq: number) => `hold:${seq}:${projectRef(project, workflowRunId)}`,
  handback: (project: string, handoffId: string) => `handback:${projectRef(project, handoffId)}`,
  escalation: (project: string, handoffId: string) => `escalation:${projectRef(project, handoffId)}`,
} as const;

const TERMINAL_HANDOFF_EVENTS = new Set([
  'handoff.handback_decided',
  'handoff.completed',
  'handoff.completed_by_result',
  'handoff.released',
  'handoff.abandoned',
  'handoff.failed',
  'handoff.archived',
  'handoff.escalated',
]);

/** The handoff status a closing event leaves (for the handback item's `handoff_status`). */
const HandoffStatusAfter: Record<string, string> = {
  'handoff.handback_decided': 'completed',
  'handoff.completed': 'completed',
  'handoff.completed_by_result': 'completed',
  'handoff.escalated': 'failed',
};

const PriorityRank: Record<HandoffPriority, number> = { low: 0, medium: 1, high: 2, urgent: 3 };

/** A resolution that says a person's answer or handback decision ended the item. */
const byAnswer = (resolution: string): boolean => resolution.startsWith('answered:') || resolution.startsWith('decided:');

function close(id: string, resolution: string, event: SequencedEvent, by?: string, extra: Record<string, string> = {}, whileOpen = false): ProjectionOp {
  return Op.itemPatch(
    INBOX_STORE,
    id,
    {
      ...extra,
      status: byAnswer(resolution) ? InboxStatus.answered : InboxStatus.closed,
      resolution,
      closed_at: event.occurredAt,
      ...(by !== undefined ? { closed_by: by } : {}),
    },
    undefined,
    whileOpen ? { field: 'status', is: InboxStatus.open } : undefined,
  );
}

/**
 * Close an escalation's item if it is still open: it has three closers that never see each other's
 * state — its consult ending, the handoff archived, the run's stop taking it over — and the first
 * one's resolution stays.
 */
function closeEscalation(id: string, resolution: string, event: SequencedEvent, by?: string, extra: Record<string, string> = {}): ProjectionOp {
  return close(id, resolution, event, by, extra, true);
}

function item(fields: Omit<InboxItem, 'status' | 'opened_at'>, event: SequencedEvent): IndexedItem {
  // trace_id: the trace of the event that opened the item (follow the run across the services).
  return toJson({ ...fields, status: InboxStatus.open, opened_at: event.occurredAt, ...(event.traceId ? { trace_id: event.traceId } : {}) }) as IndexedItem;
}

function runStep(prior: RunMemo | null, event: SequencedEvent): { state?: RunMemo; ops: ProjectionOp[] } {
  const memo: RunMemo = prior ?? { hold_item: null, stop_item: null };
  const e = domainEvent<RunEvent>(event);
  const wrid = event.aggregate.id;
  const project = event.project;
  switch (e.type) {
    case 'run.held': {
      const id = InboxItemId.hold(project, wrid, event.seq);
      const ops: ProjectionOp[] = memo.hold_item ? [close(memo.hold_item, 'superseded', event)] : [];
      ops.push(
        Op.itemUpsert(
          INBOX_STORE,
          item(
            {
              id,
              project,
              kind: InboxKind.hold,
              why: e.data.hold_kind,
              agent: e.data.agent,
              priority: 'medium',
              urgency: UrgencyByPriority.medium,
              at: eventMs(event),
              title: `${e.data.hold_kind === 'human_gate' ? 'Approve the human gate' : 'Answer the hold'} at ${e.data.step}: ${e.data.reason}`,
              workflow_run_id: wrid,
              step: e.data.step,
              hold_kind: e.data.hold_kind,
              reason: e.data.reason,
              pending_target: e.data.pending_target,
              // The call the result before the hold left pending: a continue or reroute hands it on.
              ...(e.data.pending_call !== undefined ? { pending_call: e.data.pending_call } : {}),
              // What an answer names to say which hold it was made for (`hold_cause`).
              cause: e.data.cause,
            },
            event,
          ),
        ),
      );
      return { state: { ...memo, hold_item: id }, ops };
    }
    case 'run.stopped': {
      const packet = e.data.packet;
      const id = InboxItemId.stop(packet.project, packet.packet_id);
      const ops: ProjectionOp[] = memo.hold_item ? [close(memo.hold_item, 'superseded_by_stop', event)] : [];
      const escalation = e.data.escalation;
      ops.push(stopItemUpsert(packet, event, 'Run', escalation));
      // The stop of an escalation nobody was given a consult for takes over the escalation's item:
      // one failure, one open item, the one with a form to answer (a lead's consult keeps its own).
      if (escalation !== undefined && escalation.consult_handoff_id === undefined) {
        ops.push(
          closeEscalation(InboxItemId.escalation(escalation.project, escalation.handoff_id), 'superseded_by_stop', event, undefined, {
            packet_id: packet.packet_id,
          }),
        );
      }
      return { state: { hold_item: null, stop_item: id }, ops };
    }
    case 'run.resumed': {
      const from = e.data.from;
      if (from.kind === 'stop') {
        const id = InboxItemId.stop(project, from.packet_id);
        return {
          state: { ...memo, stop_item: memo.stop_item === id ? null : memo.stop_item },
          ops: [close(id, `answered:${from.answer.action}`, event, e.data.answered_by)],
        };
      }
      if (!memo.hold_item) return { ops: [] };
      return { state: { ...memo, hold_item: null }, ops: [close(memo.hold_item, `answered:${from.answer.action}`, event, e.data.answered_by)] };
    }
    case 'run.completed':
    case 'run.terminated': {
      const open = [memo.hold_item, memo.stop_item].filter((id): id is string => id !== null);
      if (open.length === 0) return { ops: [] };
      return {
        state: { hold_item: null, stop_item: null },
        ops: open.map((id) => close(id, e.type === 'run.completed' ? 'run_completed' : 'run_terminated', event)),
      };
    }
    case 'run.started':
    case 'run.result_recorded':
    case 'run.routed':
    case 'run.result_rejected':
    case 'run.notice_emitted':
    case 'run.message_received':
    case 'run.message_queued':
    case 'run.awaiting_input':
    case 'run.handoff':
    case 'run.handoff_return_handler':
    case 'run.resume_intent':
    case 'run.handoff_completed':
    case 'run.memory_error':
      return { ops: [] };
    default:
      return assertNever(e, 'run event');
  }
}

function handoffStep(prior: HandoffMemo | null, event: SequencedEvent): { state?: HandoffMemo; ops: ProjectionOp[] } {
  const e = domainEvent<HandoffEvent>(event);
  const hid = event.aggregate.id;
  const project = event.project;
  if (e.type === 'handoff.created') {
    if (prior) return { ops: [] };
    const d = e.data;
    const memo: HandoffMemo = {
      kind: d.kind,
      priority: d.priority,
      from_agent: d.from_agent,
      summary: d.summary,
      ...(d.to_agent !== undefined ? { to_agent: d.to_agent } : {}),
      ...(d.to_role !== undefined ? { to_role: d.to_role } : {}),
      ...(d.workflow_run_id !== undefined ? { workflow_run_id: d.workflow_run_id } : {}),
      ...(d.workflow_run_id !== undefined && d.source_project !== undefined && d.source_project !== project ? { run_project: d.source_project } : {}),
    };
    const ops: ProjectionOp[] = [];
    if (d.kind === 'completion_handback') {
      memo.handback_open = true;
      ops.push(
        Op.itemUpsert(
          INBOX_STORE,
          item(
            {
              id: InboxItemId.handback(project, hid),
              project: d.project,
              kind: InboxKind.handback,
              ...(d.to_agent !== undefined ? { agent: d.to_agent } : {}),
              priority: d.priority,
              urgency: UrgencyByPriority[d.priority],
              at: eventMs(event),
              title: d.summary,
              handoff_id: hid,
              parent_handoff_id: d.reply_to_handoff_id ?? null,
              reviewed_worker: d.reviewed_worker ?? null,
              to_agent: d.to_agent ?? null,
              to_role: d.to_role ?? null,
              handoff_status: 'pending',
              ...(d.workflow_run_id !== undefined ? { workflow_run_id: d.workflow_run_id } : {}),
            },
            event,
          ),
        ),
      );
    }
    const escalated = d.context['escalated_handoff_id'];
    if (d.kind === 'consult' && d.reply_to_handoff_id !== undefined && escalated === d.reply_to_handoff_id) {
      memo.escalation_of = d.reply_to_handoff_id;
    }
    return { state: memo, ops };
  }
  if (!prior) return { ops: [] };
  const memo = { ...prior };
  const ops: ProjectionOp[] = [];
  if (memo.handback_open) {
    if (e.type === 'handoff.claimed') {
      ops.push(Op.itemPatch(INBOX_STORE, InboxItemId.handback(project, hid), { handoff_status: 'claimed', claimed_by: e.data.claimed_by }));
    } else if (e.type === 'handoff.lease_expired') {
      ops.push(Op.itemPatch(INBOX_STORE, InboxItemId.handback(project, hid), { handoff_status: 'pending' }, ['claimed_by']));
    } else if (e.type === 'handoff.offer_given_up') {
      // Its reviewer gave up on the offer unclaimed: it is not offered again, a person decides it here.
      ops.push(Op.itemPatch(INBOX_STORE, InboxItemId.handback(project, hid), { offer_given_up_by: e.data.given_up_by, offer_given_up_reason: e.data.reason }));
    } else if (TERMINAL_HANDOFF_EVENTS.has(e.type)) {
      const resolution = e.type === 'handoff.handback_decided' ? `decided:${e.data.decision}` : e.type.slice('handoff.'.length);
      const by = e.type === 'handoff.handback_decided' ? e.data.decided_by : undefined;
      const handoffStatus = HandoffStatusAfter[e.type] ?? e.type.slice('handoff.'.length);
      ops.push(close(InboxItemId.handback(project, hid), resolution, event, by, { handoff_status: handoffStatus }));
      memo.handback_open = false;
    }
  }
  if (e.type === 'handoff.escalated') {
    const d = e.data;
    const viaConsult = 'escalate_to' in d.outcome;
    const priority: HandoffPriority = PriorityRank[memo.priority] >= PriorityRank.high ? memo.priority : 'high';
    const target = 'escalate_to' in d.outcome ? d.outcome.escalate_to : undefined;
    ops.push(
      Op.itemUpsert(
        INBOX_STORE,
        item(
          {
            id: InboxItemId.escalation(project, hid),
            project,
            kind: InboxKind.escalation,
            why: d.cause,
            ...(target !== undefined ? { agent: target } : {}),
            priority,
            urgency: UrgencyByPriority[priority],
            at: eventMs(event),
            title: `Escalation: ${hid} hit its retry cap (${d.max_retries}) after ${d.cause}: ${memo.summary}`,
            handoff_id: hid,
            escalate_to: target ?? null,
            consult_handoff_id: 'consult_handoff_id' in d.outcome ? d.outcome.consult_handoff_id : null,
            stop_why: 'stop_why' in d.outcome ? d.outcome.stop_why : null,
            attempted_retry: d.attempted_retry,
            max_retries: d.max_retries,
            ...(d.note !== undefined ? { note: d.note } : {}),
            ...(memo.workflow_run_id !== undefined ? { workflow_run_id: memo.workflow_run_id } : {}),
            // A cross-project handoff's run is its source project's: the id alone names no run.
            ...(memo.run_project !== undefined ? { run_project: memo.run_project } : {}),
          },
          event,
        ),
      ),
    );
    memo.escalation_open = true;
    memo.escalation_via_consult = viaConsult;
  } else if (e.type === 'handoff.archived' && memo.escalation_open && !memo.escalation_via_consult) {
    ops.push(closeEscalation(InboxItemId.escalation(project, hid), 'archived', event, e.data.archived_by));
    memo.escalation_open = false;
  }
  // A consult created by an escalation closes the escalation when it ends (the consult is created
  // in the escalated handoff's project).
  if (memo.escalation_of && !memo.escalation_closed && TERMINAL_HANDOFF_EVENTS.has(e.type)) {
    ops.push(closeEscalation(InboxItemId.escalation(project, memo.escalation_of), `consult_${e.type.slice('handoff.'.length)}`, event));
    memo.escalation_closed = true;
  }
  return { state: memo, ops };
}

/** A handoff mesh stopped by its iteration cap (seed 004): an open stop item, like a stopped run's. */
function meshStopped(event: SequencedEvent): ProjectionOp[] {
  return [stopItemUpsert((event.payload as { packet: StopPacket }).packet, event, 'Mesh')];
}

/** The open inbox item of a stop packet (a stopped run's or a stopped mesh's). */
function stopItemUpsert(packet: StopPacket, event: SequencedEvent, of: 'Run' | 'Mesh', escalation?: StopEscalation): ProjectionOp {
  const priority = stopPriority(packet.why);
  return Op.itemUpsert(
    INBOX_STORE,
    item(
      {
        id: InboxItemId.stop(packet.project, packet.packet_id),
        project: packet.project,
        kind: InboxKind.stop,
        why: packet.why,
        agent: packet.agent,
        priority,
        urgency: UrgencyByPriority[priority],
        at: eventMs(event),
        title: packet.next_form?.title ?? `${of} stopped (${packet.why}) at ${packet.step}`,
        workflow_run_id: packet.workflow_run_id,
        ...(of === 'Mesh' ? { mesh_run_id: packet.workflow_run_id } : {}),
        packet_id: packet.packet_id,
        run_id: packet.run_id,
        step: packet.step,
        user_msg: packet.user_msg,
        ...(packet.detail !== undefined ? { detail: packet.detail } : {}),
        form_kind: packet.next_form?.kind ?? null,
        actions: packet.next_form ? packet.next_form.actions.map((a) => a.id) : ['acknowledge'],
        has_pending: packet.pending !== null,
        // A stop asked for an escalated handoff names it (and its project when it is another's).
        ...(escalation !== undefined ? { handoff_id: escalation.handoff_id } : {}),
        ...(escalation !== undefined && escalation.project !== packet.project ? { handoff_project: escalation.project } : {}),
      },
      event,
    ),
  );
}

/**
 * The `inbox` projection: every item a person must act on — an open stop packet, a hold, a
 * completion handback waiting for accept / rework (whoever it is addressed to: agent, person or
 * role; operators filter), an escalation — indexed by project, kind, why, agent, priority and
 * status, ordered newest or most urgent first. Items end (status `answered` when a person's answer
 * or decision ended them, else `closed`; with a resolution) and so leave the open views.
 */
export function inboxProjection(): FoldingProjection<JsonValue> {
  return {
    name: 'inbox',
    // 2: items carry trace_id. 3: item ids and memo keys hold the project (`stop:<project>:<id>`...).
    // 4: a cross-project handoff's escalation item names its run's project (`run_project`).
    // 5: an item a person's answer or handback decision ended is `answered`, not `closed`.
    // 6: a hold item carries its hold's `cause` (the web form sends it back as `hold_cause`).
    // 7: the stop of an escalated handoff names it (`handoff_id`) and, when nobody got a consult,
    //    closes the escalation's item (`superseded_by_stop`, with the stop's `packet_id`).
    version: 8,
    handles: (type) => type.startsWith('run.') || type.startsWith('handoff.') || type === 'mesh.stopped' || type === 'mesh.stop_answered',
    stateKeyOf: (event) =>
      event.type.startsWith('mesh.') ? null : `${event.type.startsWith('run.') ? 'm:run:' : 'm:ho:'}${projectRef(event.project, event.aggregate.id)}`,
    step(prior, event) {
      if (event.type === 'mesh.stopped') return { ops: meshStopped(event) };
      if (event.type === 'mesh.stop_answered') {
        // An operator answered the mesh's stop packet: its item closes like a run's answered stop.
        const d = event.payload as { packet_id: string; answered_by: string; answer: { action: string } };
        return { ops: [close(InboxItemId.stop(event.project, d.packet_id), `answered:${d.answer.action}`, event, d.answered_by)] };
      }
      const result = event.type.startsWith('run.') ? runStep(prior as RunMemo | null, event) : handoffStep(prior as HandoffMemo | null, event);
      return result.state === undefined ? { ops: result.ops } : { state: toJson(result.state), ops: result.ops };
    },
  };
}
