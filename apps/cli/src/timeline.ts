import { IdSchema, isSubjectToken, Limits, ProjectIdSchema, SubjectTable, type AggregateKind } from '@baton/contracts';
import { batonStreamNames, EventStoreErrorCode, isPermissionsViolation, StreamNotFound, type StoredEvent } from '@baton/eventstore';
import { createBatonViews, storedTimelineEntry, type BatonViews, type TimelineEntry } from '@baton/projections';
import type { CliContext } from './context';
import { CliError, CliErrorCode, CliWarningCode, streamReadError, UsageError } from './errors';

/** An aggregate's history read straight from the events stream. */
export interface AggregateHistory {
  project: string;
  events: StoredEvent[];
  timeline: TimelineEntry[];
}

/**
 * The projects whose events stream holds an aggregate of this kind and id (from the subjects
 * `<prefix>.ev.<project>.<kind>.<id>`), sorted: an id is unique only within its project.
 */
export async function streamProjects(ctx: CliContext, kind: AggregateKind, id: string): Promise<string[]> {
  if (!isSubjectToken(id)) throw new UsageError(`"${id}" is not a valid ${kind} id`);
  const prefix = ctx.config().BATON_PREFIX;
  const nats = await ctx.nats();
  const stream = batonStreamNames(prefix).events;
  const info = await nats.jsm.streams.info(stream, { subjects_filter: SubjectTable.event.format(prefix, { kind, id }) }).catch((error: unknown) => {
    // Credentials that may not read the stream (an agent's): said as such, not taken for "no such id".
    if (isPermissionsViolation(error)) throw streamReadError(error, stream, prefix, ctx.natsUrl());
    throw error;
  });
  const projects = Object.keys(info.state.subjects ?? {}).flatMap((subject) => {
    const event = SubjectTable.event.parse(prefix, subject);
    return event !== null && event.kind === kind && event.id === id ? [event.project] : [];
  });
  return [...new Set(projects)].sort();
}

/**
 * Read every event of one aggregate from `<PREFIX>_EVENTS`, whatever the projections hold. The
 * project is found from the stream's subjects (`<prefix>.ev.*.<kind>.<id>`) unless given; an id
 * several projects hold is a usage error naming them. Resolves null when the aggregate has no events.
 */
export async function readHistory(ctx: CliContext, kind: AggregateKind, id: string, project?: string): Promise<AggregateHistory | null> {
  if (!isSubjectToken(id)) throw new UsageError(`"${id}" is not a valid ${kind} id`);
  let resolved = project;
  if (resolved === undefined) {
    const projects = await streamProjects(ctx, kind, id);
    if (projects.length === 0) return null;
    if (projects.length > 1) throw ambiguousId(kind, id, projects);
    resolved = projects[0]!;
  }
  const store = await ctx.eventStore();
  const { events } = await store.read({ project: resolved, kind, id }).catch((error: unknown) => {
    // No events stream under this prefix: typed as streams, verify and dlq say it (not the store's own code).
    if (error instanceof StreamNotFound)
      throw streamReadError(error, batonStreamNames(ctx.config().BATON_PREFIX).events, ctx.config().BATON_PREFIX, ctx.natsUrl());
    throw error;
  });
  if (events.length === 0) return null;
  return { project: resolved, events, timeline: events.map((event) => storedTimelineEntry(kind, event)) };
}

/** A `--project` value, checked (a usage error when it is not a project key). */
export function projectArg(value: string): string {
  if (!ProjectIdSchema.safeParse(value).success) throw new UsageError(`--project "${value}" is not a project key (lowercase letters, digits, _ and -)`);
  return value;
}

/**
 * An id given on the command line (`--run`, a run argument, `--id`) for a message the command
 * publishes: malformed, it is a usage error (exit 2) before anything connects, as a malformed
 * project key is, not the contract's `schema_violation` of a message that was built.
 */
export function idArg(value: string, what: string): string {
  if (!IdSchema.safeParse(value).success) throw new UsageError(`${what} "${value}" is not an id (1 to ${Limits.maxIdLength} letters, digits and _ - : @)`);
  return value;
}

/**
 * The usage error of an id several projects hold: it names them and asks for --project. Typed
 * `ambiguous_id` with `details.projects`, as `answer` and `decide` report the API's 409, so a
 * script reads one code for one situation whichever command met it.
 */
export function ambiguousId(kind: string, id: string, projects: readonly string[]): UsageError {
  return new UsageError(`${kind} ${id} exists in projects ${projects.join(', ')}: pass --project <p> (one of ${projects.join(', ')})`, false, {
    code: 'ambiguous_id',
    details: { projects: [...projects] },
  });
}

/**
 * The projections' views for `baton run` / `baton handoff`, or null (with a warning, see
 * {@link CliContext.warn}) when Redis cannot be reached: those commands then fold the view from the events stream, as their
 * help promises, the way they fall back to the projection when NATS is the one down.
 */
export async function projectionViewsOrWarn(ctx: CliContext): Promise<BatonViews | null> {
  try {
    return createBatonViews(await ctx.projections());
  } catch (error) {
    if (!(error instanceof CliError) || error.code !== CliErrorCode.unavailable) throw error;
    ctx.warn(CliWarningCode.projectionsUnavailable, `cannot read the projections (${error.message}); folding the view from the events stream`);
    return null;
  }
}

/**
 * The project of a run or handoff id for `baton run` / `baton handoff`: `--project` when given,
 * else the one project the projections' id lookup and the events stream know for the id. Several
 * → a usage error naming them; none → null (not found). Either source may be unreachable; the
 * other then decides (both unreachable: the stream's error).
 */
export async function projectOf(
  ctx: CliContext,
  kind: 'run' | 'handoff',
  id: string,
  given: string | undefined,
  projected: () => Promise<string[]>,
): Promise<string | null> {
  if (!isSubjectToken(id)) throw new UsageError(`"${id}" is not a valid ${kind} id`);
  if (given !== undefined) return projectArg(given);
  const fromProjection = await projected().catch(() => null);
  const fromStream = await streamProjects(ctx, kind, id).catch((error: unknown) => {
    // A stream these credentials may not read tells nothing: the projection's answer alone would read as "not found".
    if (fromProjection === null || (error instanceof CliError && error.code === EventStoreErrorCode.permissionDenied)) throw error;
    return [];
  });
  const projects = [...new Set([...(fromProjection ?? []), ...fromStream])].sort();
  if (projects.length > 1) throw ambiguousId(kind, id, projects);
  return projects[0] ?? null;
}

/**
 * How a view folded with `--at <seq>` says what it is: the sequence asked for, and the record's
 * last event by then when that is earlier (a sequence past the record's last event, or past the
 * end of the stream, shows the record as it is now).
 */
export function foldedAtNote(atSeq: number, timeline: ReadonlyArray<{ seq: number }>): string {
  const last = timeline.at(-1)?.seq;
  return `folded from the events up to seq ${atSeq}${last !== undefined && last < atSeq ? ` (its last event by then: seq ${last})` : ''}`;
}

/**
 * The history as it stood at stream sequence `atSeq`: only the events with `seq <= atSeq` (a
 * point in the log, so views folded from it are the state "as of" that sequence). Throws a
 * usage error when the aggregate had no event yet at that sequence.
 */
export function historyAt(history: AggregateHistory, atSeq: number, what: string): AggregateHistory {
  const events = history.events.filter((event) => event.seq <= atSeq);
  if (events.length === 0) {
    // Not a usage error: the command was right, the record did not exist yet at that point of the log.
    const first = history.events[0]?.seq ?? null;
    throw new CliError(`${what} had no events at seq ${atSeq} (its first event is at seq ${first ?? '-'})`, {
      code: CliErrorCode.notFound,
      details: { at_seq: atSeq, first_seq: first },
    });
  }
  return { project: history.project, events, timeline: history.timeline.filter((entry) => entry.seq <= atSeq) };
}
