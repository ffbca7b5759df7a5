import { batonStreamNames, type NatsHandle } from '@baton/eventstore';
import {
  createBatonProjector,
  eventsStreamMark,
  noticesPublishedThrough,
  PROJECTION_DURABLE,
  RebuildAbortedError,
  RebuildIncompleteError,
  RedisFullError,
  ShadowLostError,
  type AnyFoldingProjection,
  type ProjectionStore,
  type RebuildProgress,
  type RebuildResult,
} from '@baton/projections';
import type { Command } from '../command';
import { flag, int, parseCommandArgs, str } from '../command';
import type { CliContext } from '../context';
import { CliError, CliErrorCode, CliWarningCode, ExitCode, natsReadFailure, UsageError } from '../errors';
import { printJson } from '../output';
import { formatCount, ProgressLine, progressIo } from '../progress';
import {
  compareWithStream,
  counted,
  differenceLines,
  eventSource,
  firstSeqAtOrAfter,
  interruptibleFromStart,
  INTERRUPTED,
  behindNote,
  movedNote,
  selectProjections,
  showProgress,
  splitAt,
  versionSkewed,
  versionSkewNote,
  type ShadowComparison,
  yieldCpuToServices,
} from '../rebuild';

/** One projection's outcome in `baton replay --json`. */
export type ReplayOutcome =
  | {
      projection: string;
      status: 'swapped';
      generation: number;
      previous: number | null;
      last_seq: number;
      /** Events replayed from `from_seq` on (all events without `--from-seq` / `--from-time`). */
      events: number;
      /** With `--from-seq` / `--from-time`: the first replayed sequence, and the events before it that seeded the shadow. */
      from_seq?: number;
      seeded?: number;
      dropped_keys: number;
      /** How long the rebuild (of every projection at once, over one read of the stream) took, and its rate. */
      seconds: number;
      events_per_s: number;
      /**
       * `notices` only, when Redis had lost it: the first event whose notice no notifier had
       * published (the notifier's consumer had not acknowledged it); `notices` was rebuilt to the one
       * before, and a running notifier publishes the notices from here as it applies them.
       */
      notices_from_seq?: number;
    }
  | { projection: string; status: 'lost'; generation: number; winner: number | null }
  | ({ status: 'dry_run' } & ShadowComparison);

/**
 * The error `baton replay` exits with when rebuilding `projection` threw. When Redis lost its data
 * mid-rebuild (`ShadowLostError`) nothing was swapped in and running the replay again is the fix.
 */
export function rebuildFailure(projection: string, error: unknown): CliError {
  if (error instanceof ShadowLostError) {
    return new CliError(
      `rebuilding ${projection} stopped: Redis lost its data during the rebuild (a flush or a failover), so its shadow generation ${error.generation} ` +
        `is gone or now another rebuild's; it was not swapped in. Run baton replay again (then baton verify).`,
      { cause: error },
    );
  }
  if (RedisFullError.of(error) !== null) {
    return new CliError(
      `rebuilding ${projection} stopped: Redis is full (its maxmemory reached under noeviction) and refused the new generation's writes; it was not swapped in. ` +
        `Make room or raise maxmemory (a rebuild needs room for the old generation and the new one: docs/sre.md, What fills Redis), then run baton replay again`,
      { cause: error, code: CliErrorCode.redisFull },
    );
  }
  return new CliError(`rebuilding ${projection} failed: ${(error as Error).message}`, { cause: error });
}

/**
 * The error `baton replay` exits with when some projections were swapped in and others failed:
 * it names both, so nobody rebuilds what is already live or takes a failed one for rebuilt.
 */
export function incompleteFailure(error: RebuildIncompleteError): CliError {
  const failed = Object.keys(error.failures);
  const reasons = Object.entries(error.failures).map(([name, cause]) => rebuildFailure(name, cause).message);
  return new CliError(
    `rebuilt ${Object.keys(error.settled).join(', ')}; ${failed.length === 1 ? 'failed' : 'these failed'}: ${reasons.join('; ')}. ` +
      `Rebuild ${failed.length === 1 ? 'it' : 'them'} again: ${failed.map((name) => `baton replay --projection ${name}`).join(', ')}`,
    {
      cause: error,
      // Every failure Redis being full: the command's failure is that, as for a rebuild of one.
      ...(Object.values(error.failures).every((cause) => RedisFullError.of(cause) !== null) ? { code: CliErrorCode.redisFull } : {}),
      details: {
        rebuilt: Object.keys(error.settled),
        failed: Object.fromEntries(Object.entries(error.failures).map(([name, cause]) => [name, cause instanceof Error ? cause.message : String(cause)])),
      },
    },
  );
}

/**
 * Refuse (`projection_version_mismatch`, nothing rebuilt) a replay of a projection whose live
 * generation was written by another version of its definition than this baton folds: the notifier
 * that applies it runs another release. Swapped in, this baton's version would meet that notifier's
 * live changes of the other version, and its next check would rebuild it back. A projection with no
 * live generation is rebuilt at any version.
 */
async function refuseVersionChange(store: ProjectionStore, projections: readonly AnyFoldingProjection[]): Promise<void> {
  const skewed = await versionSkew(store, projections);
  if (skewed.length === 0) return;
  const list = skewed.map((s) => `${s.projection} (live version ${s.live_version}, this baton's ${s.version})`).join(', ');
  throw new CliError(
    `not rebuilt: the live ${list} ${skewed.length === 1 ? 'was' : 'were'} written by another release of the notifier. ` +
      'A notifier rebuilds its projections to its own version at start: run the replay with the baton of the notifier`s release, ' +
      'or upgrade every notifier; --allow-version-change rebuilds anyway (only when no notifier of the other release is running)',
    { code: CliErrorCode.projectionVersionMismatch, details: { projections: skewed } },
  );
}

/** The projections whose live generation another version of their definition than this baton's wrote. */
async function versionSkew(
  store: ProjectionStore,
  projections: readonly AnyFoldingProjection[],
): Promise<Array<{ projection: string; version: number; live_version: number }>> {
  const skewed: Array<{ projection: string; version: number; live_version: number }> = [];
  for (const projection of projections) {
    const status = await store.status(projection);
    if (status.activeGeneration !== null && status.storedVersion !== null && status.storedVersion !== projection.version) {
      skewed.push({ projection: projection.name, version: projection.version, live_version: status.storedVersion });
    }
  }
  return skewed;
}

/**
 * `--allow-version-change` while a notifier applies the projections (the notifiers' projection
 * consumer has pull requests waiting: one is running): said (`notifier_running`), since a notifier
 * of the release that built them rebuilds them back at its next check — the rollback runbook stops
 * those notifiers first. Not a refusal: a notifier of this baton's own release may be the one
 * waiting (it stands back meanwhile and resumes after the swap).
 */
async function warnNotifierRunning(ctx: CliContext, store: ProjectionStore, projections: readonly AnyFoldingProjection[]): Promise<void> {
  const skewed = await versionSkew(store, projections);
  if (skewed.length === 0) return;
  const nats = await ctx.nats();
  const waiting = await nats.jsm.consumers.info(batonStreamNames(ctx.config().BATON_PREFIX).events, PROJECTION_DURABLE).then(
    (info) => info.num_waiting,
    () => 0,
  );
  if (waiting === 0) return;
  const list = skewed.map((s) => `${s.projection} (live version ${s.live_version}, this baton's ${s.version})`).join(', ');
  ctx.warn(
    CliWarningCode.notifierRunning,
    `a notifier is applying the projections now (its consumer has ${waiting} pull requests waiting) while this rebuilds ${list}: ` +
      'a notifier of the release that built them rebuilds them back at its next check — stop those notifiers first',
    undefined,
    { projections: skewed, waiting },
  );
}

export const replayCommand: Command = {
  name: 'replay',
  summary: 'rebuild projections from the events stream (shadow keyspace, atomic swap)',
  help: `Usage: baton replay [--projection name] [--from-seq N | --from-time ISO | --dry-run] [--json]

Rebuild Baton's Redis projections (inbox, stops, handoffs, runs, notices) by replaying
<PREFIX>_EVENTS into a fresh shadow generation and swapping it in atomically (compare-and-set),
while the notifier keeps applying live events and operators keep reading the old generation; the
old generation is deleted after the swap. Every projection is rebuilt from one read of the stream,
folded in memory in chunks and written with bulk commands (memory stays bounded on any stream).
Progress goes to stderr: on a terminal one line with events done / total, the rate and the time
left; otherwise a plain line every 10 % or 10 s; then a summary (none with --json: stderr then
holds JSON lines only, a failure's line with its warnings in details.warnings, or on success the
warnings' one line {"warnings":[…]}). Ctrl-C stops the rebuild between
two events, swaps nothing in and deletes its shadows: the live projections are untouched (exit 130);
the notifier's API shows a running rebuild (GET /v1/projections).

The notices projection is rebuilt only to where the notifiers had published notices (its live
generation's last sequence, or the notifier's projection consumer's ack floor when Redis lost it):
a notifier then publishes the notices of the events after it as it applies them (its line says
from which seq; notices_from_seq in --json).

Replaying from a point (--from-seq N, or --from-time T = the first sequence stored at or after T):
a projection is a fold, so a replay that starts at N is only meaningful on top of the state as of
N-1. The shadow is first seeded with exactly that state (events 1..N-1 are folded into it in
batches, said on the progress line), then events N.. are replayed (the progress bar), then the shadow
is swapped in. The live generation is never reused as the seed: it has applied events after N-1
too. The result is therefore always identical to a full replay; use it to see how far the
replay from N got and to time the part you care about (e.g. after fixing a projection bug that
affected events from N on).

Options:
  --projection <name>   only this projection (inbox, stops, handoffs, runs, notices)
  --from-seq <N>        replay from stream sequence N (the shadow is seeded with the state at N-1)
  --from-time <ISO>     replay from the first event stored at or after this time
  --dry-run             (not with --from-seq / --from-time) rebuild into a shadow, report the counts and the difference from the live
                        projection, then discard the shadow (nothing live changes); exit 1 when keys differ, 0 when a
                        rebuild would change nothing
  --allow-version-change  rebuild a projection whose live generation was written by another version of its
                        definition than this baton folds (refused without it: the notifier runs another
                        release, would keep applying its own version's changes to it and rebuild it back)
  --json                print the outcome of each projection as a JSON array
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      {
        projection: { type: 'string' },
        'from-seq': { type: 'string' },
        'from-time': { type: 'string' },
        'dry-run': { type: 'boolean' },
        'allow-version-change': { type: 'boolean' },
        json: { type: 'boolean' },
      },
      { min: 0, max: 0 },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const projections = selectProjections(str(args, 'projection'));
    const fromTime = str(args, 'from-time');
    let fromSeq = int(args, 'from-seq', { min: 1, max: Number.MAX_SAFE_INTEGER });
    if (fromSeq !== undefined && fromTime !== undefined) throw new UsageError('give --from-seq or --from-time, not both');
    if ((fromSeq !== undefined || fromTime !== undefined) && flag(args, 'dry-run')) {
      // A dry run rebuilds from the start and compares with the live projections; a starting point would be ignored.
      throw new UsageError('--dry-run rebuilds the whole stream to compare; it takes no --from-seq or --from-time');
    }
    const json = flag(args, 'json');
    const dryRun = flag(args, 'dry-run');
    yieldCpuToServices(ctx);
    const { interrupt, value } = await interruptibleFromStart(ctx, dryRun ? 'dry run' : 'rebuild', async () => {
      if (fromTime !== undefined) fromSeq = await firstSeqAtOrAfter(ctx, fromTime);
      const store = await ctx.projections();
      if (!dryRun && !flag(args, 'allow-version-change')) await refuseVersionChange(store, projections);
      else if (!dryRun) await warnNotifierRunning(ctx, store, projections);
      const read = await eventSource(ctx);
      // Past the end there is nothing to replay from: the "seeded to N-1" a replay would report would not exist.
      if (fromSeq !== undefined && fromSeq > read.lastSeq + 1)
        throw new UsageError(`--from-seq ${fromSeq} is past the end of the events stream (its last sequence is ${read.lastSeq})`);
      return { store, ...read };
    });
    const { store, source, total, lastSeq } = value;
    const names = projections.map((p) => p.name);
    const outcomes: ReplayOutcome[] = [];
    try {
      if (dryRun) {
        const line = new ProgressLine(progressIo(ctx), 'dry-run', total);
        let comparisons: ShadowComparison[];
        try {
          comparisons = await compareWithStream(store, projections, source, {
            bound: 'end',
            progress: line,
            signal: interrupt.signal,
            total,
            by: 'baton replay --dry-run',
          });
        } catch (error) {
          line.abandon();
          throw error;
        }
        line.finish(`${comparisons.reduce((n, c) => n + c.differing, 0)} keys differ from the live projections; nothing was changed`);
        for (const comparison of comparisons) {
          outcomes.push({ status: 'dry_run', ...comparison });
          if (json) continue;
          ctx.io.stdout.write(
            `${comparison.projection}: dry run folded ${comparison.events} events to seq ${comparison.rebuilt_seq} (${comparison.rebuilt_keys} keys); ` +
              `live has ${comparison.live_keys} keys at seq ${comparison.live_seq}; ${comparison.differing} keys differ\n`,
          );
          ctx.io.stdout.write(differenceLines(comparison.differences, 20, comparison.differing));
          if (comparison.differing > 0 && comparison.live_moved > 0) ctx.io.stdout.write(movedNote(comparison));
          else if (comparison.differing > 0 && comparison.rebuilt_seq > comparison.live_seq) ctx.io.stdout.write(behindNote(comparison));
          if (comparison.differing > 0 && versionSkewed(comparison)) ctx.io.stdout.write(versionSkewNote(comparison));
        }
        if (json) printJson(ctx.io, outcomes);
        // Like verify: a difference is exit 1 (a rebuild would change the live projections).
        return comparisons.some((c) => c.differing > 0) ? ExitCode.differ : ExitCode.ok;
      }

      // Every selected projection at once, over one read of the stream.
      let events = 0;
      let seeded = 0;
      const start = fromSeq;
      const line = new ProgressLine(progressIo(ctx), start !== undefined ? `replay from seq ${start}` : 'replay', total);
      const feed =
        start !== undefined
          ? splitAt(
              source,
              start,
              () => seeded++,
              () => events++,
            )
          : counted(source, () => events++);
      const projector = createBatonProjector({ store, projections });
      // A live projection that has applied more than the stream holds was built from an events
      // stream that is gone (recreated): the rebuild replaces it, not waits for it.
      const nats = await ctx.nats();
      const streamName = batonStreamNames(ctx.config().BATON_PREFIX).events;
      const replaced = start === undefined ? await projector.builtFromAnotherStream(() => eventsStreamMark(nats, streamName)) : [];
      const replaceAhead = replaced.length > 0;
      if (replaceAhead) {
        const text = `${replaced.join(', ')} were built from another events stream (it was recreated); replacing them`;
        ctx.warn('stream_recreated', text, `baton: ${text}\n`);
      }
      // `notices` lost from Redis: rebuilt only to what the notifiers had published, so that the
      // notices of the events after it — stored while Redis was lost — are still published, by the
      // notifier's live applier, instead of never. Not with a starting point: the SRE chose it.
      const noticesUntil =
        start === undefined ? await unpublishedNoticesBound(store, projections, nats, ctx.config().BATON_PREFIX, lastSeq, replaced.includes('notices')) : null;
      const began = Date.now();
      // Projections swap in at the end of different catch-up rounds: each is reported with the
      // events read up to its own last sequence (what the read had counted when that round began).
      const readAt = new Map<number, number>();
      const remembering = (show: (progress: RebuildProgress) => void) => (progress: RebuildProgress) => {
        readAt.set(progress.seq, progress.events);
        show(progress);
      };
      /** Events the shared read had passed on when it reached `seq` (the whole read when it ended there). */
      const readUpTo = (seq: number) => readAt.get(seq) ?? events + seeded;
      /** Say what each settled projection is now (stdout, or the outcomes of --json). */
      const report = async (results: Record<string, RebuildResult>) => {
        const seconds = (Date.now() - began) / 1000;
        for (const projection of projections) {
          const result = results[projection.name];
          if (result === undefined) continue;
          if (result.status === 'lost') {
            outcomes.push({ projection: projection.name, status: 'lost', generation: result.generation, winner: result.winner });
            // Another rebuild (the notifier's own, or a second SRE) swapped in first: the projection IS
            // rebuilt from the same stream, which is what this command was asked for.
            if (!json)
              ctx.io.stdout.write(
                `${projection.name}: another rebuild swapped in first (generation ${result.winner ?? '?'}); the projection is rebuilt, this run's shadow was discarded\n`,
              );
            continue;
          }
          const cleanup = await result.cleanup;
          // The events replayed for this projection: the read up to its last sequence, less the seed.
          const replayed = Math.max(0, readUpTo(result.lastSeq) - seeded);
          outcomes.push({
            projection: projection.name,
            status: 'swapped',
            generation: result.generation,
            previous: result.previous,
            last_seq: result.lastSeq,
            events: replayed,
            ...(start !== undefined ? { from_seq: start, seeded } : {}),
            dropped_keys: cleanup.deletedKeys,
            ...(result.handedOver ? { handed_over: { from_seq: result.handedOver.fromSeq, to_seq: result.handedOver.toSeq } } : {}),
            seconds: Math.round(seconds * 100) / 100,
            events_per_s: seconds > 0 ? Math.round((events + seeded) / seconds) : 0,
            ...(projection.name === 'notices' && noticesUntil !== null && result.lastSeq < lastSeq ? { notices_from_seq: result.lastSeq + 1 } : {}),
          });
          if (!json) {
            const from = start !== undefined ? ` (seeded with ${seeded} events to seq ${start - 1}, replayed from seq ${start})` : '';
            ctx.io.stdout.write(
              `${projection.name}: rebuilt generation ${result.generation} from ${replayed} events${from} (to seq ${result.lastSeq}); ` +
                `swapped out generation ${result.previous ?? '-'} (${cleanup.deletedKeys} keys deleted)` +
                (result.handedOver
                  ? `; live traffic kept it ahead, so it was handed over at seq ${result.handedOver.fromSeq - 1} and seq ${result.handedOver.fromSeq}..${result.handedOver.toSeq} applied after the swap`
                  : '') +
                (projection.name === 'notices' && noticesUntil !== null && result.lastSeq < lastSeq
                  ? noticesUntil.lost
                    ? `; Redis had lost it, so it stops where the notifiers had published notices: a notifier publishes the notices of seq ${result.lastSeq + 1} on as it applies them`
                    : `; no notifier has applied the events after seq ${result.lastSeq} (none ran since they were stored), so it stops there: a notifier publishes the notices of seq ${result.lastSeq + 1} on as it applies them`
                  : '') +
                '\n',
            );
          }
          if (cleanup.error) ctx.warn('cleanup_failed', `deleting generation ${cleanup.generation} of ${projection.name} failed: ${cleanup.error.message}`);
        }
      };
      let results: Record<string, RebuildResult>;
      try {
        results = await projector.rebuildAll(feed, {
          signal: interrupt.signal,
          onSwapping: interrupt.commit,
          onSwapped: interrupt.swapped,
          by: 'baton replay',
          targetSeq: lastSeq,
          ...(replaceAhead ? { replaceAhead } : {}),
          ...(noticesUntil !== null ? { untilSeq: { notices: noticesUntil.seq } } : {}),
          totalEvents: total,
          // A note once set stays on the line until replaced: the seeding note gives way to the replay's.
          onProgress: remembering(
            showProgress(line, (p) =>
              p.phase === 'catch_up'
                ? `catching up with the live projections, round ${p.round}`
                : start === undefined
                  ? undefined
                  : events === 0
                    ? `seeding the shadows with the ${formatCount(Math.min(start - 1, total))} events before seq ${start}`
                    : `replaying from seq ${start}`,
            ),
          ),
        });
      } catch (error) {
        line.abandon();
        // Some were swapped in before the others failed: say what is live now, then fail for the rest.
        if (error instanceof RebuildIncompleteError) {
          await report(error.settled);
          if (json) printJson(ctx.io, outcomes);
          throw incompleteFailure(error);
        }
        throw error;
      }
      line.finish(`${names.join(', ')} rebuilt`);
      await report(results);
      if (json) printJson(ctx.io, outcomes);
      // A projection another rebuild swapped in first ('lost') is rebuilt all the same: exit 0. Only a
      // rebuild that could not finish (Redis lost the shadow, the stream unreadable) exits 1, by throwing.
      return ExitCode.ok;
    } catch (error) {
      if (error instanceof RebuildAbortedError) {
        throw new CliError('interrupted; nothing was swapped in and the shadow generations were deleted: the live projections are as they were', {
          code: CliErrorCode.interrupted,
          exitCode: INTERRUPTED,
          cause: error,
        });
      }
      if (error instanceof CliError) throw error;
      // NATS or JetStream gone under the read: unavailable (exit 69), as when it cannot connect.
      throw (
        natsReadFailure(error, ctx.natsUrl(), `rebuilding ${names.join(', ')}`) ??
        rebuildFailure(error instanceof ShadowLostError ? error.projection : names.join(', '), error)
      );
    } finally {
      interrupt.dispose();
    }
  },
};

/**
 * Where `baton replay` rebuilds `notices` to: no further than the notifiers have published notices
 * — the live generation's last sequence, or the projection consumer's ack floor if higher (every
 * event up to it was applied, its notice published) —, so that the events no notifier has applied
 * yet (stored while none ran, or while Redis was lost: `lost`, no live generation) keep their
 * notices, which a notifier publishes as it applies them. A rebuild that finds a notifier moving
 * the live generation on follows it (the rebuilder raises the bound). Null — fold to the end as for
 * every other projection — when `notices` is not selected, nothing is unpublished, it was built
 * from another events stream (`replaced`: its sequences are another stream's) or, with no live
 * generation, no notifier ever ran here (a new deployment's history gets no notices).
 */
async function unpublishedNoticesBound(
  store: ProjectionStore,
  projections: readonly AnyFoldingProjection[],
  nats: Pick<NatsHandle, 'jsm'>,
  prefix: string,
  lastSeq: number,
  replaced: boolean,
): Promise<{ seq: number; lost: boolean } | null> {
  const notices = projections.find((p) => p.name === 'notices');
  if (notices === undefined || replaced) return null;
  const live = await store.status(notices);
  const through = await noticesPublishedThrough(nats, prefix);
  const lost = live.activeGeneration === null;
  const published = lost ? through : Math.max(live.lastSeq, through ?? 0);
  return published === null || published >= lastSeq ? null : { seq: published, lost };
}
