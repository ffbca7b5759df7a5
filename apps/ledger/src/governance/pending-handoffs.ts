import { SubjectTable, Subjects, type EventRegistry, type HandoffEvent } from '@baton/contracts';
import { evolveHandoff, initialHandoffState, type HandoffState } from '@baton/domain';
import { decodeEvent, type StreamReader } from '@baton/eventstore';

/**
 * Fold every handoff of `project` from the events stream (one range read of
 * `<prefix>.ev.<project>.handoff.*`, complete up to the stream's last sequence when it starts)
 * and return the handoffs in `pending` status with the stream sequence of their last event. Used
 * on `project.resumed` to re-offer. Events that do not decode are skipped (the reactor
 * dead-letters them).
 */
export async function pendingHandoffs(
  reader: StreamReader,
  prefix: string,
  project: string,
  registry: EventRegistry,
): Promise<{ state: Extract<HandoffState, { status: 'pending' }>; lastSeq: number }[]> {
  const folded = new Map<string, { state: HandoffState; lastSeq: number }>();
  for await (const msg of reader.range({ fromSeq: 1, filterSubject: Subjects.aggregate(prefix, project, 'handoff', '*'), batch: 1000 })) {
    const address = SubjectTable.event.parse(prefix, msg.subject);
    if (address === null) continue;
    const { id } = address;
    const decoded = decodeEvent(registry, msg.data, (name) => msg.header(name));
    if (!decoded.ok) continue;
    const current = folded.get(id)?.state ?? initialHandoffState();
    folded.set(id, { state: evolveHandoff(current, { type: decoded.envelope.type, data: decoded.envelope.payload } as HandoffEvent), lastSeq: msg.seq });
  }
  const out: { state: Extract<HandoffState, { status: 'pending' }>; lastSeq: number }[] = [];
  for (const entry of folded.values()) {
    if (entry.state.status === 'pending') out.push({ state: entry.state, lastSeq: entry.lastSeq });
  }
  return out;
}
