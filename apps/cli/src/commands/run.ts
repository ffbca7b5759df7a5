import { runViewOf, type ProjectRef, type RunView, type TimelineEntry } from '@baton/projections';
import type { Command } from '../command';
import type { CliContext } from '../context';
import { int, parseCommandArgs, str } from '../command';
import { CliError, CliErrorCode, CliWarningCode, ExitCode } from '../errors';
import { printJson, renderFields } from '../output';
import { foldedAtNote, historyAt, projectOf, projectionViewsOrWarn, readHistory } from '../timeline';
import { timelineTable } from './handoff';

/** What `baton run <id> --json` prints. */
export interface RunReport {
  /** The run's project (a workflow_run_id is unique only within its project). */
  project: string;
  run: RunView;
  view_source: 'projection' | 'events';
  /** With `--at`: the stream sequence the view and timeline are as of (folded from the events up to it). */
  at_seq?: number;
  /**
   * The handoffs of the run, each with its project: from the projection (every handoff naming the
   * run); with `--at`, or when the projection is missing, the handoffs its own routes had created
   * (`run.routed`).
   */
  handoffs: ProjectRef[];
  timeline: TimelineEntry[];
  timeline_source: 'stream' | 'projection';
}

export const runCommand: Command = {
  name: 'run',
  summary: 'show one workflow run: its view and its event timeline',
  help: `Usage: baton run <id> [--project p] [--at seq] [--json]

Show a workflow run as the projections hold it, and its timeline read straight from the events
stream, so it works even when the projections are gone (the view is then folded from the events,
with a warning on stderr; with --json view_source and timeline_source say it, and stderr the line
{"warnings":[{"code":"projections_unavailable",…}]}, or a failure's details.warnings).
A workflow_run_id is unique only within its project: when several projects hold <id>, --project
is required (the usage error names them).

Options:
  --project <p>   the project (default: the one project holding <id>)
  --at <seq>      the run as of a point in the log: fold only its events with stream seq <= <seq>
                  (its handoffs then: those its routes had created)
                  (view and timeline; the projections are not read)
  --json          print { project, run, view_source, handoffs, timeline, timeline_source[, at_seq] }
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      { project: { type: 'string' }, at: { type: 'string' }, json: { type: 'boolean' } },
      { min: 1, max: 1, names: ['<id> (the workflow_run_id)'] },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const id = args.positionals[0]!;
    const atSeq = int(args, 'at', { min: 1, max: Number.MAX_SAFE_INTEGER });
    const views = atSeq === undefined ? await projectionViewsOrWarn(ctx) : null;
    const project = await projectOf(ctx, 'run', id, str(args, 'project'), async () => (views ? views.projectsOf('run', id) : []));
    if (project === null) throw new CliError(`run ${id} not found`, { code: CliErrorCode.notFound });
    if (atSeq !== undefined) {
      const full = await readHistory(ctx, 'run', id, project);
      if (!full) throw new CliError(`run ${id} not found in project ${project}`, { code: CliErrorCode.notFound });
      const history = historyAt(full, atSeq, `run ${id}`);
      const view = runViewOf(history.events);
      if (!view) throw new CliError(`run ${id} has no view at seq ${atSeq}`, { code: CliErrorCode.notFound });
      return print(ctx, args.values['json'] === true, {
        project,
        run: view,
        view_source: 'events',
        at_seq: atSeq,
        handoffs: routedHandoffs(project, history.events),
        timeline: history.timeline,
        timeline_source: 'stream',
      });
    }
    const projected = views ? await views.run(project, id).catch(() => null) : null;
    const projectedHandoffs = projected && views ? await views.runHandoffs(project, id).catch(() => []) : [];
    const history = await readHistory(ctx, 'run', id, project).catch((error: unknown) => {
      if (projected === null) throw error;
      ctx.warn(CliWarningCode.eventsUnavailable, `cannot read the events stream (${(error as Error).message}); showing the projected timeline`);
      return undefined;
    });
    // Without the projection (Redis unreachable, the run not projected), the handoffs its routes created.
    const handoffs = projected ? projectedHandoffs : history ? routedHandoffs(project, history.events) : [];
    let report: RunReport;
    if (projected) {
      report = history
        ? { project, run: projected.run, view_source: 'projection', handoffs, timeline: history.timeline, timeline_source: 'stream' }
        : { project, run: projected.run, view_source: 'projection', handoffs, timeline: projected.timeline, timeline_source: 'projection' };
    } else {
      const view = history ? runViewOf(history.events) : null;
      if (!history || !view) throw new CliError(`run ${id} not found in project ${project}`, { code: CliErrorCode.notFound });
      report = { project, run: view, view_source: 'events', handoffs, timeline: history.timeline, timeline_source: 'stream' };
    }
    return print(ctx, args.values['json'] === true, report);
  },
};

/** The handoffs a run's routes created (`run.routed`'s `handoff_id`), in the run's project, in order. */
export function routedHandoffs(project: string, events: ReadonlyArray<{ type: string; payload: unknown }>): ProjectRef[] {
  const ids = new Set<string>();
  for (const event of events) {
    const id = event.type === 'run.routed' ? (event.payload as { handoff_id?: unknown }).handoff_id : undefined;
    if (typeof id === 'string') ids.add(id);
  }
  return [...ids].map((id) => ({ project, id }));
}

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
      hold: r.hold
        ? `${r.hold.kind}: ${r.hold.reason}${r.hold.cause ? ` (cause ${r.hold.cause.kind}:${r.hold.cause.id}; answer-hold --hold-cause)` : ''}`
        : undefined,
      'pending call': r.hold?.pending_call
        ? `${r.hold.pending_call.name} ${JSON.stringify(r.hold.pending_call.args ?? {})}${r.hold.pending_call.call_id !== undefined ? ` (call ${r.hold.pending_call.call_id})` : ''} — ${
            r.hold.pending_target ? 'continue or reroute hands it on' : 'reroute hands it on'
          }, not approved`
        : undefined,
      terminated: r.terminated_reason ?? undefined,
      started: r.started_at,
      updated: r.updated_at,
      'awaiting input': r.awaiting_input ? 'yes (the active agent waits for the customer)' : undefined,
      'queued messages': r.queued_messages > 0 ? r.queued_messages : undefined,
      'pending handoff': r.pending_handoff
        ? `${r.pending_handoff.handoff_id}: ${r.pending_handoff.from} → ${r.pending_handoff.to} (${r.pending_handoff.return_expected ? 'returnable' : 'permanent'}, route ${r.pending_handoff.route}, ON_FAILURE ${r.pending_handoff.on_failure.action})`
        : undefined,
      handoffs:
        report.handoffs.length > 0
          ? report.handoffs.map((h) => (h.project === report.project ? h.id : `${h.id} (project ${h.project})`)).join(', ')
          : undefined,
      view:
        report.at_seq !== undefined
          ? foldedAtNote(report.at_seq, report.timeline)
          : report.view_source === 'events'
            ? 'folded from the events (projection missing or Redis unreachable)'
            : 'projection',
    }),
  );
  if (r.waiting_parents.length > 0) {
    // Returnable handoffs (seed 001): who waits for whom, innermost last.
    ctx.io.stdout.write('\nWaiting parents (innermost last):\n');
    for (const p of r.waiting_parents) {
      const onReturn = p.on_return ? `ON_RETURN ${p.on_return.action}${p.on_return.handler ? ` (${p.on_return.handler})` : ''}` : 'ON_RETURN default';
      ctx.io.stdout.write(`  ${p.agent} at ${p.step} waits for ${p.child} (handoff ${p.handoff_id}, since ${p.since}; ${onReturn})\n`);
      const scope = Object.keys(p.child_variables);
      if (scope.length > 0)
        ctx.io.stdout.write(`    the child's scope: ${printable(scope.map((k) => `${k}=${JSON.stringify(p.child_variables[k])}`).join(', '))}\n`);
    }
  }
  writeVariables(ctx, r);
  if (r.routes.length > 0) {
    ctx.io.stdout.write('\nRoutes (rule: reason):\n');
    for (const route of r.routes) {
      const to = route.to ? `${route.to.agent} at ${route.to.step}` : '-';
      const from = route.from ? `${route.from.agent}` : 'start';
      const kind = route.handoff ? ` [${route.handoff.return_expected ? 'returnable' : 'permanent'} handoff, route ${route.handoff.route}]` : '';
      ctx.io.stdout.write(
        `  seq ${route.seq} ${route.outcome} ${from} → ${to} by ${route.rule} (${route.origin})${kind}: ${printable(route.reason ?? '(no reason given)')}\n`,
      );
    }
  }
  ctx.io.stdout.write(`\nTimeline (${report.timeline_source}${report.at_seq !== undefined ? `, to seq ${report.at_seq}` : ''}):\n`);
  ctx.io.stdout.write(timelineTable(report.timeline));
  const said = report.timeline.filter((entry) => entry.said !== undefined);
  if (said.length > 0) {
    // What each agent said on its turn, as posted (its words and one canonical sentinel).
    ctx.io.stdout.write('\nWhat the agents said:\n');
    for (const entry of said) {
      ctx.io.stdout.write(
        `  seq ${entry.seq} ${entry.actor}:\n${printable(entry.said ?? '')
          .split('\n')
          .map((line) => `    ${line}`)
          .join('\n')}\n`,
      );
    }
  }
  return ExitCode.ok;
}

/** The session variables, declared ones apart from implicit ones (all together when nothing is known declared). */
function writeVariables(ctx: CliContext, r: RunView): void {
  const line = (vars: Record<string, unknown>) =>
    printable(
      Object.entries(vars)
        .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
        .join(', '),
    );
  if (r.declared_variables === null || r.implicit_variables === null) {
    if (Object.keys(r.variables).length > 0) ctx.io.stdout.write(`\nVariables (declarations not recorded for this run): ${line(r.variables)}\n`);
    return;
  }
  ctx.io.stdout.write('\nVariables:\n');
  ctx.io.stdout.write(
    `  declared: ${Object.keys(r.declared_variables).length > 0 ? line(r.declared_variables) : '(none set)'}${r.unset_declared_variables && r.unset_declared_variables.length > 0 ? `; not set: ${r.unset_declared_variables.join(', ')}` : ''}\n`,
  );
  ctx.io.stdout.write(`  implicit (no agent declares them): ${Object.keys(r.implicit_variables).length > 0 ? line(r.implicit_variables) : '(none)'}\n`);
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
