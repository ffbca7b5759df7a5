import type { HandoffEvent } from '@baton/contracts';
import { evolveHandoff, initialHandoffState, type HandoffState } from '@baton/domain';
import type { EventRegistry } from '@baton/contracts';
import type { JetStreamClient } from 'nats';

const decoder = new TextDecoder();

/**
 * Fold every handoff of `project` from the events stream (an ordered, in-memory consumer on
 * `<prefix>.ev.<project>.handoff.*`, read once to the end) and return the handoffs in `pending`
 * status with the stream sequence of their last event. Used on `project.resumed` to re-offer.
 */
export async function pendingHandoffs(
  js: JetStreamClient,
  stream: string,
  prefix: string,
  project: string,
  registry: EventRegistry,
): Promise<{ state: Extract<HandoffState, { status: 'pending' }>; lastSeq: number }[]> {
  const consumer = await js.consumers.get(stream, { filterSubjects: `${prefix}.ev.${project}.handoff.*` });
  const folded = new Map<string, { state: HandoffState; lastSeq: number }>();
  try {
    let pending = (await consumer.info(true)).num_pending;
    while (pending > 0) {
      const batch = await consumer.fetch({ max_messages: 1000, expires: 2000 });
      let got = 0;
      for await (const msg of batch) {
        got++;
        const id = msg.subject.split('.')[4] as string;
        const decoded = registry.decode(JSON.parse(decoder.decode(msg.data)));
        if (decoded.ok) {
          const current = folded.get(id)?.state ?? initialHandoffState();
          folded.set(id, { state: evolveHandoff(current, { type: decoded.value.type, data: decoded.value.payload } as HandoffEvent), lastSeq: msg.seq });
        }
        pending = msg.info.pending;
      }
      if (got === 0) break;
    }
  } finally {
    await consumer.delete().catch(() => false);
  }
  const out: { state: Extract<HandoffState, { status: 'pending' }>; lastSeq: number }[] = [];
  for (const entry of folded.values()) {
    if (entry.state.status === 'pending') out.push({ state: entry.state, lastSeq: entry.lastSeq });
  }
  return out;
}
