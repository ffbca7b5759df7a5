import { handoverText, meshViewOf, turnCount, type MeshView } from '@baton/domain';
import type { TimelineEntry } from '@baton/projections';
import type { Command } from '../command';
import type { CliContext } from '../context';
import { parseCommandArgs, str } from '../command';
import { CliError, CliErrorCode, ExitCode } from '../errors';
import { printJson, renderFields, renderTable } from '../output';
import { projectArg, readHistory } from '../timeline';
import { timelineTable } from './handoff';

/** What `baton mesh <id> --json` prints. */
export interface MeshReport {
  /** The mesh's project (a mesh_run_id is unique only within its project). */
  project: string;
  mesh: MeshView;
  timeline: TimelineEntry[];
}

export const meshCommand: Command = {
  name: 'mesh',
  summary: 'show one handoff mesh run: turns, handoffs taken, calls ignored and why, cap, outcome',
  help: `Usage: baton mesh <id> [--project p] [--json]

Show a handoff mesh run, read from the events stream: its outcome (completed with its output,
stopped — at its cap, by its agent, or from outside —, terminated by an operator, or running), the cap (turns used, the limit, each
raise), every turn with what its agent said and the handoff tools it called, the handoffs taken,
the calls ignored and why (unknown_tool: the tool names no agent of the mesh; not_granted: an agent
the speaker may not hand off to, itself included), turns the mesh refused, the stop packet, and
the timeline. A mesh_run_id is unique only within its project: when several projects hold <id>,
--project is required (the usage error names them).

Options:
  --project <p>   the project (default: the one project holding <id>)
  --json          print { project, mesh, timeline }
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { project: { type: 'string' }, json: { type: 'boolean' } }, { min: 1, max: 1, names: ['<id> (the mesh run id)'] });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const id = args.positionals[0]!;
    const given = str(args, 'project');
    const history = await readHistory(ctx, 'mesh', id, given === undefined ? undefined : projectArg(given));
    const mesh = history ? meshViewOf(history.events) : null;
    if (!history || !mesh)
      throw new CliError(given === undefined ? `mesh run ${id} not found` : `mesh run ${id} not found in project ${given}`, { code: CliErrorCode.notFound });
    return print(ctx, args.values['json'] === true, { project: history.project, mesh, timeline: history.timeline });
  },
};

function outcomeLine(mesh: MeshView): string {
  const o = mesh.outcome;
  switch (o.status) {
    case 'completed':
      return `completed by ${o.by} after ${turnCount(o.turns)}${o.output ? `; output from ${o.output.agent} (turn ${o.output.turn})` : '; no output agent spoke'}`;
    case 'stopped':
      return o.at_cap
        ? `stopped at its cap (packet ${o.packet_id}, waiting for an operator)`
        : `stopped (${o.why}; packet ${o.packet_id}, waiting for an operator)`;
    case 'terminated':
      return `terminated by an operator: ${o.reason}`;
    default:
      return `running (${mesh.speaker} speaks next)`;
  }
}

function print(ctx: CliContext, json: boolean, report: MeshReport): ExitCode {
  if (json) {
    printJson(ctx.io, report);
    return ExitCode.ok;
  }
  const m = report.mesh;
  const out = ctx.io.stdout;
  out.write(
    renderFields({
      mesh: m.mesh_run_id,
      project: m.project,
      definition: `${m.mesh.name} (entry ${m.mesh.entry}; outputs ${m.mesh.outputs.length > 0 ? m.mesh.outputs.join(', ') : 'every agent'})`,
      status: m.status,
      outcome: outcomeLine(m),
      cap: `${m.cap.used} of ${m.cap.max_iterations} turns used${m.cap.raised.length > 0 ? ` (raised ${m.cap.raised.map((r) => `${r.from} → ${r.to} by ${r.by}`).join(', ')})` : ''}`,
      speaker: m.status === 'running' ? m.speaker : undefined,
      'started by': m.started_by ?? undefined,
      started: m.started_at,
      input: m.input !== null ? printable(m.input) : undefined,
    }),
  );
  if (m.outcome.status === 'completed' && m.outcome.output)
    out.write(`\nOutput (${m.outcome.output.agent}, turn ${m.outcome.output.turn}):\n${indent(m.outcome.output.text)}\n`);
  out.write('\nTurns:\n');
  out.write(
    renderTable(
      m.turns,
      [
        { header: 'turn', value: (t) => t.turn },
        { header: 'agent', value: (t) => t.agent },
        {
          header: 'handoff calls',
          value: (t) =>
            t.stopped !== undefined
              ? `${t.calls.length > 0 ? `${t.calls.join(', ')} ` : ''}(stopped: ${t.stopped.why}${t.calls.length > 0 ? '; not followed' : ''})`
              : t.calls.length > 0
                ? t.calls.join(', ')
                : '(none: ends the mesh)',
          max: 60,
        },
        { header: 'said', value: (t) => printable(t.text).replace(/\s+/g, ' '), max: 80 },
      ],
      '(no turns yet)',
    ),
  );
  out.write('\nHandoffs taken:\n');
  out.write(
    renderTable(
      m.handoffs,
      [
        { header: 'turn', value: (h) => h.turn },
        { header: 'from', value: (h) => h.from },
        { header: 'to', value: (h) => h.to },
        { header: 'tool', value: (h) => `${h.tool}${h.after_cap_raise ? ' (after the cap was raised)' : ''}` },
        { header: 'handoff', value: (h) => h.handoff_id },
        { header: 'handover', value: (h) => handoverText(h.handover), max: 80 },
      ],
      '(none)',
    ),
  );
  out.write('\nCalls ignored:\n');
  out.write(
    renderTable(
      m.ignored,
      [
        { header: 'turn', value: (i) => i.turn ?? '' },
        { header: 'agent', value: (i) => i.agent },
        { header: 'tool', value: (i) => i.tool },
        { header: 'why', value: (i) => i.reason },
        { header: 'detail', value: (i) => printable(i.detail), max: 80 },
      ],
      '(none)',
    ),
  );
  if (m.rejected.length > 0) {
    out.write('\nRefused:\n');
    out.write(
      renderTable(
        m.rejected,
        [
          { header: 'result', value: (r) => r.result_id },
          { header: 'agent', value: (r) => r.agent },
          { header: 'code', value: (r) => r.code },
          { header: 'message', value: (r) => printable(r.message), max: 80 },
        ],
        '',
      ),
    );
  }
  if (m.stop) {
    const s = m.stop;
    out.write(
      `\nStop: packet ${s.packet_id} (${s.why}) ${s.status}${s.refused ? `; refused ${s.refused.from} → ${s.refused.to} (${s.refused.tool})` : ''}${s.answer ? `; answered ${s.answer.action} by ${s.answer.by} → ${s.answer.effect}` : ''}\n`,
    );
  }
  out.write('\nTimeline (stream):\n');
  out.write(timelineTable(report.timeline));
  return ExitCode.ok;
}

function indent(text: string): string {
  return printable(text)
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n');
}

/** Control characters agent text may hold, made visible instead of reaching the terminal. */
function printable(text: string): string {
  let out = '';
  for (const ch of text) {
    const code = ch.charCodeAt(0);
    out += (code < 0x20 && ch !== '\n' && ch !== '\t') || code === 0x7f || (code >= 0x80 && code < 0xa0) ? `\\u${code.toString(16).padStart(4, '0')}` : ch;
  }
  return out;
}
