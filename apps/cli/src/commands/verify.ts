import { RebuildAbortedError } from '@baton/projections';
import type { Command } from '../command';
import { flag, parseCommandArgs, str } from '../command';
import { CliError, CliErrorCode, ExitCode, natsReadFailure } from '../errors';
import { printJson } from '../output';
import { ProgressLine, progressIo } from '../progress';
import {
  compareWithStream,
  differenceLines,
  eventSource,
  frozenNote,
  interruptibleFromStart,
  INTERRUPTED,
  MAX_CATCH_UP_ROUNDS,
  movedNote,
  selectProjections,
  versionSkewed,
  versionSkewNote,
  type ShadowComparison,
  yieldCpuToServices,
} from '../rebuild';

/** What `baton verify --json` prints. */
export interface VerifyReport {
  ok: boolean;
  projections: ShadowComparison[];
}

export const verifyCommand: Command = {
  name: 'verify',
  summary: 'check that the live projections equal a fold of the streams (exit 1 on any difference)',
  help: `Usage: baton verify [--projection name] [--json]

Fold <PREFIX>_EVENTS, each projection up to the sequence it has applied, into scratch generations
(one read of the stream for all of them, folded in memory in chunks as a rebuild is); compare each
with the live one key by key (neither is held in memory); print every difference (the first 50 per
projection; --json lists up to 1 000 and counts all); drop the scratch generations. Nothing live
changes. When a live projection applied more events during a comparison that found differences,
verify catches up with it instead of starting over: it copies the keys that differed from the live
projection together with the sequence it has applied (one atomic step), folds only the events up to
that sequence into the same scratch generation, and compares the two (rounds: 1, frozen_keys): the
verdict is exact whatever the live projection applies meanwhile, and every difference is lasting.
A sorted set, set or hash of over 1 000 members (a project's whole-inbox and notice index sets) is
copied member by member: only the members that differed when both sides were read just before
(frozen_members; its difference counts them in differing_members and shows only them). When those
keys or members are too many to copy at once (over 10 000 keys or 50 000 elements), each round
compares the live keys themselves again: the keys that differed or that the
folded events wrote (up to ${MAX_CATCH_UP_ROUNDS} catch-up rounds). A difference whose key none of those events
wrote is lasting; the verdict stands once every difference is, or once the live projection stood
still during a comparison. When it kept moving through the last round, each projection says how
many events it applied during the last comparison (live_moved) and which differing keys they wrote
(unsettled, unsettled_keys, and a note): those may be them, not lasting ones. When a live generation was
written by another version of the projection's definition than this baton folds (the notifier
runs another release: version and live_version), a note says so: differences may be only that.
A projection with no live generation (never built, or BATON_PROJECTION_PREFIX names another
keyspace) is not folded and counts as a difference when the stream holds events (missing: true).
Progress goes to stderr (events done / total, rate, time left; none with --json); Ctrl-C stops it
(exit 130). Exit 0 when every projection matches, 1 when any key differs or a projection is
missing (repair with \`baton replay\`); 69, no verdict, when NATS, JetStream or Redis stopped
answering (unavailable, jetstream_unavailable). With several servers in NATS_URL, a node that goes
under the read is left for another and the read goes on where it was.

Options:
  --projection <name>   only this projection (inbox, stops, handoffs, runs, notices)
  --json                print { ok, projections: [{ projection, live_seq, missing, differing, differences, live_moved, unsettled, frozen_keys, frozen_members, ... }] }
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { projection: { type: 'string' }, json: { type: 'boolean' } }, { min: 0, max: 0 });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const projections = selectProjections(str(args, 'projection'));
    const json = flag(args, 'json');
    yieldCpuToServices(ctx);
    const { interrupt, value } = await interruptibleFromStart(ctx, 'verification', async () => ({
      store: await ctx.projections(),
      ...(await eventSource(ctx)),
    }));
    const { store, source, total } = value;
    const line = new ProgressLine(progressIo(ctx), 'verify', total);
    let comparisons: ShadowComparison[];
    try {
      comparisons = await compareWithStream(store, projections, source, { bound: 'live', progress: line, signal: interrupt.signal, total, by: 'baton verify' });
    } catch (error) {
      line.abandon();
      if (error instanceof RebuildAbortedError) {
        throw new CliError('interrupted; the scratch generations were deleted, nothing live was touched', {
          code: CliErrorCode.interrupted,
          exitCode: INTERRUPTED,
          cause: error,
        });
      }
      // NATS or JetStream gone under the read (every node of NATS_URL, or JetStream's leader): no verdict, exit 69, never "differ".
      throw natsReadFailure(error, ctx.natsUrl(), 'verify') ?? error;
    } finally {
      interrupt.dispose();
    }
    // A projection that was never built matches nothing the stream holds (an empty stream excepted).
    const absent = comparisons.filter((c) => c.missing && total > 0);
    const report: VerifyReport = { ok: absent.length === 0 && comparisons.every((c) => c.differing === 0), projections: comparisons };
    const differing = comparisons.reduce((n, c) => n + c.differing, 0);
    line.finish(
      report.ok
        ? 'every projection matches the stream'
        : [differing > 0 ? `${differing} keys differ` : '', absent.length > 0 ? `${absent.length} projections have no live generation` : '']
            .filter(Boolean)
            .join('; '),
    );
    if (json) {
      printJson(ctx.io, report);
    } else {
      for (const comparison of comparisons) {
        if (comparison.missing && total > 0) {
          ctx.io.stdout.write(
            `${comparison.projection}: no live generation, while the stream holds ${total} events: not built yet, or BATON_PROJECTION_PREFIX names another keyspace (build it with \`baton replay --projection ${comparison.projection}\`)\n`,
          );
        } else if (comparison.differing === 0) {
          const caughtUp = comparison.rounds > 0 ? `, after ${comparison.rounds} catch-up rounds with the live projection` : '';
          ctx.io.stdout.write(`${comparison.projection}: ok (${comparison.live_keys} keys, seq ${comparison.live_seq}${caughtUp})\n`);
        } else {
          ctx.io.stdout.write(`${comparison.projection}: ${comparison.differing} keys differ from a fold of the stream (to seq ${comparison.live_seq}):\n`);
          ctx.io.stdout.write(differenceLines(comparison.differences, 50, comparison.differing));
          if (comparison.frozen_keys > 0) ctx.io.stdout.write(frozenNote(comparison));
          if (comparison.live_moved > 0) ctx.io.stdout.write(movedNote(comparison));
          if (versionSkewed(comparison)) ctx.io.stdout.write(versionSkewNote(comparison));
        }
      }
      const failing = comparisons.filter((c) => c.differing > 0 || (c.missing && total > 0));
      if (failing.length > 0 && failing.every(versionSkewed)) {
        // A replay by this baton would swap in another release's version under the running notifier.
        ctx.io.stdout.write('projections differ, and the live ones were written by another release of the notifier: see the notes above\n');
      } else if (failing.some((c) => c.missing || c.differing > c.unsettled)) {
        ctx.io.stdout.write('projections differ; run `baton replay` to rebuild them\n');
      } else if (failing.length > 0) {
        // Every difference is on a key the live side wrote again while it was compared.
        ctx.io.stdout.write('every difference may be events applied while it was compared: run `baton verify` again when traffic is quieter\n');
      }
    }
    return report.ok ? ExitCode.ok : ExitCode.differ;
  },
};
