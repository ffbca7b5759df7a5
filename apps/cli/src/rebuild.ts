import { batonStreamNames, streamReader } from '@baton/eventstore';
import {
  batonProjections,
  jetStreamReplaySource,
  RebuildAbortedError,
  type AnyFoldingProjection,
  type FoldTarget,
  type ProjectionStore,
  type RebuildProgress,
  type ReplaySource,
  type SnapshotDifference,
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
    throw streamReadError(error, stream, prefix);
  }
  const source = jetStreamReplaySource({
    nats,
    prefix,
    registry: ctx.registry(),
    // Pulls of 1 000: fewer round trips on a long stream.
    batch: 1_000,
    onUndecodable: (seq, subject, rejection) => {
      const text = `skipped undecodable event #${seq} on ${subject}: ${rejection.message}`;
      ctx.warn(text, `baton: ${text}\n`);
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
  /** Last sequence the live projection applied (0 when it has no active generation). */
  live_seq: number;
  live_generation: number | null;
  /**
   * The projection has no live generation (never built, or `BATON_PROJECTION_PREFIX` names another
   * keyspace). `verify` folds nothing for it and counts it a difference when the stream holds events.
   */
  missing: boolean;
  /** Last sequence folded into the scratch generation. */
  rebuilt_seq: number;
  /** Events the fold read (events the projection does not handle count too). */
  events: number;
  /** Keys in the live projection and in the scratch one. */
  live_keys: number;
  rebuilt_keys: number;
  /** How many keys differ; `differences` lists the first 1 000 of them. */
  differing: number;
  differences: SnapshotDifference[];
  /**
   * Events the live projection applied while this comparison ran (its sequence then minus
   * `live_seq`; 0 when it stood still). When differences come with events applied meanwhile, some
   * of them may be those events, newer on the live side than the fold: compare again when traffic
   * to the projection is quieter.
   */
  live_moved: number;
  /**
   * The version of the projection's definition this baton folds, and the one the live generation
   * was written with (null when there is none). When they differ, the fold and the live generation
   * come from two releases: differences may be only that (see {@link versionSkewNote}).
   */
  version: number;
  live_version: number | null;
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

/** How many times `baton verify` compares when the live projections keep moving under it. */
const MAX_COMPARISONS = 3;

/**
 * Fold `source` into one scratch generation per projection (never made active; one read of the
 * stream for all, folded in memory chunk by chunk as a rebuild is), compare each with the live
 * generation key by key (holding neither in memory), and drop the scratch generations whatever
 * happens. With `bound: 'live'` each projection is folded only up to the sequence it has applied,
 * so a live applier that is merely behind is not a difference; if the live projections moved on
 * while a comparison found differences (events applied meanwhile), it is done again, up to three
 * times, so only differences that stay are reported.
 */
export async function compareWithStream(
  store: ProjectionStore,
  projections: readonly AnyFoldingProjection[],
  source: ReplaySource,
  options: CompareOptions,
): Promise<ShadowComparison[]> {
  let comparisons: ShadowComparison[] = [];
  for (let attempt = 1; attempt <= MAX_COMPARISONS; attempt++) {
    const live = new Map(await Promise.all(projections.map(async (p) => [p.name, await store.status(p)] as const)));
    // Verify compares what was built: a projection that has no live generation has nothing to fold to
    // (and a scratch generation would be written under a keyspace that may not be Baton's at all).
    const missing = projections.filter((p) => live.get(p.name)?.activeGeneration === null).map((p) => p.name);
    const toFold = options.bound === 'live' ? projections.filter((p) => !missing.includes(p.name)) : projections;
    const builds =
      toFold.length === 0
        ? []
        : await store.buildScratch(foldTargets(toFold), source, {
            ...(options.bound === 'live' ? { untilSeq: Object.fromEntries([...live].map(([name, status]) => [name, status.lastSeq])) } : {}),
            signal: options.signal,
            onProgress: showProgress(options.progress),
            by: options.by,
            totalEvents: options.total,
          });
    try {
      options.progress.update({ done: builds[0]?.events ?? 0, note: 'comparing with the live projections' });
      comparisons = [];
      if (options.bound === 'live')
        for (const name of missing)
          comparisons.push({
            projection: name,
            live_seq: 0,
            live_generation: null,
            missing: true,
            rebuilt_seq: 0,
            events: 0,
            live_keys: 0,
            rebuilt_keys: 0,
            differing: 0,
            differences: [],
            live_moved: 0,
            version: projections.find((p) => p.name === name)!.version,
            live_version: null,
          });
      for (const build of builds) {
        if (options.signal.aborted) throw new RebuildAbortedError(projections.map((p) => p.name));
        const status = live.get(build.projection);
        const compared = await store.compare(build.projection, status?.activeGeneration ?? null, build.generation);
        comparisons.push({
          projection: build.projection,
          live_seq: status?.lastSeq ?? 0,
          live_generation: status?.activeGeneration ?? null,
          missing: missing.includes(build.projection),
          rebuilt_seq: build.lastSeq,
          events: build.events,
          live_keys: compared.keysA,
          rebuilt_keys: compared.keysB,
          differing: compared.differing,
          differences: compared.differences,
          live_moved: 0,
          version: projections.find((p) => p.name === build.projection)!.version,
          live_version: status?.storedVersion ?? null,
        });
      }
    } finally {
      await Promise.all(builds.map((build) => build.drop().catch(() => undefined)));
    }
    // How far each live projection moved on while it was folded and compared.
    for (const c of comparisons) if (!c.missing) c.live_moved = Math.max(0, (await store.status({ name: c.projection, version: 0 })).lastSeq - c.live_seq);
    if (options.bound !== 'live' || comparisons.every((c) => c.differing === 0)) break;
    // Differences, and the live projections applied more events meanwhile: they may be events the
    // fold stopped short of; compare again against where the projections stand now.
    if (!comparisons.some((c) => c.differing > 0 && c.live_moved > 0)) break;
    // The last attempt's verdict stands: no "comparing again" that never comes, no count reset under the summary.
    if (attempt === MAX_COMPARISONS) break;
    options.progress.restart(`the live projections moved on; comparing again (attempt ${attempt + 1})`);
  }
  // A signal heard after the last comparison still stops the command: it reports no verdict.
  if (options.signal.aborted) throw new RebuildAbortedError(projections.map((p) => p.name));
  return comparisons;
}

/**
 * Said under the differences of a comparison during which the live projection applied more events:
 * some differences may be those events (the live side newer than the fold), not lasting ones.
 */
export function movedNote(comparison: Pick<ShadowComparison, 'projection' | 'live_moved' | 'live_seq'>): string {
  return (
    `  note: ${comparison.projection} applied ${comparison.live_moved} more events while it was compared (after seq ${comparison.live_seq}); ` +
    'differences on what they touched may be those events, not lasting ones: compare again when its traffic is quieter\n'
  );
}

/** One line per difference: the key and both sides (clipped). */
export function differenceLines(differences: readonly SnapshotDifference[], max = 50, total = differences.length): string {
  const show = (value: unknown, other?: unknown) => {
    if (value === undefined) return '(absent)';
    return clipAround(JSON.stringify(value), other === undefined ? undefined : JSON.stringify(other));
  };
  const lines = differences.slice(0, max).map((d) => {
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

/** The exit code of a command stopped by Ctrl-C (128 + SIGINT), as shells report it. */
export const INTERRUPTED = ExitCode.interrupted;

/**
 * Ctrl-C (SIGINT) or SIGTERM while a rebuild or a comparison runs: the first one aborts it (it
 * stops between two events, swaps nothing in and deletes what it built, so the live projections
 * are untouched); a second one exits at once. Once a rebuild has begun swapping its projections in
 * (`commit`, the rebuild's `onSwapping`), the first signal no longer stops it: it says so, and the
 * rebuild finishes. `dispose` restores the default handling.
 */
export function interruptible(ctx: CliContext, what: string): { signal: AbortSignal; commit: () => void; dispose: () => void } {
  const controller = new AbortController();
  let committed = false;
  let heard = false;
  const onSignal = (name: NodeJS.Signals) => {
    // Said to the person who pressed Ctrl-C; with --json kept as a warning (stderr holds JSON only).
    const say = (text: string) => ctx.warn(text, `\nbaton: ${text}\n`);
    if (heard) {
      const text = `${name} again: exiting now (a shadow generation may stay behind; the next rebuild deletes it)`;
      // The process ends here, not through `execute`: with --json this is the failure's one line.
      const warnings = ctx.warnings();
      if (ctx.json)
        ctx.io.stderr.write(
          `${JSON.stringify({ error: { code: CliErrorCode.interrupted, message: text, issues: [], ...(warnings.length > 0 ? { details: { warnings } } : {}) } })}\n`,
        );
      else say(text);
      process.exit(INTERRUPTED);
    }
    heard = true;
    if (committed) {
      say(`${name}: the ${what} is already swapping its projections in; it finishes (${name} again to exit at once)`);
      return;
    }
    say(`${name}: stopping the ${what}; the live projections are not touched (${name} again to exit at once)`);
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    signal: controller.signal,
    commit: () => {
      committed = true;
    },
    dispose: () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
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
