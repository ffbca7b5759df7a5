import type { Command } from '../command';
import { flag, parseCommandArgs, str } from '../command';
import { ExitCode } from '../errors';
import { printJson, Progress } from '../output';
import { differenceLines, eventSource, foldAndCompare, selectProjections, type ShadowComparison } from '../rebuild';

/** What `baton verify --json` prints. */
export interface VerifyReport {
  ok: boolean;
  projections: ShadowComparison[];
}

export const verifyCommand: Command = {
  name: 'verify',
  summary: 'check that the live projections equal a fold of the streams (exit 1 on any difference)',
  help: `Usage: baton verify [--projection name] [--json]

Fold <PREFIX>_EVENTS, up to the sequence each live projection has applied, into a scratch
generation; compare its canonical snapshot with the live one key by key; print every difference;
drop the scratch generation. Nothing live changes. Exit 0 when every projection matches, 1 when
any key differs (repair with \`baton replay\`).

Options:
  --projection <name>   only this projection (inbox, stops, handoffs, runs)
  --json                print { ok, projections: [{ projection, live_seq, differences, ... }] }
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { projection: { type: 'string' }, json: { type: 'boolean' } }, { min: 0, max: 0 });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const projections = selectProjections(str(args, 'projection'));
    const json = flag(args, 'json');
    const store = await ctx.projections();
    const { source, total } = await eventSource(ctx);
    const report: VerifyReport = { ok: true, projections: [] };
    for (const projection of projections) {
      const comparison = await foldAndCompare(store, projection, source, { boundToLive: true, progress: new Progress(ctx.io, `verify ${projection.name}`, total) });
      report.projections.push(comparison);
      if (comparison.differences.length > 0) report.ok = false;
      if (json) continue;
      if (comparison.differences.length === 0) {
        ctx.io.stdout.write(`${projection.name}: ok (${comparison.live_keys} keys, seq ${comparison.live_seq})\n`);
      } else {
        ctx.io.stdout.write(`${projection.name}: ${comparison.differences.length} keys differ from a fold of the stream (to seq ${comparison.live_seq}):\n`);
        ctx.io.stdout.write(differenceLines(comparison.differences));
      }
    }
    if (json) printJson(ctx.io, report);
    else if (!report.ok) ctx.io.stdout.write('projections differ; run `baton replay` to rebuild them\n');
    return report.ok ? ExitCode.ok : ExitCode.failure;
  },
};
