import type { RunEvent } from '@baton/domain';
import { evolveRun, initialRunState } from '@baton/domain';
import { createBatonViews, toRunView, type ProjectRef, type RunView, type TimelineEntry } from '@baton/projections';
import type { Command } from '../command';
import type { CliContext } from '../context';
import { int, parseCommandArgs, str } from '../command';
import { CliError, ExitCode } from '../errors';
import { printJson, renderFields } from '../output';
import { historyAt, projectOf, readHistory } from '../timeline';
import { timelineTable } from './handoff';

/** What `baton run <id> --json` prints. */
export interface RunReport {
  /** The run's project (a workflow_run_id is unique only within its project). */
  project: string;
  run: RunView;
  view_source: 'projection' | 'events';
  /** With `--at`: the stream sequence the view and timeline are as of (folded from the events up to it). */
  at_seq?: number;
  /** The handoffs the run created, each with its project (from the projection; empty when it is missing). */
  handoffs: ProjectRef[];
  timeline: TimelineEntry[];
  timeline_source: 'stream' | 'projection';
}

export const runCommand: Command = {
  name: 'run',
  summary: 'show one workflow run: its view and its event timeline',
  help: `Usage: baton run <id> [--project p] [--at seq] [--json]

Show a workflow run as the projections hold it, and its timeline read straight from the events
stream, so it works even when the projections are gone (the view is then folded from the events).
A workflow_run_id is unique only within its project: when several projects hold <id>, --project
is required (the usage error names them).

Options:
  --project <p>   the project (default: the one project holding <id>)
  --at <seq>      the run as of a point in the log: fold only its events with stream seq <= <seq>
                  (view and timeline; the projections are not read)
  --json          print { project, run, view_source, handoffs, timeline, timeline_source[, at_seq] }
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { project: { type: 'string' }, at: { type: 'string' }, json: { type: 'boolean' } }, { min: 1, max: 1 });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const id = args.positionals[0]!;
    const atSeq = int(args, 'at', { min: 1, max: Number.MAX_SAFE_INTEGER });
    const views = atSeq === undefined ? createBatonViews(await ctx.projections()) : null;
    const project = await projectOf(ctx, 'run', id, str(args, 'project'), async () => (views ? views.projectsOf('run', id) : []));
    if (project === null) throw new CliError(`run ${id} not found`);
    if (atSeq !== undefined) {
      const full = await readHistory(ctx, 'run', id, project);
      if (!full) throw new CliError(`run ${id} not found in project ${project}`);
      const history = historyAt(full, atSeq, `run ${id}`);
      const state = history.events.reduce((s, e) => evolveRun(s, { type: e.type, data: e.payload } as RunEvent), initialRunState());
      const view = toRunView(state, history.events[history.events.length - 1]!);
      if (!view) throw new CliError(`run ${id} has no view at seq ${atSeq}`);
      return print(ctx, args.values['json'] === true, { project, run: view, view_source: 'events', at_seq: atSeq, handoffs: [], timeline: history.timeline, timeline_source: 'stream' });
    }
    const projected = views ? await views.run(project, id).catch(() => null) : null;
    const handoffs = projected && views ? await views.runHandoffs(project, id).catch(() => []) : [];
    const history = await readHistory(ctx, 'run', id, project).catch((error: unknown) => {
      if (projected === null) throw error;
      ctx.io.stderr.write(`baton: warning: cannot read the events stream (${(error as Error).message}); showing the projected timeline\n`);
      return undefined;
    });
    let report: RunReport;
    if (projected) {
      report = history
        ? { project, run: projected.run, view_source: 'projection', handoffs, timeline: history.timeline, timeline_source: 'stream' }
        : { project, run: projected.run, view_source: 'projection', handoffs, timeline: projected.timeline, timeline_source: 'projection' };
    } else {
      const last = history?.events[history.events.length - 1];
      const state = history ? history.events.reduce((s, e) => evolveRun(s, { type: e.type, data: e.payload } as RunEvent), initialRunState()) : null;
      const view = state && last ? toRunView(state, last) : null;
      if (!history || !view) throw new CliError(`run ${id} not found in project ${project}`);
      report = { project, run: view, view_source: 'events', handoffs, timeline: history.timeline, timeline_source: 'stream' };
    }
    return print(ctx, args.values['json'] === true, report);
  },
};

/** Print a run report as JSON or as fields plus the timeline. */
function print(ctx: CliContext, json: boolean, report: RunReport): ExitCode {
  if (json) {
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
      handoffs: report.handoffs.length > 0 ? report.handoffs.map((h) => (h.project === report.project ? h.id : `${h.id} (project ${h.project})`)).join(', ') : undefined,
      view:
        report.at_seq !== undefined
          ? `folded from the events up to seq ${report.at_seq}`
          : report.view_source === 'events'
            ? 'folded from the events (projection missing)'
            : 'projection',
    }),
  );
  ctx.io.stdout.write(`\nTimeline (${report.timeline_source}${report.at_seq !== undefined ? `, to seq ${report.at_seq}` : ''}):\n`);
  ctx.io.stdout.write(timelineTable(report.timeline));
  const said = report.timeline.filter((entry) => entry.said !== undefined);
  if (said.length > 0) {
    // What each agent said on its turn, as posted (its words and one canonical sentinel).
    ctx.io.stdout.write('\nWhat the agents said:\n');
    for (const entry of said) {
      ctx.io.stdout.write(`  seq ${entry.seq} ${entry.actor}:\n${printable(entry.said ?? '').split('\n').map((line) => `    ${line}`).join('\n')}\n`);
    }
  }
  return ExitCode.ok;
}

/** Control characters an agent's text may hold, made visible instead of reaching the terminal. */
function printable(text: string): string {
  let out = '';
  for (const ch of text) {
    const code = ch.charCodeAt(0);
    out += (code < 0x20 && ch !== '\n' && ch !== '\t') || code === 0x7f || (code >= 0x80 && code < 0xa0) ? `\\u${code.toString(16).padStart(4, '0')}` : ch;
  }
  return out;
}
