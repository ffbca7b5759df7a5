import { ProjectControlId, ProjectIdSchema, type ProjectSummary } from '@baton/contracts';
import { isUnknownProject, projectSummaryOf } from '@baton/domain';
import type { Command } from '../command';
import { parseCommandArgs } from '../command';
import type { CliContext } from '../context';
import { CliError, CliErrorCode, ExitCode, UsageError } from '../errors';
import { printJson, renderFields } from '../output';
import { readHistory } from '../timeline';

/** Read a project's definition and kill-switch state straight from the events stream (`ProjectSummarySchema`). */
export async function readProjectSummary(ctx: CliContext, project: string): Promise<ProjectSummary> {
  const [definitions, control] = await Promise.all([
    readHistory(ctx, 'definition', 'current', project),
    readHistory(ctx, 'project', ProjectControlId, project),
  ]);
  return projectSummaryOf(project, definitions?.events ?? [], control?.events ?? []);
}

export const projectCommand: Command = {
  name: 'project',
  summary: "a project's published definition and kill switch (active or paused: by whom, when, why)",
  help: `Usage: baton project <project> [--json]

Show what Baton holds for a project, read from the events stream: whether a definition is
published (when, how many times, and by whom: the admin, or the person its publish named — BATON_OPERATOR),
its agents, workflows and meshes, the projects it accepts handoffs from, and the kill switch —
active, or paused with the pause id, who paused it, when and why.
A project with neither is unknown to Baton: refused not_found (exit 1), as a misspelt key is.
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { json: { type: 'boolean' } }, { min: 1, max: 1, names: ['<project>'] });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const project = args.positionals[0] as string;
    if (!ProjectIdSchema.safeParse(project).success) throw new UsageError(`"${project}" is not a project key (lowercase letters, digits, _ and -)`);
    const summary = await readProjectSummary(ctx, project);
    if (isUnknownProject(summary)) {
      throw new CliError(`project ${project} is unknown: no definition was published and it was never paused`, {
        code: CliErrorCode.notFound,
        details: { project },
      });
    }
    if (args.values['json'] === true) printJson(ctx.io, summary);
    else {
      const d = summary.definition;
      const c = summary.control;
      ctx.io.stdout.write(
        renderFields({
          project,
          definition:
            d === null
              ? 'none published'
              : `published ${d.published_at} by ${d.published_by} (${d.publishes === 1 ? '1 publish' : `${d.publishes} publishes`})`,
          ...(d !== null
            ? {
                lead: d.lead,
                agents: d.agents.join(', '),
                workflows: d.workflows.length > 0 ? d.workflows.join(', ') : '-',
                meshes: d.meshes.length > 0 ? d.meshes.join(', ') : '-',
                'accepts from': d.accepts_handoffs_from.length > 0 ? d.accepts_handoffs_from.join(', ') : '-',
              }
            : {}),
          status: c.status,
          ...(c.status === 'paused' ? { pause_id: c.pause_id, paused_by: c.paused_by, paused_at: c.paused_at, reason: c.reason } : {}),
        }),
      );
    }
    return ExitCode.ok;
  },
};
