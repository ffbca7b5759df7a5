import type { OperatorAnswer, ResumeEffect, StopPacket, StopWhy } from '@baton/contracts';
import type { RunEvent } from '@baton/domain';
import type { JsonValue } from '../canonical-json';
import { Op, type IndexedItem } from '../ops';
import { domainEvent, eventMs, isoMs, UrgencyByPriority } from './common';
import { toJson, type FoldingProjection } from './fold';
import { ID_LOOKUP_KEY, idLookupMember, projectRef } from './refs';

/** Item store names. */
export const STOPS_STORE = 'stops';

/**
 * A stop packet as the `stops` item store holds it. `packet` is the packet as opened; the answer
 * and its effect are separate members (see {@link stopPacketOf} for the packet with its answer).
 */
export interface StopItem extends IndexedItem {
  kind: 'stop';
  why: StopWhy;
  agent: string;
  priority: 'high' | 'medium';
  status: 'open' | 'answered';
  workflow_run_id: string;
  run_id: string;
  step: string;
  packet: StopPacket;
  answer?: OperatorAnswer;
  effect?: ResumeEffect;
  answered_at?: string;
  /** Set when the packet belongs to a handoff mesh (seed 004): its answer goes to the mesh, not a run. */
  mesh_run_id?: string;
}

/**
 * Keys of the `stops` projection (relative to its generation). Stop packet ids are derived from
 * cause ids (result ids, answer ids...), which repeat across projects, so a packet is named by its
 * project and id: its item id is the ref `<project>:<packet_id>` (see {@link projectRef}).
 */
export const StopKeys = {
  /** The item id of a packet in the `stops` item store. */
  item: (project: string, packetId: string) => projectRef(project, packetId),
  /** Sorted set of a workflow run's packet item ids (refs), scored by packet time (ms). */
  byRun: (project: string, workflowRunId: string) => `sr:${projectRef(project, workflowRunId)}`,
  /** The id lookup of packets (members `<packet_id> <project>`). */
  ids: ID_LOOKUP_KEY,
  /** The id lookup of the runs that have packets (members `<workflow_run_id> <project>`). */
  runIds: 'run-ids',
} as const;

/** Stops that need a person soonest: policy and budget stops are high, the rest medium. */
export function stopPriority(why: StopWhy): 'high' | 'medium' {
  return why === 'policy' || why === 'budget' ? 'high' : 'medium';
}

/** The stored packet with its current status and answer (valid against StopPacketSchema). */
export function stopPacketOf(item: StopItem): StopPacket {
  return item.answer ? { ...item.packet, status: 'answered', answer: item.answer } : { ...item.packet, status: 'open' };
}

/**
 * The `stops` projection: every stop packet (`run.stopped`), indexed by why, agent, project,
 * status and priority, ordered by time, plus a per-run index; `run.resumed` from a stop marks the
 * packet answered with the answer and its effect; `mesh.stopped` (a handoff mesh's thrash stop)
 * is stored the same way, with `mesh_run_id` set, and `mesh.stop_answered` marks it answered.
 * Needs no folded state.
 */
export function stopsProjection(): FoldingProjection<JsonValue> {
  return {
    name: 'stops',
    // 2: item ids and keys hold the project as well as the packet id, plus the id lookups.
    version: 2,
    handles: (type) => type === 'run.stopped' || type === 'run.resumed' || type === 'mesh.stopped' || type === 'mesh.stop_answered',
    stateKeyOf: () => null,
    step(_prior, event) {
      const domain = domainEvent<RunEvent>(event);
      // A mesh stopped by its iteration cap (seed 004) opens a packet exactly like a stopped run.
      if (domain.type === 'run.stopped' || event.type === 'mesh.stopped') {
        const packet = (event.payload as { packet: StopPacket }).packet;
        const priority = stopPriority(packet.why);
        const at = isoMs(packet.created_at) || eventMs(event);
        const item: StopItem = {
          id: StopKeys.item(packet.project, packet.packet_id),
          project: packet.project,
          kind: 'stop',
          why: packet.why,
          agent: packet.agent,
          priority,
          status: 'open',
          urgency: UrgencyByPriority[priority],
          at,
          workflow_run_id: packet.workflow_run_id,
          run_id: packet.run_id,
          step: packet.step,
          packet,
          ...(event.type === 'mesh.stopped' ? { mesh_run_id: packet.workflow_run_id } : {}),
        };
        return {
          ops: [
            Op.itemUpsert(STOPS_STORE, toJson(item) as IndexedItem),
            Op.zadd(StopKeys.byRun(packet.project, packet.workflow_run_id), at, item.id),
            Op.zadd(StopKeys.ids, 0, idLookupMember(packet.project, packet.packet_id)),
            Op.zadd(StopKeys.runIds, 0, idLookupMember(packet.project, packet.workflow_run_id)),
          ],
        };
      }
      if (event.type === 'mesh.stop_answered') {
        const d = event.payload as { packet_id: string; answer: OperatorAnswer; effect: ResumeEffect; answered_at: string };
        return {
          ops: [
            Op.itemPatch(STOPS_STORE, StopKeys.item(event.project, d.packet_id), {
              status: 'answered',
              answer: toJson(d.answer),
              effect: toJson(d.effect),
              answered_at: d.answered_at,
            }),
          ],
        };
      }
      if (domain.type === 'run.resumed' && domain.data.from.kind === 'stop') {
        const from = domain.data.from;
        return {
          ops: [
            Op.itemPatch(STOPS_STORE, StopKeys.item(event.project, from.packet_id), {
              status: 'answered',
              answer: toJson(from.answer),
              effect: toJson(from.effect),
              answered_at: domain.data.resumed_at,
            }),
          ],
        };
      }
      return { ops: [] };
    },
  };
}
