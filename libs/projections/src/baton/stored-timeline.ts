import type { AggregateKind, HandoffEvent } from '@baton/contracts';
import { summarizeMeshEvent, type MeshEvent, type RunEvent } from '@baton/domain';
import type { SequencedEvent } from '../store';
import { timelineEntryOf, type TimelineEntry } from './common';
import { summarizeHandoffEvent } from './handoffs';
import { saidOf, summarizeRunEvent } from './runs';

/**
 * The timeline entry of an event read straight from the stream, worded as the projections word
 * it: for readers that have the events and no projection (`baton run / handoff / mesh`, including
 * `--at`; the mesh page and API, since no projection holds meshes). A summary the domain cannot
 * word (a damaged payload) is the event type.
 */
export function storedTimelineEntry(kind: AggregateKind, event: SequencedEvent): TimelineEntry {
  const domain = { type: event.type, data: event.payload };
  let summary: string;
  try {
    summary =
      kind === 'handoff'
        ? summarizeHandoffEvent(domain as HandoffEvent)
        : kind === 'run'
          ? summarizeRunEvent(domain as RunEvent, event.actor)
          : kind === 'mesh'
            ? summarizeMeshEvent(domain as MeshEvent)
            : event.type;
  } catch {
    summary = event.type;
  }
  const said =
    kind === 'run'
      ? saidOf(domain as RunEvent)
      : kind === 'mesh' && event.type === 'mesh.turn_recorded'
        ? (event.payload as { text?: unknown }).text
        : undefined;
  return timelineEntryOf(event, summary, typeof said === 'string' ? said : undefined);
}
