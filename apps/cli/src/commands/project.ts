import { ProjectControlId, ProjectIdSchema, type ProjectDefinitionSummary, type ProjectSummary } from '@baton/contracts';
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

/**
 * The workflows line: each workflow with its versions, `ship (v1, v2)`; versions only earlier
 * publishes held (a run in flight may be pinned to them) said apart, `ship (v2; v1 only in earlier
 * publishes)`, and so a workflow the definition in force no longer holds; `-` for none.
 */
export function workflowsText(definition: ProjectDefinitionSummary): string {
  const entries = definition.workflow_versions ?? definition.workflows.map((name) => ({ name, versions: [], in_force: [] }));
  if (entries.length === 0) return '-';
  const listed = (versions: readonly number[]) => versions.map((version) => `v${version}`).join(', ');
  return entries
    .map(({ name, versions, in_force }) => {
      const earlier = versions.filter((version) => !in_force.includes(version));
      const parts = [...(in_force.length > 0 ? [listed(in_force)] : []), ...(earlier.length > 0 ? [`${listed(earlier)} only in earlier publishes`] : [])];
      return parts.length > 0 ? `${name} (${parts.join('; ')})` : name;
    })
    .join(', ');
}

export const projectCommand: Command = {
  name: 'project',
  summary: "a project's published definition and kill switch (active or paused: by whom, when, why)",
  help: `Usage: baton project <project> [--json]

Show what Baton holds for a project, read from the events stream: whether a definition is
published (when, how many times, and by whom: the admin, or the person its publish named — BATON_OPERATOR),
its agents, workflows (each with its versions: ship (v1, v2); a version only earlier publishes
held, which runs in flight may still be pinned to, is said apart: ship (v2; v1 only in earlier
publishes)) and meshes, the projects it accepts handoffs from, and the kill switch — active, or
paused with the pause id, who paused it, when and why. --json prints the summary: workflows are
names, workflow_versions each workflow's versions ({ name, versions, in_force }).
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
              : `published ${d.published_at} by ${d.published_by}${d.on_behalf_of !== undefined ? ` on behalf of ${d.on_behalf_of} (claimed)` : ''} (${d.publishes === 1 ? '1 publish' : `${d.publishes} publishes`})`,
          ...(d !== null
            ? {
                lead: d.lead,
                agents: d.agents.join(', '),
                workflows: workflowsText(d),
                meshes: d.meshes.length > 0 ? d.meshes.join(', ') : '-',
                'accepts from': d.accepts_handoffs_from.length > 0 ? d.accepts_handoffs_from.join(', ') : '-',
              }
            : {}),
          status: c.status,
          ...(c.status === 'paused'
            ? { pause_id: c.pause_id, paused_by: c.paused_by, on_behalf_of: onBehalfOfText(c.on_behalf_of), paused_at: c.paused_at, reason: c.reason }
            : {}),
        }),
      );
    }
    return ExitCode.ok;
  },
};

/**
 * The person the admin connection said it acted for, marked as what it is: a claim the admin's
 * CLI made (`BATON_OPERATOR`), not an identity Baton checked. Undefined when nobody was named.
 */
export function onBehalfOfText(name: string | undefined): string | undefined {
  return name === undefined ? undefined : `${name} (claimed by the admin connection)`;
}
