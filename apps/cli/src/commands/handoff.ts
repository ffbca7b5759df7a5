import type { HandoffEvent, HandoffRecord } from '@baton/contracts';
import { evolveHandoff, initialHandoffState, toHandoffRecord } from '@baton/domain';
import type { TimelineEntry } from '@baton/projections';
import type { Command } from '../command';
import { int, parseCommandArgs, str } from '../command';
import { CliError, CliErrorCode, CliWarningCode, ExitCode } from '../errors';
import { printJson, renderFields, renderTable } from '../output';
import { foldedAtNote, historyAt, projectOf, projectionViewsOrWarn, readHistory } from '../timeline';

/** What `baton handoff <id> --json` prints. */
export interface HandoffReport {
  /** The handoff's project (a handoff id is unique only within its project). */
  project: string;
  handoff: HandoffRecord;
  /** Where the view came from: the Redis projection, or a fold of the events (projection missing). */
  view_source: 'projection' | 'events';
  /** With `--at`: the stream sequence the view and timeline are as of (folded from the events up to it). */
  at_seq?: number;
  /** The events, read from the stream (or from the projection when the stream could not be read). */
  timeline: TimelineEntry[];
  timeline_source: 'stream' | 'projection';
}

export const handoffCommand: Command = {
  name: 'handoff',
  summary: 'show one handoff: its view and its event timeline',
  help: `Usage: baton handoff <id> [--project p] [--at seq] [--json]

Show a handoff as the projections hold it, and its timeline read straight from the events stream,
so it works even when the projections are gone (the view is then folded from the events, with a
warning on stderr; with --json view_source and timeline_source say it, and stderr the line
{"warnings":[{"code":"projections_unavailable",…}]}, or a failure's details.warnings).
A handoff id is unique only within its project: when several projects hold <id>, --project is
required (the usage error names them).

Options:
  --project <p>   the project (default: the one project holding <id>)
  --at <seq>      the handoff as of a point in the log: fold only its events with stream seq <= <seq>
  --json          print { project, handoff, view_source, timeline, timeline_source[, at_seq] }
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      { project: { type: 'string' }, at: { type: 'string' }, json: { type: 'boolean' } },
      { min: 1, max: 1, names: ['<id> (the handoff id)'] },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const id = args.positionals[0]!;
    const atSeq = int(args, 'at', { min: 1, max: Number.MAX_SAFE_INTEGER });
    let report: HandoffReport | null = null;
    const views = atSeq === undefined ? await projectionViewsOrWarn(ctx) : null;
    const project = await projectOf(ctx, 'handoff', id, str(args, 'project'), async () => (views ? views.projectsOf('handoff', id) : []));
    if (project === null) throw new CliError(`handoff ${id} not found`, { code: CliErrorCode.notFound });
    if (atSeq !== undefined) {
      const full = await readHistory(ctx, 'handoff', id, project);
      if (!full) throw new CliError(`handoff ${id} not found in project ${project}`, { code: CliErrorCode.notFound });
      const history = historyAt(full, atSeq, `handoff ${id}`);
      const folded = toHandoffRecord(
        history.events.reduce((s, e) => evolveHandoff(s, { type: e.type, data: e.payload } as HandoffEvent), initialHandoffState()),
      );
      if (!folded) throw new CliError(`handoff ${id} has no record at seq ${atSeq}`, { code: CliErrorCode.notFound });
      report = { project, handoff: folded, view_source: 'events', at_seq: atSeq, timeline: history.timeline, timeline_source: 'stream' };
    }
    if (report === null) {
      const projected = views ? await views.handoff(project, id).catch(() => null) : null;
      const history = await readHistory(ctx, 'handoff', id, project).catch((error: unknown) => {
        if (projected === null) throw error;
        ctx.warn(CliWarningCode.eventsUnavailable, `cannot read the events stream (${(error as Error).message}); showing the projected timeline`);
        return undefined;
      });
      if (projected) {
        report = history
          ? { project, handoff: projected.handoff, view_source: 'projection', timeline: history.timeline, timeline_source: 'stream' }
          : { project, handoff: projected.handoff, view_source: 'projection', timeline: projected.timeline, timeline_source: 'projection' };
      } else {
        const folded = history
          ? toHandoffRecord(history.events.reduce((s, e) => evolveHandoff(s, { type: e.type, data: e.payload } as HandoffEvent), initialHandoffState()))
          : null;
        if (!history || !folded) throw new CliError(`handoff ${id} not found in project ${project}`, { code: CliErrorCode.notFound });
        report = { project, handoff: folded, view_source: 'events', timeline: history.timeline, timeline_source: 'stream' };
      }
    }
    if (args.values['json'] === true) {
      printJson(ctx.io, report);
      return ExitCode.ok;
    }
    const h = report.handoff;
    ctx.io.stdout.write(
      renderFields({
        handoff: h.id,
        project: h.project,
        status: h.status,
        kind: h.kind,
        priority: h.priority,
        from: h.from_agent,
        to: h.to_agent ?? (h.to_role ? `role ${h.to_role}` : undefined),
        summary: h.summary,
        'claimed by': h.claimed_by,
        'claimed at': h.claimed_at,
        'lease until': h.lease_expires_at,
        created: h.created_at,
        deadline: h.deadline_at,
        'source project': h.source_project,
        retries: `${h.retry.retry_count}/${h.retry.max_retries}`,
        // Its agent gave up on an offer without claiming it (docs/handoffs.md rule 5a): the last time.
        'offer given up': h.offer_given_up
          ? `by ${h.offer_given_up.by} at ${h.offer_given_up.at} after ${h.offer_given_up.deliveries} deliveries: ${h.offer_given_up.reason}`
          : undefined,
        // Its handback was reworked: what the worker's next round is asked to change (the last time).
        'last rework': h.last_rework ? `by ${h.last_rework.by} at ${h.last_rework.at}: ${h.last_rework.note}` : undefined,
        'workflow run': h.workflow_run_id,
        outcome: h.completion_report?.outcome,
        reason: h.terminal_reason,
        updated: h.updated_at,
        view:
          report.at_seq !== undefined
            ? foldedAtNote(report.at_seq, report.timeline)
            : report.view_source === 'events'
              ? 'folded from the events (projection missing or Redis unreachable)'
              : 'projection',
      }),
    );
    ctx.io.stdout.write(`\nTimeline (${report.timeline_source}${report.at_seq !== undefined ? `, to seq ${report.at_seq}` : ''}):\n`);
    ctx.io.stdout.write(timelineTable(report.timeline));
    return ExitCode.ok;
  },
};

export function timelineTable(timeline: readonly TimelineEntry[]): string {
  return renderTable(
    timeline,
    [
      { header: 'seq', value: (e) => e.seq },
      { header: 'time', value: (e) => e.occurred_at },
      { header: 'event', value: (e) => e.type },
      { header: 'actor', value: (e) => e.actor },
      { header: 'origin', value: (e) => e.origin },
      { header: 'what', value: (e) => e.summary, max: 100 },
    ],
    '(no events)',
  );
}
