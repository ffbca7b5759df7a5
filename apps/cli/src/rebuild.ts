import { randomUUID } from 'node:crypto';
import { batonStreamNames, streamReader } from '@baton/eventstore';
import {
  FoldSession,
  batonProjections,
  diffSnapshots,
  jetStreamReplaySource,
  type AnyFoldingProjection,
  type ProjectionStore,
  type ReplaySource,
  type SnapshotDifference,
} from '@baton/projections';
import type { CliContext } from './context';
import { CliError, UsageError } from './errors';
import { Progress } from './output';

/** The projections a command works on: all of Baton's, or the one `--projection` names. */
export function selectProjections(name: string | undefined): AnyFoldingProjection[] {
  const all = batonProjections();
  if (name === undefined) return all;
  const found = all.filter((p) => p.name === name);
  if (found.length === 0) throw new UsageError(`unknown projection "${name}"; known: ${all.map((p) => p.name).join(', ')}`);
  return found;
}

/** The events stream as a replay source, and how many messages it holds now. */
export async function eventSource(ctx: CliContext): Promise<{ source: ReplaySource; total: number }> {
  const nats = await ctx.nats();
  const prefix = ctx.config().BATON_PREFIX;
  const stream = batonStreamNames(prefix).events;
  let total: number;
  try {
    total = (await nats.jsm.streams.info(stream)).state.messages;
  } catch (error) {
    throw new CliError(`cannot read stream ${stream}: ${(error as Error).message} (is BATON_PREFIX=${prefix} right?)`, { cause: error });
  }
  const source = jetStreamReplaySource({
    nats,
    prefix,
    registry: ctx.registry(),
    onUndecodable: (seq, subject, rejection) => ctx.io.stderr.write(`baton: skipped undecodable event #${seq} on ${subject}: ${rejection.message}\n`),
  });
  return { source, total };
}

/** Wrap a source so every event it yields is counted (progress). */
export function counted(source: ReplaySource, onEvent: () => void): ReplaySource {
  return (fromSeq) =>
    (async function* () {
      for await (const event of source(fromSeq)) {
        onEvent();
        yield event;
      }
    })();
}

/** Wrap a source so it stops after `maxSeq` (compare with a live projection that has applied up to it). */
export function upTo(source: ReplaySource, maxSeq: number): ReplaySource {
  return (fromSeq) =>
    (async function* () {
      for await (const event of source(fromSeq)) {
        if (event.seq > maxSeq) return;
        yield event;
      }
    })();
}

/** What folding the stream into a scratch generation found, compared with the live projection. */
export interface ShadowComparison {
  projection: string;
  /** Last sequence the live projection applied (0 when it has no active generation). */
  live_seq: number;
  live_generation: number | null;
  /** Last sequence folded into the scratch generation. */
  rebuilt_seq: number;
  /** Events the fold applied (events the projection does not handle count too). */
  events: number;
  /** Keys in the live projection and in the scratch one. */
  live_keys: number;
  rebuilt_keys: number;
  differences: SnapshotDifference[];
}

/**
 * Fold `source` into a fresh scratch generation of `projection` (never made active), snapshot it,
 * compare it with the live generation's snapshot, and drop the scratch generation whatever
 * happens. With `boundToLive`, only events up to the live projection's last applied sequence are
 * folded, so a live applier that is merely behind the stream is not reported as a difference.
 */
export async function foldAndCompare(
  store: ProjectionStore,
  projection: AnyFoldingProjection,
  source: ReplaySource,
  options: { boundToLive: boolean; progress?: Progress },
): Promise<ShadowComparison> {
  const live = await store.snapshot(projection.name);
  const session = new FoldSession(projection, 'rebuild', null);
  const generation = await store.allocateGeneration(projection.name);
  // The scratch generation is owned like a rebuild's shadow: if Redis loses its data meanwhile
  // and the number is handed out again, this fold stops (ShadowLostError) instead of mixing its
  // events into another's generation, and its clean-up leaves that generation alone.
  const owner = randomUUID();
  try {
    await store.applyBatch(session.definition, [], { generation, owner, create: true });
    let events = 0;
    let feed = counted(source, () => {
      events++;
      options.progress?.tick();
    });
    if (options.boundToLive) feed = upTo(feed, live.lastSeq);
    const applied = await store.applyBatch(session.definition, feed(1), { generation, owner });
    const rebuilt = await store.snapshot(projection.name, generation);
    return {
      projection: projection.name,
      live_seq: live.lastSeq,
      live_generation: live.generation,
      rebuilt_seq: Math.max(applied.lastSeq, rebuilt.lastSeq),
      events,
      live_keys: Object.keys(live.keys).length,
      rebuilt_keys: Object.keys(rebuilt.keys).length,
      differences: diffSnapshots(live, rebuilt),
    };
  } finally {
    options.progress?.finish();
    await store.dropGeneration(projection.name, generation, owner).catch(() => undefined);
  }
}

/** One line per difference: the key and both sides (clipped). */
export function differenceLines(differences: readonly SnapshotDifference[], max = 50): string {
  const show = (value: unknown) => {
    if (value === undefined) return '(absent)';
    const text = JSON.stringify(value);
    return text.length > 160 ? `${text.slice(0, 159)}…` : text;
  };
  const lines = differences.slice(0, max).map((d) => `  ${d.key}\n    live:    ${show(d.a)}\n    rebuilt: ${show(d.b)}\n`);
  if (differences.length > max) lines.push(`  … and ${differences.length - max} more\n`);
  return lines.join('');
}

/**
 * The first stream sequence of `<PREFIX>_EVENTS` stored at or after `iso` (the stream reader's
 * `firstSeqAtOrAfter`), or the stream's last sequence + 1 when nothing was stored since. Throws a
 * usage error for a time that does not parse.
 */
export async function firstSeqAtOrAfter(ctx: CliContext, iso: string): Promise<number> {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new UsageError(`--from-time must be an ISO-8601 time, got "${iso}"`);
  const nats = await ctx.nats();
  return streamReader(nats, batonStreamNames(ctx.config().BATON_PREFIX).events).firstSeqAtOrAfter(new Date(ms));
}

/**
 * Split a rebuild's feed at `fromSeq`: events before it only seed the shadow with the state the
 * projection had at `fromSeq - 1` (counted by `onSeed`), events from it on are the replay proper
 * (counted by `onReplay`). Every event still reaches the shadow, in order: a projection is a fold,
 * so the state at `fromSeq - 1` can only come from the events before it.
 */
export function splitAt(source: ReplaySource, fromSeq: number, onSeed: () => void, onReplay: () => void): ReplaySource {
  return (start) =>
    (async function* () {
      for await (const event of source(start)) {
        if (event.seq < fromSeq) onSeed();
        else onReplay();
        yield event;
      }
    })();
}
