import { readdirSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { batonStreamNames, streamReader } from '@baton/eventstore';
import {
  batonProjections,
  jetStreamReplaySource,
  RebuildAbortedError,
  type AnyFoldingProjection,
  type FoldTarget,
  type FrozenLive,
  type NamespaceComparison,
  type ProjectionStatus,
  type ProjectionStore,
  type RebuildProgress,
  type ReplaySource,
  type ScratchBuild,
  type ScratchGeneration,
  type ScratchPass,
  type SnapshotDifference,
  type SnapshotValue,
} from '@baton/projections';
import type { CliContext } from './context';
import { CliError, CliErrorCode, ExitCode, streamReadError, UsageError } from './errors';
import type { ProgressLine } from './progress';

/** The projections a command works on: all of Baton's, or the one `--projection` names. */
export function selectProjections(name: string | undefined): AnyFoldingProjection[] {
  const all = batonProjections();
  if (name === undefined) return all;
  const found = all.filter((p) => p.name === name);
  if (found.length === 0) throw new UsageError(`unknown projection "${name}"; known: ${all.map((p) => p.name).join(', ')}`);
  return found;
}

/** The projections as the engine's rebuild folds them. */
export function foldTargets(projections: readonly AnyFoldingProjection[]): FoldTarget[] {
  return projections as unknown as FoldTarget[];
}

/** The events stream as a replay source, with how many messages it holds now and its last sequence. */
export async function eventSource(ctx: CliContext): Promise<{ source: ReplaySource; total: number; lastSeq: number }> {
  const nats = await ctx.nats();
  const prefix = ctx.config().BATON_PREFIX;
  const stream = batonStreamNames(prefix).events;
  let state: { messages: number; last_seq: number };
  try {
    state = (await nats.jsm.streams.info(stream)).state;
  } catch (error) {
    throw streamReadError(error, stream, prefix, ctx.natsUrl());
  }
  const source = jetStreamReplaySource({
    nats,
    prefix,
    registry: ctx.registry(),
    // Pulls of 1 000: fewer round trips on a long stream.
    batch: 1_000,
    onUndecodable: (seq, subject, rejection) => {
      const text = `skipped undecodable event #${seq} on ${subject}: ${rejection.message}`;
      ctx.warn('undecodable_event', text, `baton: ${text}\n`);
    },
  });
  return { source, total: state.messages, lastSeq: state.last_seq };
}

/** Wrap a source so every event it yields is counted. */
export function counted(source: ReplaySource, onEvent: () => void): ReplaySource {
  return (fromSeq) =>
    (async function* () {
      for await (const event of source(fromSeq)) {
        onEvent();
        yield event;
      }
    })();
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

/** Feed a rebuild's progress into a progress line. */
export function showProgress(line: ProgressLine, note?: (progress: RebuildProgress) => string | undefined): (progress: RebuildProgress) => void {
  return (progress) => {
    const extra = note?.(progress) ?? (progress.phase === 'catch_up' ? `catching up with the live projections, round ${progress.round}` : undefined);
    line.update({
      done: progress.events,
      ...(progress.totalEvents !== null ? { total: progress.totalEvents } : {}),
      ...(extra !== undefined ? { note: extra } : {}),
    });
  };
}

/** What folding the stream into a scratch generation found, compared with the live projection. */
export interface ShadowComparison {
  projection: string;
  /**
   * The sequence the (last) comparison was made at: the live projection had applied it, and the
   * fold reached it (0 when it has no active generation). Under live traffic `verify` catches up
   * with the live projection after its first comparison, so this is where the last catch-up round
   * brought it.
   */
  live_seq: number;
  live_generation: number | null;
  /**
   * The projection has no live generation (never built, or `BATON_PROJECTION_PREFIX` names another
   * keyspace). `verify` folds nothing for it and counts it a difference when the stream holds events.
   */
  missing: boolean;
  /** Last sequence folded into the scratch generation when it was compared. */
  rebuilt_seq: number;
  /** Events the fold read for this projection, over every pass (events it does not handle count too). */
  events: number;
  /** Keys in the live projection and in the scratch one. */
  live_keys: number;
  rebuilt_keys: number;
  /** How many keys differ; `differences` lists the first 1 000 of them. */
  differing: number;
  differences: SnapshotDifference[];
  /**
   * Events the live projection applied while the last comparison ran (its sequence then minus
   * `live_seq`; 0 when it stood still). See `unsettled` for which differences they may explain.
   */
  live_moved: number;
  /**
   * The catch-up rounds `verify` ran before the comparison reported here (0: the first comparison's
   * verdict stood, or a dry run): each folds the events the live projection applied meanwhile into
   * the same scratch generation and compares again the keys that can have changed. A last pass that
   * only tells lasting differences from newer events (it compares nothing) is not counted.
   */
  rounds: number;
  /**
   * How many of the differing keys may be only the `live_moved` events (newer on the live side than
   * the fold), not lasting differences: for `verify`, the keys those events wrote (a catch-up pass
   * folded them and named them); every other difference is lasting, as nothing applied since touched
   * its key. 0 when the live projection stood still; for a dry run every difference when it moved.
   */
  unsettled: number;
  /** The first 1 000 of those keys, sorted. */
  unsettled_keys: string[];
  /**
   * How many keys the last comparison read from a copy of the live projection taken at `live_seq`
   * (one atomic step with that sequence), not from the live keys themselves: `verify` under live
   * traffic freezes the keys that differed, brings the fold to the same sequence and compares the
   * two, so every difference it then reports is lasting, whatever the live projection applied
   * meanwhile (`live_moved` 0). 0: the live keys were compared as they were.
   */
  frozen_keys: number;
  /**
   * The version of the projection's definition this baton folds, and the one the live generation
   * was written with (null when there is none). When they differ, the fold and the live generation
   * come from two releases: differences may be only that (see {@link versionSkewNote}).
   */
  version: number;
  live_version: number | null;
  /**
   * Of the `frozen_keys`, the large sorted sets, sets and hashes (over `MEMBER_FREEZE_MIN` members on
   * the live side) were copied member by member: only the members that differed when both sides were
   * read. How many members were so copied and compared (0: every frozen key was copied whole). Such a
   * key's difference says how many of those members differ (`differing_members`) and shows only them.
   */
  frozen_members: number;
}

/** A comparison whose live generation was written by another version of the projection's definition than this baton's. */
export function versionSkewed(comparison: Pick<ShadowComparison, 'version' | 'live_version'>): boolean {
  return comparison.live_version !== null && comparison.live_version !== comparison.version;
}

/**
 * Said under a comparison whose live generation is of another definition version: the notifier
 * that wrote it runs another release than this baton. A notifier rebuilds a projection to its own
 * version at start, so the fix is a notifier on this release (or the baton of the notifier's).
 */
export function versionSkewNote(comparison: Pick<ShadowComparison, 'projection' | 'version' | 'live_version'>): string {
  return (
    `  note: the live ${comparison.projection} is version ${comparison.live_version}, this baton folds version ${comparison.version} ` +
    `(the notifier runs another release): differences may be only that. A notifier rebuilds its projections to its own version ` +
    `at start; compare with the baton of the notifier's release, or upgrade every notifier\n`
  );
}

export interface CompareOptions {
  /** `live`: fold each projection up to what it has applied (verify); `end`: the whole stream (dry run). */
  bound: 'live' | 'end';
  progress: ProgressLine;
  signal: AbortSignal;
  total: number;
  by: string;
}

/**
 * Catch-up rounds `baton verify` runs after its first comparison while the live projections keep
 * moving under it. Usually one: the keys that differed are copied from the live projection at one
 * sequence (atomically), the fold is brought to that sequence and the two compared, so the verdict
 * is exact whatever the live side applies meanwhile. When the differing keys are too many or too large to
 * copy at once, each round folds only the events applied since the comparison before and compares
 * only the keys that can have changed — the live side moves little during one; what still differs
 * after the last is either lasting or a key the live side wrote again meanwhile.
 */
export const MAX_CATCH_UP_ROUNDS = 10;

/** Most differing keys a comparison names for the next round to look at again; past them the next round compares everything. */
const MAX_NAMED_DIFFERENCES = 100_000;
/** Most `unsettled_keys` reported. */
const MAX_LISTED = 1_000;

/** One projection's comparison as the rounds go. */
interface Tracked {
  readonly def: AnyFoldingProjection;
  comparison: ShadowComparison;
  /** The keys that differed at its last comparison (null: more than could be named). */
  differing: string[] | null;
  /** The live projection's sequence the next comparison is made at (the fold is brought to it). */
  target: number;
  /** The live projection right after its last comparison. */
  after: ProjectionStatus;
  /** Its key counts came from a comparison of everything (false: of some keys; counted again at the end). */
  counted: boolean;
  /** Its verdict does not stand yet (it differed and the live projection moved on: the next pass catches up with it). */
  open: boolean;
  /** The differing keys copied from the live side at `seq` (the next pass folds to it; they are compared after it), or null. */
  frozen: Extract<FrozenLive, { status: 'frozen' }> | null;
}

/** A projection's comparison before anything was compared: no keys, no differences, no rounds. */
function comparisonOf(
  projection: string,
  version: number,
  where: Pick<ShadowComparison, 'live_seq' | 'live_generation' | 'missing' | 'rebuilt_seq' | 'events' | 'live_version'>,
): ShadowComparison {
  // In the order --json has always printed them.
  return {
    projection,
    live_seq: where.live_seq,
    live_generation: where.live_generation,
    missing: where.missing,
    rebuilt_seq: where.rebuilt_seq,
    events: where.events,
    live_keys: 0,
    rebuilt_keys: 0,
    differing: 0,
    differences: [],
    live_moved: 0,
    rounds: 0,
    unsettled: 0,
    unsettled_keys: [],
    frozen_keys: 0,
    version,
    live_version: where.live_version,
    frozen_members: 0,
  };
}

/**
 * Fold `source` into one scratch generation per projection (never made active; one read of the
 * stream for all, folded in memory chunk by chunk as a rebuild is), compare each with the live
 * generation key by key (holding neither in memory), and drop the scratch generations whatever
 * happens. With `bound: 'live'` each projection is folded only up to the sequence it has applied,
 * so a live applier that is merely behind is not a difference.
 *
 * When the live projection applied more events while a comparison found differences, the fold
 * does not start over: a catch-up pass folds into the same scratch generation the events the
 * live projection applied meanwhile (up to where it stands right after the comparison, never an
 * event twice), and only the keys that can have changed are compared again — the keys that
 * differed and the keys that pass wrote. A difference whose key none of those events wrote was
 * there at the comparison's sequence already: it is lasting, and once every difference is, or
 * the live projection stood still during a comparison, the verdict stands. Up to
 * {@link MAX_CATCH_UP_ROUNDS} rounds; after the last one, `unsettled` says which differences may
 * only be events applied during the last comparison. A live generation swapped in meanwhile (a
 * rebuild) is compared whole again.
 */
export async function compareWithStream(
  store: ProjectionStore,
  projections: readonly AnyFoldingProjection[],
  source: ReplaySource,
  options: CompareOptions,
): Promise<ShadowComparison[]> {
  const aborted = () => new RebuildAbortedError(projections.map((p) => p.name));
  const live = new Map(await Promise.all(projections.map(async (p) => [p.name, await store.status(p)] as const)));
  // Verify compares what was built: a projection that has no live generation has nothing to fold to
  // (and a scratch generation would be written under a keyspace that may not be Baton's at all).
  const missing = projections.filter((p) => live.get(p.name)?.activeGeneration === null).map((p) => p.name);
  const toFold = options.bound === 'live' ? projections.filter((p) => !missing.includes(p.name)) : projections;
  const comparisons: ShadowComparison[] = [];
  if (options.bound === 'live')
    for (const name of missing)
      comparisons.push(
        comparisonOf(name, projections.find((p) => p.name === name)!.version, {
          live_seq: 0,
          live_generation: null,
          missing: true,
          rebuilt_seq: 0,
          events: 0,
          live_version: null,
        }),
      );
  const tracked = new Map<string, Tracked>();
  /** Events the fold has read so far (every pass), for the progress line. */
  let read = 0;
  const show = showProgress(options.progress);

  /** The comparison stands; `unsettled`: the differing keys that may be newer events (null: any of them). */
  const settle = (track: Tracked, unsettled: readonly string[] | null) => {
    track.open = false;
    const c = track.comparison;
    const keys = unsettled ?? track.differing ?? c.differences.map((d) => d.key);
    c.unsettled = unsettled === null ? c.differing : unsettled.length;
    c.unsettled_keys = keys.slice(0, MAX_LISTED);
  };

  /**
   * Record a comparison of `track` with `build`, and read where the live projection stands right
   * after it. `frozen`: of that many keys copied at `track.target` (`members`: of them, that many
   * members copied from large keys), which nothing moved meanwhile.
   */
  const record = async (track: Tracked, build: ScratchGeneration, compared: NamespaceComparison, whole: boolean, round: number, frozen = 0, members = 0) => {
    track.after = await store.status(track.def);
    const c = track.comparison;
    Object.assign(c, {
      live_seq: track.target,
      rebuilt_seq: build.lastSeq,
      events: build.events,
      differing: compared.differing,
      differences: compared.differences,
      live_moved: frozen > 0 ? 0 : Math.max(0, track.after.lastSeq - track.target),
      rounds: round,
      frozen_keys: frozen,
      frozen_members: members,
      ...(whole ? { live_keys: compared.keysA, rebuilt_keys: compared.keysB } : {}),
    } satisfies Partial<ShadowComparison>);
    track.differing = compared.differingKeys ?? null;
    track.counted = whole;
  };

  /** After a pass: compare, then say how far to catch up (null: every verdict stands). */
  const afterPass = async (pass: ScratchPass): Promise<Record<string, number> | null> => {
    if (pass.round === 0) {
      options.progress.update({ done: read, note: 'comparing with the live projections' });
      for (const build of pass.builds) {
        if (options.signal.aborted) throw aborted();
        const def = projections.find((p) => p.name === build.projection)!;
        const status = live.get(build.projection)!;
        const track: Tracked = {
          def,
          comparison: comparisonOf(build.projection, def.version, {
            live_seq: status.lastSeq,
            live_generation: status.activeGeneration,
            missing: missing.includes(build.projection),
            rebuilt_seq: build.lastSeq,
            events: build.events,
            live_version: status.storedVersion,
          }),
          differing: null,
          target: status.lastSeq,
          after: status,
          counted: true,
          open: true,
          frozen: null,
        };
        tracked.set(build.projection, track);
        const compared = await store.compare(build.projection, status.activeGeneration, build.generation, { collectKeys: MAX_NAMED_DIFFERENCES });
        await record(track, build, compared, true, 0);
        // A dry run folds the whole stream: it has nothing to catch up with, and cannot tell which
        // differences the live projection's newer events explain.
        if (options.bound !== 'live') settle(track, track.comparison.live_moved > 0 ? null : []);
      }
    } else {
      let said = false;
      for (const track of [...tracked.values()].filter((t) => t.open)) {
        if (options.signal.aborted) throw aborted();
        const c = track.comparison;
        const build = pass.builds.find((b) => b.projection === c.projection)!;
        if (track.frozen !== null) {
          // The pass brought the fold to the sequence the copies were taken at: an exact comparison.
          const { frozen } = track;
          track.frozen = null;
          if (!said) options.progress.update({ done: read, note: `comparing the differing keys at one sequence (round ${pass.round})` });
          said = true;
          c.live_generation = frozen.generation;
          const compared = await store.compareFrozen(c.projection, build.generation, frozen.keys, {
            collectKeys: MAX_NAMED_DIFFERENCES,
            members: frozen.members,
          });
          const members = [...frozen.members.values()].reduce((sum, key) => sum + key.members.length, 0);
          await record(track, build, compared, false, pass.round, frozen.keys.length, members);
          c.live_version = track.after.activeGeneration === frozen.generation ? track.after.storedVersion : c.live_version;
          settle(track, []);
          continue;
        }
        const written = pass.written.get(c.projection) ?? null;
        const sameGeneration = track.after.activeGeneration === c.live_generation;
        // The pass folded the events the live projection applied since the comparison (after
        // live_seq) and wrote the keys `written`: a difference on any other key is not theirs.
        const unsettled = sameGeneration && written !== null && track.differing !== null ? track.differing.filter((key) => written.has(key)) : null;
        if (unsettled !== null && unsettled.length === 0) {
          settle(track, []);
          continue;
        }
        // No comparison after the last pass: the one before stands, and says what may be newer events.
        if (pass.last) {
          settle(track, unsettled);
          continue;
        }
        if (!said) options.progress.update({ done: read, note: `comparing the keys that can have changed (round ${pass.round})` });
        said = true;
        c.live_generation = track.after.activeGeneration;
        c.live_version = track.after.storedVersion;
        // Only what can have changed, unless the live generation is another one now (a rebuild
        // swapped in) or too many keys changed to name.
        const whole = unsettled === null;
        const compared = whole
          ? await store.compare(c.projection, c.live_generation, build.generation, { collectKeys: MAX_NAMED_DIFFERENCES })
          : await store.compareKeys(c.projection, c.live_generation, build.generation, new Set([...track.differing!, ...written!]), {
              collectKeys: MAX_NAMED_DIFFERENCES,
            });
        await record(track, build, compared, whole, pass.round);
      }
    }
    if (options.bound !== 'live') return null;
    // Which projections to catch up with: those that differ while their live projection moved on.
    const next: Record<string, number> = {};
    for (const track of tracked.values()) {
      if (!track.open) continue;
      const c = track.comparison;
      const generation = track.after.activeGeneration;
      if (c.differing === 0 || (generation === c.live_generation && track.after.lastSeq <= c.live_seq)) {
        settle(track, []);
        continue;
      }
      if (pass.last) {
        settle(track, null);
        continue;
      }
      if (track.differing !== null) {
        // Hold the differing keys still at one sequence, and bring the fold to it.
        const build = pass.builds.find((b) => b.projection === c.projection)!;
        const frozen = await pass.freeze(c.projection, track.differing);
        if (frozen.status === 'frozen' && frozen.seq >= build.lastSeq) {
          track.frozen = frozen;
          next[c.projection] = track.target = frozen.seq;
          continue;
        }
        // A generation swapped in behind the fold (a rebuild handed over behind the live one), or
        // none any more: no comparison can be made at one sequence; what differs may be anything.
        if (frozen.status !== 'too_large') {
          settle(track, null);
          continue;
        }
      }
      if (generation === null || track.after.lastSeq < c.live_seq) settle(track, null);
      else next[c.projection] = track.target = track.after.lastSeq;
    }
    return Object.keys(next).length > 0 ? next : null;
  };

  let builds: ScratchBuild[] = [];
  if (toFold.length > 0) {
    builds = await store.buildScratch(foldTargets(toFold), source, {
      ...(options.bound === 'live' ? { untilSeq: Object.fromEntries([...live].map(([name, status]) => [name, status.lastSeq])) } : {}),
      maxCatchUpRounds: MAX_CATCH_UP_ROUNDS,
      afterPass,
      signal: options.signal,
      onProgress: (progress) => {
        read = progress.events;
        show(progress);
      },
      by: options.by,
      totalEvents: options.total,
    });
  }
  try {
    // A comparison of some keys counted only those: count both sides whole once (names only).
    for (const build of builds) {
      const track = tracked.get(build.projection)!;
      if (track.counted) continue;
      if (options.signal.aborted) throw aborted();
      const c = track.comparison;
      const [rebuiltKeys, liveKeys] = await store.countKeys(
        c.projection,
        c.live_generation === null ? [build.generation] : [build.generation, c.live_generation],
      );
      c.rebuilt_keys = rebuiltKeys ?? 0;
      c.live_keys = liveKeys ?? 0;
    }
  } finally {
    await Promise.all(builds.map((build) => build.drop().catch(() => undefined)));
  }
  // A signal heard after the last comparison still stops the command: it reports no verdict.
  if (options.signal.aborted) throw aborted();
  return [...comparisons, ...toFold.map((p) => tracked.get(p.name)!.comparison)];
}

/**
 * Said under the differences of a comparison during which the live projection applied more events:
 * which differences may be those events (the live side newer than the fold), and that the others
 * are lasting.
 */
export function movedNote(comparison: Pick<ShadowComparison, 'projection' | 'live_moved' | 'live_seq' | 'unsettled' | 'unsettled_keys'>): string {
  const moved = `  note: ${comparison.projection} applied ${comparison.live_moved} more events while it was compared (after seq ${comparison.live_seq})`;
  if (comparison.unsettled === 0) return `${moved}, none of them to a differing key: these differences are lasting\n`;
  const named = comparison.unsettled_keys.slice(0, 5);
  const more = comparison.unsettled > named.length ? `, … and ${comparison.unsettled - named.length} more` : '';
  return (
    `${moved}; ${comparison.unsettled} of the differing keys (${named.join(', ')}${more}) may be those events, not lasting ones: ` +
    'compare again when its traffic is quieter\n'
  );
}

/**
 * Said under a dry run's differences when its fold went past what the live projection had applied
 * (a dry run folds the whole stream): the keys the later events write differ because the live side
 * is behind, not because it is wrong.
 */
export function behindNote(comparison: Pick<ShadowComparison, 'projection' | 'live_seq' | 'rebuilt_seq'>): string {
  return (
    `  note: the dry run folded to seq ${comparison.rebuilt_seq}, ${comparison.projection} had applied to seq ${comparison.live_seq}: ` +
    'a difference on a key the events after it write is the live projection behind, not a lasting one; baton verify compares each projection at the sequence it has applied\n'
  );
}

/**
 * Said under the differences of a comparison with copies of the live keys taken at one sequence
 * (`frozen_keys`): what the live projection applied meanwhile cannot explain them.
 */
export function frozenNote(comparison: Pick<ShadowComparison, 'live_seq' | 'frozen_keys' | 'frozen_members'>): string {
  const members = comparison.frozen_members > 0 ? ` (of the large ones, the ${comparison.frozen_members} members that had differed)` : '';
  return `  note: compared at seq ${comparison.live_seq} with the ${comparison.frozen_keys} live keys that had differed${members}, copied as they stood then (the live projection kept applying events): these differences are lasting\n`;
}

/** Members shown per key compared member by member (`differing_members`). */
const SHOWN_MEMBERS = 10;

/**
 * The lines of a key compared member by member: one per differing member (the first
 * {@link SHOWN_MEMBERS}), with its score or value on each side, or `(absent)`.
 */
function memberLines(d: SnapshotDifference & { differing_members: number }): string {
  const sideOf = (value: SnapshotValue | undefined): Map<string, unknown> => {
    if (value?.type === 'zset') return new Map(value.value);
    if (value?.type === 'hash') return new Map(Object.entries(value.value));
    if (value?.type === 'set') return new Map(value.value.map((member) => [member, 'present']));
    return new Map();
  };
  const [live, rebuilt] = [sideOf(d.a), sideOf(d.b)];
  const type = d.a?.type ?? d.b?.type ?? 'key';
  const shown = [...new Set([...live.keys(), ...rebuilt.keys()])].sort().slice(0, SHOWN_MEMBERS);
  const show = (value: unknown, other: unknown) => {
    if (value === undefined) return '(absent)';
    if (value === 'present' && type === 'set') return 'present';
    return clipAround(JSON.stringify(value), other === undefined ? undefined : JSON.stringify(other), 100);
  };
  const what = type === 'hash' ? 'field' : 'member';
  const one = d.differing_members === 1;
  const lines = [`  ${d.key} (${type} compared ${what} by ${what}; ${d.differing_members} ${what}${one ? ' differs' : 's differ'})\n`];
  for (const member of shown) {
    const [l, r] = [live.get(member), rebuilt.get(member)];
    lines.push(`    ${clipAround(JSON.stringify(member), undefined, 100)}: live ${show(l, r)}, rebuilt ${show(r, l)}\n`);
  }
  if (d.differing_members > shown.length) lines.push(`    … and ${d.differing_members - shown.length} more ${what}s\n`);
  return lines.join('');
}

/** One line per difference: the key and both sides (clipped). */
export function differenceLines(differences: readonly SnapshotDifference[], max = 50, total = differences.length): string {
  const show = (value: unknown, other?: unknown) => {
    if (value === undefined) return '(absent)';
    return clipAround(JSON.stringify(value), other === undefined ? undefined : JSON.stringify(other));
  };
  const lines = differences.slice(0, max).map((d) => {
    // A large key compared member by member: the members that differ, one by one.
    if (d.differing_members !== undefined) return memberLines({ ...d, differing_members: d.differing_members });
    // Two versions of one hash (an inbox item...): only the fields that differ, so they are not clipped away.
    if (d.a?.type === 'hash' && d.b?.type === 'hash') {
      const left = d.a.value;
      const right = d.b.value;
      const fields = [...new Set([...Object.keys(left), ...Object.keys(right)])].filter((f) => left[f] !== right[f]).sort();
      const pick = (hash: Record<string, string>) => Object.fromEntries(fields.filter((f) => f in hash).map((f) => [f, hash[f]]));
      return `  ${d.key} (hash; the fields that differ)\n    live:    ${show(pick(left), pick(right))}\n    rebuilt: ${show(pick(right), pick(left))}\n`;
    }
    return `  ${d.key}\n    live:    ${show(d.a, d.b)}\n    rebuilt: ${show(d.b, d.a)}\n`;
  });
  if (total > max) lines.push(`  … and ${total - max} more\n`);
  return lines.join('');
}

/**
 * `text` cut to at most `width` characters; when it is longer and `other` (the other side of the
 * difference) is given, the cut window starts a little before the first character where the two
 * differ, so both sides show what differs rather than the same leading characters.
 */
export function clipAround(text: string, other?: string, width = 160): string {
  if (text.length <= width) return text;
  let first = 0;
  if (other !== undefined) while (first < text.length && first < other.length && text[first] === other[first]) first++;
  const start = first > width / 2 ? first - 40 : 0;
  const body = text.slice(start, start + width - (start > 0 ? 2 : 1));
  return `${start > 0 ? '…' : ''}${body}${start + body.length < text.length ? '…' : ''}`;
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
  const name = batonStreamNames(ctx.config().BATON_PREFIX).events;
  // A time after the last event stored names no event, as a --from-seq past the end names none.
  const state = (await nats.jsm.streams.info(name)).state;
  const lastAt = state.messages > 0 ? Date.parse(state.last_ts) : Number.NaN;
  if (!Number.isNaN(lastAt) && ms > lastAt) {
    throw new UsageError(`--from-time ${iso} is after the last event stored (seq ${state.last_seq}, at ${state.last_ts})`, false);
  }
  return streamReader(nats, name).firstSeqAtOrAfter(new Date(ms));
}

/**
 * Lower this process's CPU priority to `BATON_REBUILD_NICE` (10 for `baton` unless set) before a rebuild or a
 * verification: they fold and write as fast as the machine lets them, and on a machine the live
 * services share (measured on 2 cores: a verify under traffic had the services' NATS publishes
 * time out for minutes) they should take what the services leave. Idle CPU is still all theirs.
 * Never raises the priority (a process started under `nice -n 19` stays there); a system that
 * refuses is said as a warning, and the command goes on.
 */
export function yieldCpuToServices(ctx: CliContext): void {
  const nice = ctx.config().BATON_REBUILD_NICE;
  if (nice === undefined) return;
  try {
    // On Linux a priority is a thread's: the process's other threads (V8's and libuv's, started
    // before this) are lowered one by one; threads started later inherit the main thread's.
    for (const thread of processThreads()) if (nice > getPriority(thread)) setPriority(thread, nice);
  } catch (error) {
    ctx.warn('nice_refused', `could not lower the CPU priority to nice ${nice} (BATON_REBUILD_NICE): ${(error as Error).message}`);
  }
}

/** This process's threads (`/proc/self/task` on Linux), the main thread first; elsewhere the process alone (0). */
function processThreads(): number[] {
  let tasks: number[];
  try {
    tasks = readdirSync('/proc/self/task')
      .map(Number)
      .filter((tid) => Number.isInteger(tid) && tid > 0);
  } catch {
    return [0];
  }
  return [0, ...tasks.filter((tid) => tid !== process.pid)];
}

/** The exit code of a command stopped by Ctrl-C (128 + SIGINT), as shells report it. */
export const INTERRUPTED = ExitCode.interrupted;

/**
 * Ctrl-C (SIGINT), SIGTERM or a hang-up (SIGHUP: the terminal or the SSH session went away) while
 * a rebuild or a comparison runs: the first one aborts it (it stops between two events, swaps
 * nothing in and deletes what it built, so the live projections are untouched); a second SIGINT or
 * SIGTERM exits at once. A hang-up is never that second signal: nobody is left to press anything,
 * and a closing session may send it twice (the kernel to the foreground group, then the shell to
 * its jobs), so further SIGHUPs are ignored and the abort finishes its clean-up. Once a rebuild has
 * begun swapping its projections in (`commit`, the rebuild's `onSwapping`), the first signal no
 * longer stops it: it says so, and the rebuild finishes. `dispose` restores the default handling.
 * (What is said after a hang-up goes nowhere: writes to a hung-up terminal fail with EIO, which
 * {@link processIo} drops quietly.)
 */
export function interruptible(
  ctx: CliContext,
  what: string,
): { signal: AbortSignal; commit: () => void; swapped: (projection: string) => void; dispose: () => void } {
  const controller = new AbortController();
  let committed = false;
  /** The projections swapped in so far, once the swaps began: what a second signal leaves live. */
  const swappedIn: string[] = [];
  let heard = false;
  let hungUp = false;
  const onSignal = (name: NodeJS.Signals) => {
    // Said to the person who pressed Ctrl-C; with --json kept as a warning (stderr holds JSON only).
    const say = (text: string) => ctx.warn('signal', text, `\nbaton: ${text}\n`);
    if (name === 'SIGHUP') {
      if (hungUp) return;
      hungUp = true;
      if (heard) return;
    } else if (heard) {
      // During the swaps some projections may be live already (each swap is whole): say which.
      const text = committed
        ? `${name} again: exiting now, during the swap: swapped in ${swappedIn.length > 0 ? swappedIn.join(', ') : 'none yet'}, the others not (each projection is whole; run baton verify, then baton replay for those not swapped in; a shadow generation may stay behind, the next rebuild deletes it)`
        : `${name} again: exiting now (a shadow generation may stay behind; the next rebuild deletes it)`;
      // The process ends here, not through `execute`: with --json this is the failure's one line.
      const warnings = ctx.warnings();
      const details = { ...(committed ? { swapped: [...swappedIn] } : {}), ...(warnings.length > 0 ? { warnings } : {}) };
      if (ctx.json)
        ctx.io.stderr.write(
          `${JSON.stringify({ error: { code: CliErrorCode.interrupted, message: text, issues: [], ...(Object.keys(details).length > 0 ? { details } : {}) } })}\n`,
        );
      else say(text);
      process.exit(INTERRUPTED);
    }
    heard = true;
    // A second SIGHUP (a closing session may send two) does not cut the clean-up short: only these do.
    const atOnce = name === 'SIGHUP' ? 'SIGINT or SIGTERM' : `${name} again`;
    if (committed) {
      say(`${name}: the ${what} is already swapping its projections in; it finishes (${atOnce} to exit at once)`);
      return;
    }
    say(`${name}: stopping the ${what}; the live projections are not touched (${atOnce} to exit at once)`);
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('SIGHUP', onSignal);
  return {
    signal: controller.signal,
    commit: () => {
      committed = true;
    },
    swapped: (projection) => {
      swappedIn.push(projection);
    },
    dispose: () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      process.off('SIGHUP', onSignal);
    },
  };
}

/**
 * {@link interruptible} from the command's first step: Ctrl-C while it connects and reads what it
 * needs (which takes seconds on a busy deployment) is heard too, and stops it before the `what`
 * begins — said, typed `interrupted`, exit 130 — instead of the process dying silently. Returns
 * the handle (the caller disposes of it) and what `setUp` gave.
 */
export async function interruptibleFromStart<T>(
  ctx: CliContext,
  what: string,
  setUp: () => Promise<T>,
): Promise<{ interrupt: ReturnType<typeof interruptible>; value: T }> {
  const interrupt = interruptible(ctx, what);
  let value: T;
  try {
    value = await setUp();
  } catch (error) {
    interrupt.dispose();
    throw error;
  }
  if (interrupt.signal.aborted) {
    interrupt.dispose();
    throw new CliError(`interrupted before the ${what} began; nothing was changed`, { code: CliErrorCode.interrupted, exitCode: INTERRUPTED });
  }
  return { interrupt, value };
}
