import { isSubjectToken, type AggregateKind, type HandoffEvent } from '@baton/contracts';
import type { RunEvent } from '@baton/domain';
import { batonStreamNames, type StoredEvent } from '@baton/eventstore';
import { summarizeHandoffEvent, summarizeRunEvent, type TimelineEntry } from '@baton/projections';
import type { CliContext } from './context';
import { UsageError } from './errors';

/** An aggregate's history read straight from the events stream. */
export interface AggregateHistory {
  project: string;
  events: StoredEvent[];
  timeline: TimelineEntry[];
}

/**
 * Read every event of one aggregate from `<PREFIX>_EVENTS`, whatever the projections hold. The
 * project is found from the stream's subjects (`<prefix>.ev.*.<kind>.<id>`) unless given.
 * Resolves null when the aggregate has no events.
 */
export async function readHistory(ctx: CliContext, kind: AggregateKind, id: string, project?: string): Promise<AggregateHistory | null> {
  if (!isSubjectToken(id)) throw new UsageError(`"${id}" is not a valid ${kind} id`);
  const prefix = ctx.config().BATON_PREFIX;
  const nats = await ctx.nats();
  let resolved = project;
  if (resolved === undefined) {
    const info = await nats.jsm.streams.info(batonStreamNames(prefix).events, { subjects_filter: `${prefix}.ev.*.${kind}.${id}` });
    const subjects = Object.keys(info.state.subjects ?? {});
    if (subjects.length === 0) return null;
    if (subjects.length > 1) {
      const projects = subjects.map((s) => s.split('.')[s.split('.').length - 3]).join(', ');
      throw new UsageError(`${kind} ${id} exists in several projects (${projects}); pass --project`);
    }
    const tokens = subjects[0]!.split('.');
    resolved = tokens[tokens.length - 3]!;
  }
  const store = await ctx.eventStore();
  const { events } = await store.read({ project: resolved, kind, id });
  if (events.length === 0) return null;
  return { project: resolved, events, timeline: events.map((event) => timelineEntry(kind, event)) };
}

/** A timeline line for a stored event, worded as the projections word it. */
export function timelineEntry(kind: AggregateKind, event: StoredEvent): TimelineEntry {
  const domain = { type: event.type, data: event.payload };
  let summary: string;
  try {
    summary = kind === 'handoff' ? summarizeHandoffEvent(domain as HandoffEvent) : kind === 'run' ? summarizeRunEvent(domain as RunEvent) : event.type;
  } catch {
    summary = event.type;
  }
  return {
    seq: event.seq,
    event_id: event.id,
    type: event.type,
    occurred_at: event.occurredAt,
    actor: event.actor,
    origin: event.origin,
    summary,
  };
}

/**
 * The history as it stood at stream sequence `atSeq`: only the events with `seq <= atSeq` (a
 * point in the log, so views folded from it are the state "as of" that sequence). Throws a
 * usage error when the aggregate had no event yet at that sequence.
 */
export function historyAt(history: AggregateHistory, atSeq: number, what: string): AggregateHistory {
  const events = history.events.filter((event) => event.seq <= atSeq);
  if (events.length === 0) {
    throw new UsageError(`${what} had no events at seq ${atSeq} (its first event is at seq ${history.events[0]?.seq ?? '-'})`);
  }
  return { project: history.project, events, timeline: history.timeline.filter((entry) => entry.seq <= atSeq) };
}
