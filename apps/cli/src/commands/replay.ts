import { createBatonProjector } from '@baton/projections';
import type { Command } from '../command';
import { flag, parseCommandArgs, str } from '../command';
import { CliError, ExitCode } from '../errors';
import { printJson, Progress } from '../output';
import { counted, differenceLines, eventSource, foldAndCompare, selectProjections, type ShadowComparison } from '../rebuild';

/** One projection's outcome in `baton replay --json`. */
export type ReplayOutcome =
  | { projection: string; status: 'swapped'; generation: number; previous: number | null; last_seq: number; events: number; dropped_keys: number }
  | { projection: string; status: 'lost'; generation: number; winner: number | null }
  | ({ status: 'dry_run' } & ShadowComparison);

export const replayCommand: Command = {
  name: 'replay',
  summary: 'rebuild projections from the events stream (shadow keyspace, atomic swap)',
  help: `Usage: baton replay [--projection name] [--dry-run] [--json]

Rebuild Baton's Redis projections (inbox, stops, handoffs, runs) by replaying <PREFIX>_EVENTS into
a fresh shadow generation and swapping it in atomically (compare-and-set), while the notifier
keeps applying live events; the old generation is deleted after the swap. Progress goes to
stderr (a bar on a terminal, plain lines otherwise).

Options:
  --projection <name>   only this projection (inbox, stops, handoffs, runs)
  --dry-run             rebuild into a shadow, report the counts and the difference from the live
                        projection, then discard the shadow (nothing live changes)
  --json                print the outcome of each projection as a JSON array
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { projection: { type: 'string' }, 'dry-run': { type: 'boolean' }, json: { type: 'boolean' } }, { min: 0, max: 0 });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const projections = selectProjections(str(args, 'projection'));
    const json = flag(args, 'json');
    const store = await ctx.projections();
    const { source, total } = await eventSource(ctx);
    const outcomes: ReplayOutcome[] = [];
    for (const projection of projections) {
      const progress = new Progress(ctx.io, `${flag(args, 'dry-run') ? 'dry-run' : 'replay'} ${projection.name}`, total);
      if (flag(args, 'dry-run')) {
        const comparison = await foldAndCompare(store, projection, source, { boundToLive: false, progress });
        outcomes.push({ status: 'dry_run', ...comparison });
        if (!json) {
          ctx.io.stdout.write(
            `${projection.name}: dry run folded ${comparison.events} events to seq ${comparison.rebuilt_seq} (${comparison.rebuilt_keys} keys); ` +
              `live has ${comparison.live_keys} keys at seq ${comparison.live_seq}; ${comparison.differences.length} keys differ\n`,
          );
          ctx.io.stdout.write(differenceLines(comparison.differences, 20));
        }
        continue;
      }
      let events = 0;
      const projector = createBatonProjector({ store, projections: [projection] });
      let result;
      try {
        result = await projector.rebuild(
          projection.name,
          counted(source, () => {
            events++;
            progress.tick();
          }),
        );
      } catch (error) {
        throw new CliError(`rebuilding ${projection.name} failed: ${(error as Error).message}`, { cause: error });
      } finally {
        progress.finish();
      }
      if (result.status === 'lost') {
        outcomes.push({ projection: projection.name, status: 'lost', generation: result.generation, winner: result.winner });
        if (!json) ctx.io.stdout.write(`${projection.name}: another rebuild swapped first (generation ${result.winner}); this one was discarded\n`);
        continue;
      }
      const cleanup = await result.cleanup;
      outcomes.push({
        projection: projection.name,
        status: 'swapped',
        generation: result.generation,
        previous: result.previous,
        last_seq: result.lastSeq,
        events,
        dropped_keys: cleanup.deletedKeys,
      });
      if (!json) {
        ctx.io.stdout.write(
          `${projection.name}: rebuilt generation ${result.generation} from ${events} events (to seq ${result.lastSeq}); ` +
            `swapped out generation ${result.previous ?? '-'} (${cleanup.deletedKeys} keys deleted)\n`,
        );
      }
      if (cleanup.error) ctx.io.stderr.write(`baton: warning: deleting generation ${cleanup.generation} of ${projection.name} failed: ${cleanup.error.message}\n`);
    }
    if (json) printJson(ctx.io, outcomes);
    return outcomes.some((o) => o.status === 'lost') ? ExitCode.failure : ExitCode.ok;
  },
};
