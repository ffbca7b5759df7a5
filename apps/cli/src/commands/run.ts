import type { RunEvent } from '@baton/domain';
import { evolveRun, initialRunState } from '@baton/domain';
import { createBatonViews, toRunView, type RunView, type TimelineEntry } from '@baton/projections';
import type { Command } from '../command';
import { parseCommandArgs, str } from '../command';
import { CliError, ExitCode } from '../errors';
import { printJson, renderFields } from '../output';
import { readHistory } from '../timeline';
import { timelineTable } from './handoff';

/** What `baton run <id> --json` prints. */
export interface RunReport {
  run: RunView;
  view_source: 'projection' | 'events';
  /** The handoffs the run created (from the projection; empty when it is missing). */
  handoffs: string[];
  timeline: TimelineEntry[];
  timeline_source: 'stream' | 'projection';
}

export const runCommand: Command = {
  name: 'run',
  summary: 'show one workflow run: its view and its event timeline',
  help: `Usage: baton run <id> [--project p] [--json]

Show a workflow run as the projections hold it, and its timeline read straight from the events
stream, so it works even when the projections are gone (the view is then folded from the events).

Options:
  --project <p>   the project (default: found from the stream)
  --json          print { run, view_source, handoffs, timeline, timeline_source }
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { project: { type: 'string' }, json: { type: 'boolean' } }, { min: 1, max: 1 });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const id = args.positionals[0]!;
    const views = createBatonViews(await ctx.projections());
    const projected = await views.run(id).catch(() => null);
    const handoffs = projected ? await views.runHandoffs(id).catch(() => []) : [];
    const history = await readHistory(ctx, 'run', id, str(args, 'project')).catch((error: unknown) => {
      if (projected === null) throw error;
      ctx.io.stderr.write(`baton: warning: cannot read the events stream (${(error as Error).message}); showing the projected timeline\n`);
      return undefined;
    });
    let report: RunReport;
    if (projected) {
      report = history
        ? { run: projected.run, view_source: 'projection', handoffs, timeline: history.timeline, timeline_source: 'stream' }
        : { run: projected.run, view_source: 'projection', handoffs, timeline: projected.timeline, timeline_source: 'projection' };
    } else {
      const last = history?.events[history.events.length - 1];
      const state = history ? history.events.reduce((s, e) => evolveRun(s, { type: e.type, data: e.payload } as RunEvent), initialRunState()) : null;
      const view = state && last ? toRunView(state, last) : null;
      if (!history || !view) throw new CliError(`run ${id} not found`);
      report = { run: view, view_source: 'events', handoffs, timeline: history.timeline, timeline_source: 'stream' };
    }
    if (args.values['json'] === true) {
      printJson(ctx.io, report);
      return ExitCode.ok;
    }
    const r = report.run;
    ctx.io.stdout.write(
      renderFields({
        run: r.workflow_run_id,
        project: r.project,
        workflow: `${r.workflow.name} v${r.workflow.version}`,
        status: r.status,
        step: r.step,
        agent: r.agent,
        callback: r.callback ?? undefined,
        hops: r.hops,
        handoff: r.handoff_id ?? undefined,
        'open stop': r.open_stop_id ?? undefined,
        hold: r.hold ? `${r.hold.kind}: ${r.hold.reason}` : undefined,
        terminated: r.terminated_reason ?? undefined,
        started: r.started_at,
        updated: r.updated_at,
        handoffs: report.handoffs.length > 0 ? report.handoffs.join(', ') : undefined,
        view: report.view_source === 'events' ? 'folded from the events (projection missing)' : 'projection',
      }),
    );
    ctx.io.stdout.write(`\nTimeline (${report.timeline_source}):\n`);
    ctx.io.stdout.write(timelineTable(report.timeline));
    return ExitCode.ok;
  },
};
